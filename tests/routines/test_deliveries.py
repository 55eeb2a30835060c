"""Deliveries (docs/design.md, "Routines"): `inapp`, `email:` and `webhook:https://…` (signed JSON, https
only, private addresses refused unless allowed, retried with backoff on 5xx and timeouts). Each
delivery is a task of its own (`routines.tasks.deliver_run_target`), retried by Celery."""

import socket
import threading

import pytest
from django.core import mail

from gateway.celery import app as celery_app
from routines.deliveries.base import DeliveryFailed
from routines.deliveries.webhook import refuse_private_host
from routines.models import Delivery, InboxMessage, Routine, Run
from routines.routine_writes import new_token
from routines.tasks import deliver_run_target
from tests.factories import DeliveryFactory, RoutineFactory, RunFactory
from tests.routines.https_receiver import https_receiver

TASK = "routines.tasks.deliver_run_target"


def deliver(run, target: str, text: str) -> tuple[int, str]:
    """A delivery as a worker makes it: a pending row of an answered run, sent by its task run
    in this process (Celery's retries too, without their countdown). Its tries and last error."""
    Run.objects.filter(pk=run.pk).update(output=text)
    run.output = text
    delivery = DeliveryFactory(run=run, target=target)
    deliver_run_target.apply(args=(delivery.pk,))
    delivery.refresh_from_db()
    assert delivery.status in ("succeeded", "failed"), delivery.status
    assert (delivery.status == "succeeded") == (delivery.error == "")
    return delivery.attempts, delivery.error


@pytest.fixture
def countdowns(monkeypatch):
    """The countdowns of the retries Celery schedules for the delivery task."""
    task = celery_app.tasks[TASK]
    real = task.retry
    seen = []

    def retry(*args, **kwargs):
        seen.append(kwargs.get("countdown"))
        return real(*args, **kwargs)

    monkeypatch.setattr(task, "retry", retry)
    return seen

SECRET = "outbound-secret"


@pytest.fixture
def routine(owner):
    return RoutineFactory(account=owner, name="Digest", prompt="p", trigger="webhook",
                          delivery_targets=["inapp"], webhook_secret=SECRET, webhook_token=new_token())


@pytest.fixture
def run(routine):
    return RunFactory(routine=routine, trigger="webhook", event_id="evt-7", status="running")


@pytest.fixture
def receiver(settings):
    settings.DELIVERY_ALLOW_PRIVATE_ADDRESSES = True
    settings.DELIVERY_RETRY_BACKOFF_SECONDS = 0.01
    with https_receiver() as r:
        settings.DELIVERY_CA_BUNDLE = r.ca_bundle
        yield r


def test_inapp_puts_the_result_in_the_owners_inbox(run, owner):
    assert deliver(run, "inapp", "the result") == (1, "")
    message = InboxMessage.objects.get()
    assert (message.account, message.title, message.body, message.run) == (owner, "Digest", "the result", run)


def test_email_sends_the_result(run):
    assert deliver(run, "email:ops@example.com", "the result") == (1, "")
    (sent,) = mail.outbox
    assert sent.to == ["ops@example.com"]
    assert sent.body == "the result"
    assert "Digest" in sent.subject


def test_a_name_with_line_breaks_makes_a_one_line_subject(run):
    Routine.objects.filter(pk=run.routine_id).update(name="Daily\nreport\r\n\tfor  ops")
    run.refresh_from_db()
    assert deliver(run, "email:ops@example.com", "the result") == (1, "")
    assert mail.outbox[0].subject == "[Daily report for ops] routine result"


def test_an_unreachable_mail_server_is_retried_then_fails(run, settings):
    port = _closed_port()
    settings.EMAIL_BACKEND = "django.core.mail.backends.smtp.EmailBackend"
    settings.EMAIL_HOST, settings.EMAIL_PORT = "127.0.0.1", port
    settings.EMAIL_USE_TLS = settings.EMAIL_USE_SSL = False
    settings.DELIVERY_RETRY_BACKOFF_SECONDS = 0.01
    attempts, error = deliver(run, "email:ops@example.com", "x")
    assert attempts == 3 and "could not be reached" in error


def test_webhook_posts_signed_json(run, receiver):
    assert deliver(run, f"webhook:{receiver.url}/in?x=1", "the result") == (1, "")
    (got,) = receiver.received
    assert got.path == "/in?x=1"
    assert got.headers["content-type"] == "application/json"
    assert got.json == {"routine_id": run.routine_id, "run_id": run.pk, "event_id": "evt-7", "trigger": "webhook",
                        "output": "the result", "created_at": run.created_at.strftime("%Y-%m-%dT%H:%M:%S.%fZ")}
    assert got.signature_valid(SECRET)


