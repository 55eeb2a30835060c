"""Inbound e-mail: a message to <webhook_token>@<INBOUND_EMAIL_DOMAIN> is an event of that routine,
through `receive_message`, `manage.py receive_email` (stdin) and `manage.py smtpd` (SMTP)."""

import contextlib
import secrets
import smtplib
import subprocess
import sys
from email.message import EmailMessage
from email.utils import make_msgid

import pytest
from django.conf import settings

from routines.inbound_email import address_for, html_to_text, receive_message
from routines.models import Event, Run
from tests import servers
from tests.factories import RoutineFactory
from tests.servers import ROOT, free_port, wait_for_quiet_database

DOMAIN = "routines.localhost"


def make_routine(account, **fields):
    values = {"name": "Mail triage", "prompt": "Summarise this e-mail", "trigger": "email",
              "delivery_targets": ["inapp"], "webhook_token": secrets.token_hex(24)}
    values.update(fields)
    return RoutineFactory(account=account, **values)


def message(to, *, subject="Invoice 42", text="Please pay by Friday.", html=None, message_id=None, **headers):
    msg = EmailMessage()
    msg["From"] = "Alice <alice@example.test>"
    msg["To"] = to
    msg["Subject"] = subject
    msg["Date"] = "Sun, 22 Nov 2026 04:30:00 +0000"
    msg["Message-ID"] = message_id or make_msgid(domain="example.test")
    for name, value in headers.items():
        msg[name.replace("_", "-")] = value
    if text is not None:
        msg.set_content(text)
    if html is not None:
        if text is None:
            msg.set_content(html, subtype="html")
        else:
            msg.add_alternative(html, subtype="html")
    return msg


def child_env(**extra):
    return servers.child_env(CELERY_BROKER_URL="memory://", INBOUND_EMAIL_DOMAIN=DOMAIN, **extra)


@pytest.fixture(autouse=True)
def _domain(settings):
    settings.INBOUND_EMAIL_DOMAIN = DOMAIN


