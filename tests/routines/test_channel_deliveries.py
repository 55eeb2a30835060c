"""The telegram / whatsapp deliveries to linked channels, and the admin's list of channels, against a
loopback server standing in for both providers' HTTP APIs."""

import secrets

import pytest

from routines.deliveries import telegram, whatsapp
from routines.deliveries.base import DeliveryFailed
from tests.factories import LinkedChannelFactory, RoutineFactory, RunFactory
from tests.routines import channels_support
from tests.routines.channels_support import BOT_TOKEN, NOW, NUMBER, WA_TOKEN

provider_fixture = channels_support.provider_fixture  # the fixture `provider`


def linked_run(account, targets):
    routine = RoutineFactory(account=account, name="r", prompt="p", trigger="webhook",
                             delivery_targets=targets, webhook_token=secrets.token_hex(24))
    return RunFactory(routine=routine, trigger="manual")


def link(account, kind, address):
    return LinkedChannelFactory(account=account, kind=kind, address=address, verified_at=NOW)


@pytest.mark.django_db
class TestTelegramDelivery:
    def test_it_posts_to_the_linked_chat_in_pieces_of_4096(self, owner, provider):
        link(owner, "telegram", "-1001")
        text = "a" * 3000 + "\n" + "b" * 3000 + " " + "c" * 5000
        telegram.send(linked_run(owner, ["telegram"]), "telegram", text)
        assert [r["path"] for r in provider.requests] == [f"/bot{BOT_TOKEN}/sendMessage"] * 4
        assert [r["json"] for r in provider.requests] == [
            {"chat_id": "-1001", "text": "a" * 3000},
            {"chat_id": "-1001", "text": "b" * 3000},
            {"chat_id": "-1001", "text": "c" * 4096},
            {"chat_id": "-1001", "text": "c" * 904},
        ]

    def test_a_text_of_exactly_4096_is_one_message(self, owner, provider):
        link(owner, "telegram", "5")
        telegram.send(linked_run(owner, ["telegram"]), "telegram", "x" * 4096)
        assert [len(r["json"]["text"]) for r in provider.requests] == [4096]

    def test_a_provider_5xx_or_429_can_be_retried_and_a_4xx_cannot(self, owner, provider, caplog):
        link(owner, "telegram", "5")
        run = linked_run(owner, ["telegram"])
        for status, retryable in ((502, True), (429, True), (400, False), (403, False), (404, False)):
            provider.replies.append((status, {"ok": False, "error_code": status, "description": f"Problem {status}"}))
            with pytest.raises(DeliveryFailed) as failed:
                telegram.send(run, "telegram", "hi")
            assert failed.value.retryable is retryable
            assert failed.value.message == f"Telegram answered {status}: Problem {status}"
            assert BOT_TOKEN not in str(failed.value)
        assert BOT_TOKEN not in caplog.text

    def test_an_unreachable_api_can_be_retried(self, owner, provider, settings):
        link(owner, "telegram", "5")
        provider.close()
        with pytest.raises(DeliveryFailed) as failed:
            telegram.send(linked_run(owner, ["telegram"]), "telegram", "hi")
        assert failed.value.retryable is True
        assert failed.value.message == "Telegram could not be reached (ConnectError)."

    def test_without_a_linked_chat_or_a_bot_it_fails_for_good(self, owner, provider, settings):
        run = linked_run(owner, ["telegram"])
        LinkedChannelFactory(account=owner, kind="telegram", address="")  # a link asked for, never used
        with pytest.raises(DeliveryFailed) as failed:
            telegram.send(run, "telegram", "hi")
        assert failed.value.retryable is False and "No Telegram chat is linked" in failed.value.message
        link(owner, "telegram", "5")
        settings.TELEGRAM_BOT_TOKEN = ""
        with pytest.raises(DeliveryFailed) as failed:
            telegram.send(run, "telegram", "hi")
        assert failed.value.retryable is False
        assert failed.value.message == "Telegram is not configured on this gateway (TELEGRAM_BOT_TOKEN is empty)."
        assert provider.requests == []


@pytest.mark.django_db
class TestWhatsAppDelivery:
    def test_it_sends_the_text_to_the_confirmed_number(self, owner, provider):
        link(owner, "whatsapp", NUMBER)
        whatsapp.send(linked_run(owner, [f"whatsapp:{NUMBER}"]), f"whatsapp:{NUMBER}", "Report: all good")
        [request] = provider.requests
        assert request["path"] == "/v21.0/1098765/messages"
        assert request["headers"]["Authorization"] == f"Bearer {WA_TOKEN}"
        assert request["json"] == {"messaging_product": "whatsapp", "recipient_type": "individual", "to": NUMBER,
                                   "type": "text", "text": {"preview_url": False, "body": "Report: all good"}}

    def test_long_texts_go_in_pieces(self, owner, provider):
        link(owner, "whatsapp", NUMBER)
        whatsapp.send(linked_run(owner, [f"whatsapp:{NUMBER[1:]}"]), f"whatsapp:{NUMBER[1:]}", "w" * 5000)
        assert [len(r["json"]["text"]["body"]) for r in provider.requests] == [4096, 904]

    def test_an_unconfirmed_or_foreign_number_fails_for_good(self, owner, outsider, provider):
        LinkedChannelFactory(account=owner, kind="whatsapp", address=NUMBER)  # never confirmed
        link(outsider, "whatsapp", "+5511999990001")
        for number in (NUMBER, "+5511999990001", "garbage"):
            with pytest.raises(DeliveryFailed) as failed:
                whatsapp.send(linked_run(owner, [f"whatsapp:{number}"]), f"whatsapp:{number}", "hi")
            assert failed.value.retryable is False and "is not linked and verified" in failed.value.message
        assert provider.requests == []

    def test_provider_failures(self, owner, provider, settings, caplog):
        link(owner, "whatsapp", NUMBER)
        run = linked_run(owner, [f"whatsapp:{NUMBER}"])
        for status, retryable in ((500, True), (503, True), (429, True), (400, False), (401, False)):
            provider.replies.append((status, {"error": {"message": f"Meta says {status}", "type": "OAuthException"}}))
            with pytest.raises(DeliveryFailed) as failed:
                whatsapp.send(run, f"whatsapp:{NUMBER}", "hi")
            assert failed.value.retryable is retryable
            assert failed.value.message == f"WhatsApp answered {status}: Meta says {status}"
        assert WA_TOKEN not in caplog.text
        settings.WHATSAPP_PHONE_NUMBER_ID = ""
        with pytest.raises(DeliveryFailed) as failed:
            whatsapp.send(run, f"whatsapp:{NUMBER}", "hi")
        assert failed.value.retryable is False
        assert failed.value.message == ("WhatsApp is not configured on this gateway "
                                        "(WHATSAPP_TOKEN and WHATSAPP_PHONE_NUMBER_ID are needed).")


@pytest.mark.django_db
def test_the_admin_lists_channels_without_their_code(client, owner, provider):
    from tests.factories import AccountFactory

    client.force_login(AccountFactory(is_staff=True, is_superuser=True, role="admin"))
    channel = LinkedChannelFactory(account=owner, kind="whatsapp", address=NUMBER,
                                   code_hash="f" * 64, code_expires_at=NOW)
    listing = client.get("/admin/routines/linkedchannel/")
    assert listing.status_code == 200 and NUMBER.encode() in listing.content
    page = client.get(f"/admin/routines/linkedchannel/{channel.pk}/change/")
    assert page.status_code == 200 and b"f" * 64 not in page.content
    assert client.get("/admin/routines/linkedchannel/add/").status_code == 403