def test_webhook_without_a_secret_is_unsigned(run, receiver):
    Routine.objects.filter(pk=run.routine_id).update(webhook_secret=None)
    run.refresh_from_db()
    assert deliver(run, f"webhook:{receiver.url}/in", "x") == (1, "")
    assert "x-svc-signature" not in receiver.received[0].headers


def test_webhook_retries_a_5xx_with_backoff(run, receiver, countdowns):
    receiver.statuses = [502, 503]
    assert deliver(run, f"webhook:{receiver.url}/in", "x") == (3, "")
    assert len(receiver.received) == 3
    first = int(max(1.0, deliver_run_target.retry_backoff))  # DELIVERY_RETRY_BACKOFF_SECONDS, read at start
    assert countdowns == [first, 2 * first]  # Celery's exponential backoff, not a sleep in the task


def test_the_delivery_task_is_retried_by_celery():
    from routines.deliveries import RetryableDeliveryError

    task = celery_app.tasks[TASK]
    assert task.autoretry_for == (RetryableDeliveryError,)
    assert task.retry_backoff == settings_value("DELIVERY_RETRY_BACKOFF_SECONDS")
    assert task.retry_backoff_max == settings_value("DELIVERY_RETRY_BACKOFF_MAX_SECONDS")
    assert task.retry_jitter is False
    assert task.max_retries == settings_value("DELIVERY_RETRY_ATTEMPTS") - 1
    assert task.acks_late is True and task.reject_on_worker_lost is True
    assert task.time_limit > settings_value("DELIVERY_TIMEOUT_SECONDS")


def settings_value(name):
    from django.conf import settings

    return getattr(settings, name)


def test_a_delivery_that_succeeded_is_not_sent_again(run, receiver):
    assert deliver(run, f"webhook:{receiver.url}/in", "x") == (1, "")
    delivery = Delivery.objects.get()
    deliver_run_target.apply(args=(delivery.pk,))  # enqueued again by a sweep
    deliver_run_target.apply(args=(delivery.pk,), task_id=delivery.task_id)  # its message delivered again
    delivery.refresh_from_db()
    assert (delivery.status, delivery.attempts) == ("succeeded", 1)
    assert len(receiver.received) == 1


def test_a_delivery_held_by_another_task_is_left_to_it(run, receiver):
    from datetime import timedelta

    from django.utils import timezone

    delivery = DeliveryFactory(run=run, target=f"webhook:{receiver.url}/in", task_id="first-task",
                               busy_until=timezone.now() + timedelta(seconds=60))
    deliver_run_target.apply(args=(delivery.pk,))
    delivery.refresh_from_db()
    assert (delivery.status, delivery.attempts) == ("pending", 0) and receiver.received == []
    deliver_run_target.apply(args=(delivery.pk,), task_id="first-task")  # a retry of the holder takes it
    delivery.refresh_from_db()
    assert (delivery.status, delivery.attempts) == ("succeeded", 1) and len(receiver.received) == 1


def test_a_retryable_failure_is_recorded_while_the_retry_waits(run, receiver, monkeypatch):
    receiver.statuses = [503]
    task = celery_app.tasks[TASK]
    real = task.retry
    between = []

    def retry(*args, **kwargs):  # the row as it stands while Celery's retry waits
        between.append(Delivery.objects.values_list("status", "attempts", "error").get())
        return real(*args, **kwargs)

    monkeypatch.setattr(task, "retry", retry)
    assert deliver(run, f"webhook:{receiver.url}/in", "x") == (2, "")
    assert between == [("pending", 1, "The webhook target answered 503.")]


def test_webhook_gives_up_after_the_attempts(run, receiver, settings):
    settings.DELIVERY_RETRY_ATTEMPTS = 2
    receiver.statuses = [500, 500, 500]
    attempts, error = deliver(run, f"webhook:{receiver.url}/in", "x")
    assert (attempts, error) == (2, "The webhook target answered 500.")


def test_webhook_does_not_retry_a_4xx(run, receiver):
    receiver.statuses = [404]
    assert deliver(run, f"webhook:{receiver.url}/in", "x") == (1, "The webhook target answered 404.")


def test_webhook_retries_a_timeout(run, settings):
    settings.DELIVERY_ALLOW_PRIVATE_ADDRESSES = True
    settings.DELIVERY_RETRY_BACKOFF_SECONDS = 0.01
    settings.DELIVERY_TIMEOUT_SECONDS = 0.2
    with _silent_server() as port:
        attempts, error = deliver(run, f"webhook:https://127.0.0.1:{port}/in", "x")
    assert attempts == 3 and error == "The webhook target did not answer in time."


def test_webhook_trusts_only_the_configured_ca(run, receiver, settings):
    settings.DELIVERY_CA_BUNDLE = ""
    settings.DELIVERY_RETRY_ATTEMPTS = 1
    attempts, error = deliver(run, f"webhook:{receiver.url}/in", "x")
    assert attempts == 1 and "could not be reached" in error
    assert receiver.received == []