@pytest.mark.django_db
class TestReceiveMessage:
    def test_it_queues_a_run_with_the_message_id_as_event_id(self, owner):
        routine = make_routine(owner)
        msg = message(address_for(routine), message_id="<inv-42@example.test>")
        outcome = receive_message(msg.as_bytes())
        assert outcome.answers == [(address_for(routine), 200,
                                    {"ok": True, "queued": True, "event_id": "<inv-42@example.test>"})]
        run = Run.objects.get(routine=routine)
        assert (run.trigger, run.status, run.event_id) == ("email", "queued", "<inv-42@example.test>")
        event = run.source_event
        assert event.source == "email"
        assert event.body == (
            "From: Alice <alice@example.test>\n"
            f"To: {address_for(routine)}\n"
            "Subject: Invoice 42\n"
            "Date: Sun, 22 Nov 2026 04:30:00 +0000\n\n"
            "Please pay by Friday."
        )

    def test_the_address_is_the_token_at_the_inbound_domain(self, owner):
        routine = make_routine(owner)
        assert address_for(routine) == f"{routine.webhook_token}@{DOMAIN}"

    def test_the_plain_text_part_is_preferred_over_html(self, owner):
        routine = make_routine(owner)
        receive_message(message(address_for(routine), text="plain words", html="<p>html words</p>").as_bytes())
        assert Event.objects.get(routine=routine).body.endswith("\n\nplain words")

    def test_an_html_only_message_is_reduced_to_text(self, owner):
        routine = make_routine(owner)
        html = ("<html><head><style>p {color: red}</style><title>t</title></head><body><h1>Order&nbsp;shipped</h1>"
                "<p>Track it <b>here</b> &amp; relax.</p><script>alert(1)</script><ul><li>one</li><li>two</li></ul>"
                "</body></html>")
        receive_message(message(address_for(routine), text=None, html=html).as_bytes())
        body = Event.objects.get(routine=routine).body
        assert body.endswith("\n\nOrder\xa0shipped\n\nTrack it here & relax.\n\none\n\ntwo")

    def test_recipient_matching_ignores_case_and_reads_cc(self, owner):
        routine = make_routine(owner)
        msg = message("someone@example.test", Cc=f"Routine <{routine.webhook_token.upper()}@ROUTINES.localhost>")
        assert receive_message(msg.as_bytes()).taken
        assert routine.runs.count() == 1

    def test_delivered_to_wins_over_the_visible_headers(self, owner):
        first, second = make_routine(owner), make_routine(owner)
        msg = message(f"{address_for(first)}, {address_for(second)}", Delivered_To=address_for(second))
        receive_message(msg.as_bytes())
        assert (first.runs.count(), second.runs.count()) == (0, 1)

    def test_the_envelope_decides_when_given(self, owner):
        shown, bcc = make_routine(owner), make_routine(owner)
        msg = message(address_for(shown))
        outcome = receive_message(msg.as_bytes(), envelope_recipients=[address_for(bcc)])
        assert [status for _, status, _ in outcome.answers] == [200]
        assert (shown.runs.count(), bcc.runs.count()) == (0, 1)

    def test_one_message_to_two_routines_queues_a_run_for_each(self, owner):
        first, second = make_routine(owner), make_routine(owner)
        msg = message(f"{address_for(first)}, {address_for(second)}")
        outcome = receive_message(msg.as_bytes())
        assert [status for _, status, _ in outcome.answers] == [200, 200]
        assert first.runs.count() == 1 and second.runs.count() == 1

    def test_a_second_copy_of_the_same_message_is_a_duplicate(self, owner):
        routine = make_routine(owner)
        raw = message(address_for(routine), message_id="<same@example.test>").as_bytes()
        receive_message(raw)
        outcome = receive_message(raw)
        assert outcome.answers[0][1:] == (200, {"ok": True, "ignored": "duplicate", "event_id": "<same@example.test>"})
        assert outcome.taken and routine.runs.count() == 1

    def test_the_31st_message_in_a_minute_is_rate_limited(self, owner):
        routine = make_routine(owner)
        answers = [receive_message(message(address_for(routine)).as_bytes()).answers[0][2] for _ in range(31)]
        assert all(answer.get("queued") for answer in answers[:30])
        assert answers[30] == {"ok": True, "ignored": "rate_limited"}
        assert routine.runs.count() == 30

    def test_a_paused_routine_ignores_mail(self, owner):
        routine = make_routine(owner, is_enabled=False, disabled_reason="user")
        outcome = receive_message(message(address_for(routine)).as_bytes())
        assert outcome.answers[0][1:] == (200, {"ok": True, "ignored": "disabled_routine"})
        assert routine.runs.count() == 0

    def test_a_message_over_the_cap_is_refused_and_one_at_the_cap_taken(self, owner, settings):
        routine = make_routine(owner)
        raw = message(address_for(routine), text="x" * 2000, message_id="<cap-1@example.test>").as_bytes()
        settings.WEBHOOK_MAX_BODY_BYTES = len(raw)
        assert receive_message(raw).answers[0][2].get("queued") is True
        settings.WEBHOOK_MAX_BODY_BYTES = len(raw) - 1
        raw = message(address_for(routine), text="x" * 2000, message_id="<cap-2@example.test>").as_bytes()
        outcome = receive_message(raw)
        assert outcome.too_large and not outcome.taken
        assert outcome.answers[0][2]["error"] == "payload_too_large"
        assert routine.runs.count() == 1

    def test_unknown_tokens_other_domains_and_non_email_routines_find_nothing(self, owner):
        hook = make_routine(owner, trigger="webhook")
        for to in (f"{secrets.token_hex(24)}@{DOMAIN}", f"{hook.webhook_token}@{DOMAIN}",
                   f"{make_routine(owner).webhook_token}@elsewhere.test", f"not-a-token@{DOMAIN}"):
            assert receive_message(message(to).as_bytes()).unknown, to
        assert Run.objects.count() == 0

    def test_a_message_without_message_id_uses_a_hash_of_itself(self, owner):
        routine = make_routine(owner)
        msg = message(address_for(routine))
        del msg["Message-ID"]
        raw = msg.as_bytes()
        outcome = receive_message(raw)
        assert outcome.answers[0][2]["event_id"].startswith("sha256:")
        assert receive_message(raw).answers[0][2]["ignored"] == "duplicate"


def test_html_to_text_keeps_blocks_apart():
    assert html_to_text("<div>a</div><div>b<br>c</div>") == "a\n\nb\nc"


@pytest.mark.django_db(transaction=True)
class TestReceiveEmailCommand:
    def run_command(self, raw, *args):
        return subprocess.run([sys.executable, "manage.py", "receive_email", *args], input=raw, cwd=ROOT,
                              env=child_env(), capture_output=True, timeout=120)

    def test_a_message_on_stdin_queues_a_run(self, owner):
        routine = make_routine(owner)
        done = self.run_command(message(address_for(routine), message_id="<pipe-1@example.test>").as_bytes())
        assert done.returncode == 0, done.stderr
        assert Run.objects.get(routine=routine).event_id == "<pipe-1@example.test>"
        again = self.run_command(message(address_for(routine), message_id="<pipe-1@example.test>").as_bytes())
        assert again.returncode == 0 and b"duplicate" in again.stdout
        assert routine.runs.count() == 1
        wait_for_quiet_database()

    def test_an_unknown_address_exits_ex_nouser(self, owner):
        done = self.run_command(message(f"{secrets.token_hex(24)}@{DOMAIN}").as_bytes())
        assert done.returncode == 67
        assert b"no recipient is a routine's address" in done.stderr

    def test_the_recipient_argument_is_the_envelope(self, owner):
        routine = make_routine(owner)
        done = self.run_command(message("list@example.test").as_bytes(), "--recipient", address_for(routine))
        assert done.returncode == 0, done.stderr
        assert routine.runs.count() == 1
        wait_for_quiet_database()

    def test_an_oversized_message_exits_ex_dataerr(self, owner):
        routine = make_routine(owner)
        raw = message(address_for(routine), text="y" * (settings.WEBHOOK_MAX_BODY_BYTES + 10)).as_bytes()
        done = self.run_command(raw)
        assert done.returncode == 65
        assert f"message larger than {settings.WEBHOOK_MAX_BODY_BYTES} bytes".encode() in done.stderr
        assert routine.runs.count() == 0


@contextlib.contextmanager
def smtpd_process():
    port = free_port()
    args = [sys.executable, "manage.py", "smtpd", "--host", "127.0.0.1", "--port", str(port)]
    with servers.server_process(args, name=f"smtpd-{port}", ready=servers.answers_on(port), env=child_env()):
        yield port


@pytest.fixture(scope="module")
def smtpd_port(django_db_setup, django_db_blocker):
    with django_db_blocker.unblock():
        with smtpd_process() as port:
            yield port


@pytest.mark.django_db(transaction=True)
class TestSmtpd:
    def test_an_smtp_round_trip_queues_a_run_with_the_message_id(self, owner, smtpd_port):
        routine = make_routine(owner)
        msg = message(address_for(routine), message_id="<smtp-1@example.test>")
        with smtplib.SMTP("127.0.0.1", smtpd_port, timeout=30) as client:
            refused = client.send_message(msg, from_addr="alice@example.test", to_addrs=[address_for(routine)])
            assert refused == {}
            # The same message again is accepted by SMTP and ignored as a duplicate.
            client.send_message(msg, from_addr="alice@example.test", to_addrs=[address_for(routine)])
        run = Run.objects.get(routine=routine)
        assert (run.trigger, run.status, run.event_id) == ("email", "queued", "<smtp-1@example.test>")
        assert "Subject: Invoice 42" in run.source_event.body
        wait_for_quiet_database()

    def test_it_refuses_other_domains_and_unknown_routines_with_550(self, owner, smtpd_port):
        hook = make_routine(owner, trigger="webhook")
        for to in ("bob@example.test", f"{secrets.token_hex(24)}@{DOMAIN}", f"{hook.webhook_token}@{DOMAIN}"):
            with smtplib.SMTP("127.0.0.1", smtpd_port, timeout=30) as client:
                with pytest.raises(smtplib.SMTPRecipientsRefused) as refused:
                    client.send_message(message(to), from_addr="alice@example.test", to_addrs=[to])
            assert refused.value.recipients[to][0] == 550, to
        assert Run.objects.count() == 0
        wait_for_quiet_database()

    def test_only_the_routine_recipients_of_a_mixed_envelope_are_taken(self, owner, smtpd_port):
        routine = make_routine(owner)
        with smtplib.SMTP("127.0.0.1", smtpd_port, timeout=30) as client:
            refused = client.send_message(message(address_for(routine)), from_addr="alice@example.test",
                                          to_addrs=[address_for(routine), "carol@example.test"])
        assert list(refused) == ["carol@example.test"] and refused["carol@example.test"][0] == 550
        assert routine.runs.count() == 1
        wait_for_quiet_database()

    def test_it_refuses_a_message_over_the_cap_with_552(self, owner, smtpd_port):
        routine = make_routine(owner)
        msg = message(address_for(routine), text="z" * settings.WEBHOOK_MAX_BODY_BYTES)
        with smtplib.SMTP("127.0.0.1", smtpd_port, timeout=30) as client:
            client.ehlo()
            client.esmtp_features.pop("size", None)  # a client that ignores SIZE is refused after DATA
            with pytest.raises(smtplib.SMTPDataError) as refused:
                client.send_message(msg, from_addr="alice@example.test", to_addrs=[address_for(routine)])
        assert refused.value.smtp_code == 552
        with smtplib.SMTP("127.0.0.1", smtpd_port, timeout=30) as client:
            with pytest.raises(smtplib.SMTPSenderRefused) as early:  # one that reads SIZE is refused at MAIL FROM
                client.send_message(msg, from_addr="alice@example.test", to_addrs=[address_for(routine)])
        assert early.value.smtp_code == 552
        assert routine.runs.count() == 0
        wait_for_quiet_database()