def test_webhook_refuses_private_addresses_unless_allowed(run, receiver, settings):
    settings.DELIVERY_ALLOW_PRIVATE_ADDRESSES = False
    attempts, error = deliver(run, f"webhook:{receiver.url}/in", "x")
    assert attempts == 1 and "non-public address" in error
    assert receiver.received == []


@pytest.mark.parametrize("host", ["127.0.0.1", "localhost", "10.0.0.8", "192.168.1.1", "169.254.169.254", "::1",
                                  "fe80::1", "0.0.0.0", "100.64.0.1"])
def test_non_public_hosts_are_refused(host):
    with pytest.raises(DeliveryFailed) as refused:
        refuse_private_host(host, 443)
    assert refused.value.retryable is False


@pytest.mark.parametrize("host", ["::ffff:10.0.0.1", "::127.0.0.1", "::a9fe:a9fe", "64:ff9b::a00:1", "64:ff9b::7f00:1",
                                  "2002:a9fe:a9fe::1", "2002:7f00:1::1", "64:ff9b:1::a00:1"])
def test_ipv4_carried_in_ipv6_is_checked_as_ipv4(host):
    with pytest.raises(DeliveryFailed):
        refuse_private_host(host, 443)


@pytest.mark.parametrize("host", ["93.184.216.34", "::ffff:93.184.216.34", "64:ff9b::5db8:d822", "2002:5db8:d822::1"])
def test_a_public_address_passes(host):
    refuse_private_host(host, 443)


def _fake_dns(monkeypatch, answers):
    """`localhost` resolves to the next of `answers` at each lookup (an exception is raised)."""
    real = socket.getaddrinfo
    lookups = []

    def getaddrinfo(host, port, *args, **kwargs):
        if host != "localhost":
            return real(host, port, *args, **kwargs)
        lookups.append(host)
        answer = answers[min(len(lookups), len(answers)) - 1]
        if isinstance(answer, Exception):
            raise answer
        return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", (answer, port))]

    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
    return lookups


def test_webhook_connects_to_the_address_that_was_checked(run, receiver, settings, monkeypatch):
    """DNS rebinding: a name that answers a public address to the check and a loopback one to
    the connection must not reach the loopback service."""
    settings.DELIVERY_ALLOW_PRIVATE_ADDRESSES = False
    settings.DELIVERY_RETRY_ATTEMPTS = 1
    port = int(receiver.url.rsplit(":", 1)[1])
    lookups = _fake_dns(monkeypatch, ["93.184.216.34", "127.0.0.1"])
    connected = []

    def create_connection(address, *args, **kwargs):
        connected.append(address)
        raise ConnectionRefusedError(111, "Connection refused")

    monkeypatch.setattr(socket, "create_connection", create_connection)
    attempts, error = deliver(run, f"webhook:https://localhost:{port}/in", "x")
    assert (attempts, error) == (1, "The webhook target could not be reached.")
    assert lookups == ["localhost"] and connected == [("93.184.216.34", port)]
    assert receiver.received == []


def test_webhook_to_the_checked_address_keeps_the_name_for_host_and_certificate(run, receiver, monkeypatch):
    port = int(receiver.url.rsplit(":", 1)[1])
    _fake_dns(monkeypatch, ["127.0.0.1", socket.gaierror(socket.EAI_NONAME, "no second lookup")])
    assert deliver(run, f"webhook:https://localhost:{port}/in", "x") == (1, "")
    assert receiver.received[0].headers["host"] == f"localhost:{port}"


def test_a_refused_connection_is_reported_without_the_system_error(run, settings):
    settings.DELIVERY_ALLOW_PRIVATE_ADDRESSES = True
    settings.DELIVERY_RETRY_ATTEMPTS = 1
    attempts, error = deliver(run, f"webhook:https://127.0.0.1:{_closed_port()}/in", "x")
    assert (attempts, error) == (1, "The webhook target could not be reached.")


def test_webhook_is_https_only(run, settings):
    settings.DELIVERY_ALLOW_PRIVATE_ADDRESSES = True
    assert deliver(run, "webhook:http://127.0.0.1:9/x", "x")[1].startswith("Not a delivery target")


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class _silent_server:
    """Accepts connections and never answers (not even the TLS handshake)."""

    def __enter__(self):
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(8)
        self.held = []
        self.stop = False
        threading.Thread(target=self._accept, daemon=True).start()
        return self.sock.getsockname()[1]

    def _accept(self):
        while not self.stop:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.held.append(conn)

    def __exit__(self, *exc):
        self.stop = True
        self.sock.close()
        for conn in self.held:
            conn.close()
