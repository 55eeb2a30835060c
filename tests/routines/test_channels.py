"""Linked channels (Telegram deep link, WhatsApp code) and their list, against a loopback server
standing in for both providers' HTTP APIs. The telegram / whatsapp deliveries are in
test_channel_deliveries.py."""

import json
import re
from datetime import timedelta

import pytest
import time_machine

from routines.channels import EXPIRED_REPLY, HELP_REPLY, LINKED_REPLY
from routines.linked_channels import is_linked
from routines.models import LinkedChannel
from tests.contract import assert_detail, assert_native_unauthenticated
from tests.factories import api_key_for, bearer
from tests.routines import channels_support
from tests.routines.channels_support import BOT_TOKEN, HOOK_SECRET, NOW, NUMBER, WA_TOKEN

provider_fixture = channels_support.provider_fixture  # the fixture `provider`
ProviderStandIn = channels_support.ProviderStandIn  # test_run_secrets.py and tests/fuzz/conftest.py take it from here


@pytest.fixture
def key(owner):
    return api_key_for(owner)


def post(client, path, key, body=None):
    return client.post(path, data=json.dumps(body or {}), content_type="application/json", headers=bearer(key))


def telegram_update(text, chat_id=4242):
    return {"update_id": 1, "message": {"message_id": 7, "date": 1763787600, "text": text,
                                        "from": {"id": chat_id, "is_bot": False, "first_name": "Olive"},
                                        "chat": {"id": chat_id, "type": "private", "first_name": "Olive"}}}


def send_update(client, update, secret=HOOK_SECRET):
    return client.post(f"/api/v1/channels/telegram/updates/{secret}", data=json.dumps(update),
                       content_type="application/json")


def link_code(client, key):
    response = post(client, "/api/v1/channels/telegram/link", key)
    assert response.status_code == 201, response.content
    return response.json()["link"].rpartition("=")[2]


def sent_code(provider):
    return re.search(r"\b(\d{6})\b", provider.requests[-1]["json"]["text"]["body"]).group(1)


@pytest.mark.django_db
class TestTelegramLinking:
    def test_it_gives_a_one_time_deep_link(self, client, key, owner, provider):
        with time_machine.travel(NOW, tick=False):
            response = post(client, "/api/v1/channels/telegram/link", key)
        assert response.status_code == 201
        body = response.json()
        assert set(body) == {"link", "expires_at"}
        assert re.fullmatch(r"https://t\.me/gw_test_bot\?start=[A-Za-z0-9_-]{32}", body["link"])
        assert body["expires_at"] == "2026-11-22T05:15:00.000000Z"
        code = body["link"].rpartition("=")[2]
        pending = LinkedChannel.objects.get(account=owner, kind="telegram")
        assert pending.verified_at is None and code not in pending.code_hash and len(pending.code_hash) == 64
        assert not is_linked(owner, "telegram")
        assert response["X-RateLimit-Limit"] == "300"

    def test_start_with_the_code_links_the_chat_and_answers_it(self, client, key, owner, provider):
        code = link_code(client, key)
        response = send_update(client, telegram_update(f"/start {code}"))
        assert response.status_code == 200 and response.json() == {"ok": True}
        assert is_linked(owner, "telegram")
        assert LinkedChannel.objects.get(account=owner, kind="telegram").address == "4242"
        assert provider.requests == [{
            "path": f"/bot{BOT_TOKEN}/sendMessage",
            "headers": provider.requests[0]["headers"],
            "json": {"chat_id": "4242", "text": LINKED_REPLY},
        }]
        assert provider.requests[0]["headers"]["Content-Type"] == "application/json"
        listed = client.get("/api/v1/channels", headers=bearer(key)).json()["channels"]
        assert [(c["kind"], c["address"], c["verified"]) for c in listed] == [("telegram", "4242", True)]

    def test_a_code_works_once(self, client, key, owner, provider):
        code = link_code(client, key)
        send_update(client, telegram_update(f"/start {code}", chat_id=1))
        send_update(client, telegram_update(f"/start {code}", chat_id=2))
        assert LinkedChannel.objects.get(account=owner, kind="telegram").address == "1"
        assert [r["json"] for r in provider.requests] == [{"chat_id": "1", "text": LINKED_REPLY},
                                                          {"chat_id": "2", "text": EXPIRED_REPLY}]

    def test_a_code_expires(self, client, key, owner, provider):
        with time_machine.travel(NOW, tick=False):
            code = link_code(client, key)
        with time_machine.travel(NOW + timedelta(seconds=899), tick=False):
            send_update(client, telegram_update(f"/start {code}", chat_id=-100))  # the last moment it works
        assert is_linked(owner, "telegram")
        with time_machine.travel(NOW + timedelta(seconds=1000), tick=False):
            code = link_code(client, key)
        with time_machine.travel(NOW + timedelta(seconds=1900), tick=False):
            send_update(client, telegram_update(f"/start {code}", chat_id=7))
        assert provider.requests[-1]["json"] == {"chat_id": "7", "text": EXPIRED_REPLY}
        assert LinkedChannel.objects.get(account=owner, kind="telegram", verified_at__isnull=False).address == "-100"

    def test_linking_another_chat_replaces_the_first(self, client, key, owner, provider):
        send_update(client, telegram_update(f"/start {link_code(client, key)}", chat_id=1))
        send_update(client, telegram_update(f"/start {link_code(client, key)}", chat_id=2))
        assert list(LinkedChannel.objects.filter(account=owner).values_list("address", flat=True)) == ["2"]

    def test_other_messages_get_help_or_nothing(self, client, provider):
        send_update(client, telegram_update("/start"))
        send_update(client, telegram_update("hello bot"))
        send_update(client, {"update_id": 2, "edited_message": {"text": "/start x"}})
        response = client.post(f"/api/v1/channels/telegram/updates/{HOOK_SECRET}", data=b"not json",
                               content_type="application/json")
        assert response.status_code == 200 and response.json() == {"ok": True}
        assert [r["json"] for r in provider.requests] == [{"chat_id": "4242", "text": HELP_REPLY}]

    def test_a_wrong_or_unset_secret_is_a_plain_404(self, client, key, owner, provider, settings):
        code = link_code(client, key)
        response = send_update(client, telegram_update(f"/start {code}"), secret="wrong")
        assert response.status_code == 404 and response.json() == {"message": "Not Found."}
        settings.TELEGRAM_WEBHOOK_SECRET = ""
        assert send_update(client, telegram_update(f"/start {code}"), secret="").status_code == 404
        assert not is_linked(owner, "telegram") and provider.requests == []

    def test_a_failed_answer_to_the_chat_still_links_it(self, client, key, owner, provider):
        code = link_code(client, key)
        provider.replies.append((403, {"ok": False, "error_code": 403, "description": "Forbidden: bot was blocked"}))
        assert send_update(client, telegram_update(f"/start {code}")).status_code == 200
        assert is_linked(owner, "telegram")

    def test_without_a_bot_it_is_not_available(self, client, key, settings):
        settings.TELEGRAM_BOT_TOKEN = ""
        response = post(client, "/api/v1/channels/telegram/link", key)
        assert assert_detail(response, 501) == "Telegram is not set up on this gateway."

    def test_it_needs_a_credential(self, client):
        assert_native_unauthenticated(client.post("/api/v1/channels/telegram/link"))
        assert_native_unauthenticated(client.get("/api/v1/channels"))


@pytest.mark.django_db
class TestWhatsAppLinking:
    def test_a_code_is_sent_through_the_cloud_api_and_confirms_the_number(self, client, key, owner, provider):
        with time_machine.travel(NOW, tick=False):
            response = post(client, "/api/v1/channels/whatsapp", key, {"number": NUMBER})
        assert response.status_code == 201
        body = response.json()
        assert body["code_expires_at"] == "2026-11-22T05:15:00.000000Z"
        assert body["channel"]["kind"] == "whatsapp" and body["channel"]["address"] == NUMBER
        assert body["channel"]["verified"] is False
        [request] = provider.requests
        assert request["path"] == "/v21.0/1098765/messages"
        assert request["headers"]["Authorization"] == f"Bearer {WA_TOKEN}"
        code = sent_code(provider)
        assert request["json"] == {
            "messaging_product": "whatsapp", "recipient_type": "individual", "to": NUMBER, "type": "text",
            "text": {"preview_url": False, "body": f"Your confirmation code is {code}. It expires in 15 minutes."},
        }
        assert code not in json.dumps(body)
        assert not is_linked(owner, "whatsapp", NUMBER)
        with time_machine.travel(NOW + timedelta(seconds=60), tick=False):
            confirmed = post(client, "/api/v1/channels/whatsapp/verify", key, {"number": NUMBER, "code": code})
        assert confirmed.status_code == 200
        assert confirmed.json()["channel"] == {**body["channel"], "verified": True,
                                               "verified_at": "2026-11-22T05:01:00.000000Z"}
        assert is_linked(owner, "whatsapp", NUMBER) and is_linked(owner, "whatsapp", NUMBER[1:])
        assert not is_linked(owner, "whatsapp", "+5511999990001") and not is_linked(owner, "whatsapp")

    def test_the_code_can_be_sent_as_an_authentication_template(self, client, key, provider, settings):
        settings.WHATSAPP_CODE_TEMPLATE = "gw_login_code"
        settings.WHATSAPP_CODE_TEMPLATE_LANGUAGE = "pt_BR"
        assert post(client, "/api/v1/channels/whatsapp", key, {"number": "5511999990000"}).status_code == 201
        template = provider.requests[0]["json"]["template"]
        code = template["components"][0]["parameters"][0]["text"]
        assert re.fullmatch(r"\d{6}", code)
        assert provider.requests[0]["json"] == {
            "messaging_product": "whatsapp", "recipient_type": "individual", "to": NUMBER, "type": "template",
            "template": {"name": "gw_login_code", "language": {"code": "pt_BR"}, "components": [
                {"type": "body", "parameters": [{"type": "text", "text": code}]},
                {"type": "button", "sub_type": "url", "index": "0", "parameters": [{"type": "text", "text": code}]},
            ]},
        }

    def test_five_wrong_codes_use_up_the_code(self, client, key, owner, provider):
        post(client, "/api/v1/channels/whatsapp", key, {"number": NUMBER})
        code = sent_code(provider)
        wrong = f"{(int(code) + 1) % 1000000:06d}"
        for _ in range(5):
            response = post(client, "/api/v1/channels/whatsapp/verify", key, {"number": NUMBER, "code": wrong})
            assert response.status_code == 422
            assert response.json() == {"message": "The code is wrong.", "errors": {"code": ["The code is wrong."]}}
        response = post(client, "/api/v1/channels/whatsapp/verify", key, {"number": NUMBER, "code": code})
        assert response.json()["errors"] == {"code": ["Too many wrong codes; ask for a new one."]}
        assert not is_linked(owner, "whatsapp", NUMBER)

    def test_four_wrong_codes_still_leave_the_right_one_working(self, client, key, owner, provider):
        post(client, "/api/v1/channels/whatsapp", key, {"number": NUMBER})
        code = sent_code(provider)
        wrong = f"{(int(code) + 1) % 1000000:06d}"
        for _ in range(4):
            post(client, "/api/v1/channels/whatsapp/verify", key, {"number": NUMBER, "code": wrong})
        response = post(client, "/api/v1/channels/whatsapp/verify", key, {"number": NUMBER, "code": code})
        assert response.status_code == 200
        assert is_linked(owner, "whatsapp", NUMBER)

    def test_a_code_expires(self, client, key, owner, provider):
        with time_machine.travel(NOW, tick=False):
            post(client, "/api/v1/channels/whatsapp", key, {"number": NUMBER})
        code = sent_code(provider)
        with time_machine.travel(NOW + timedelta(seconds=900), tick=False):
            response = post(client, "/api/v1/channels/whatsapp/verify", key, {"number": NUMBER, "code": code})
        assert response.json()["errors"] == {"code": ["The code has expired; ask for a new one."]}

    def test_a_new_code_waits_a_minute_and_replaces_the_old(self, client, key, owner, provider):
        with time_machine.travel(NOW, tick=False):
            post(client, "/api/v1/channels/whatsapp", key, {"number": NUMBER})
        first = sent_code(provider)
        with time_machine.travel(NOW + timedelta(seconds=59), tick=False):
            early = post(client, "/api/v1/channels/whatsapp", key, {"number": NUMBER})
        assert early.status_code == 422
        assert early.json()["errors"] == {"number": ["A code was sent to this number moments ago; ask again in 1 s."]}
        with time_machine.travel(NOW + timedelta(seconds=60), tick=False):
            assert post(client, "/api/v1/channels/whatsapp", key, {"number": NUMBER}).status_code == 201
            second = sent_code(provider)
            if first != second:
                stale = post(client, "/api/v1/channels/whatsapp/verify", key, {"number": NUMBER, "code": first})
                assert stale.json()["errors"] == {"code": ["The code is wrong."]}
            assert post(client, "/api/v1/channels/whatsapp/verify", key,
                        {"number": NUMBER, "code": second}).status_code == 200
        assert len(provider.requests) == 2

    def test_a_confirmed_number_is_not_sent_another_code(self, client, key, provider):
        post(client, "/api/v1/channels/whatsapp", key, {"number": NUMBER})
        post(client, "/api/v1/channels/whatsapp/verify", key, {"number": NUMBER, "code": sent_code(provider)})
        again = post(client, "/api/v1/channels/whatsapp", key, {"number": NUMBER})
        assert again.status_code == 422
        assert again.json()["errors"] == {"number": ["This number is already linked to your account."]}

    @pytest.mark.parametrize("number", ["011999990000", "+0511999990000", "+551199", "phone", "+55 11 99999-0000",
                                        "+1234567890123456", None, ["+5511999990000"]])
    def test_it_refuses_numbers_not_in_international_form(self, client, key, provider, number):
        response = post(client, "/api/v1/channels/whatsapp", key, {"number": number})
        assert response.status_code == 422
        assert set(response.json()) == {"message", "errors"} and list(response.json()["errors"]) == ["number"]
        assert provider.requests == []

    @pytest.mark.parametrize("code", ["12345", "1234567", "abcdef", "", None])
    def test_it_refuses_codes_that_are_not_six_digits(self, client, key, provider, code):
        response = post(client, "/api/v1/channels/whatsapp/verify", key, {"number": NUMBER, "code": code})
        assert response.status_code == 422 and list(response.json()["errors"]) == ["code"]

    def test_verifying_a_number_never_sent_a_code_is_refused(self, client, key, provider):
        response = post(client, "/api/v1/channels/whatsapp/verify", key, {"number": NUMBER, "code": "123456"})
        assert response.status_code == 422
        assert response.json()["errors"] == {"number": ["No code was sent to this number; ask for one first."]}

    def test_a_provider_failure_is_a_502_and_the_code_can_be_asked_again_at_once(self, client, key, owner, provider):
        provider.replies.append((500, {"error": {"message": "Internal error", "code": 1}}))
        response = post(client, "/api/v1/channels/whatsapp", key, {"number": NUMBER})
        assert assert_detail(response, 502) == "The code could not be sent: WhatsApp answered 500: Internal error"
        assert post(client, "/api/v1/channels/whatsapp", key, {"number": NUMBER}).status_code == 201

    def test_without_configuration_it_is_not_available(self, client, key, settings):
        settings.WHATSAPP_TOKEN = ""
        response = post(client, "/api/v1/channels/whatsapp", key, {"number": NUMBER})
        assert assert_detail(response, 501) == "WhatsApp is not set up on this gateway."

    def test_an_account_links_at_most_five_numbers(self, client, key, provider):
        for n in range(5):
            assert post(client, "/api/v1/channels/whatsapp", key, {"number": f"+551199999000{n}"}).status_code == 201
        response = post(client, "/api/v1/channels/whatsapp", key, {"number": "+5511999990009"})
        assert "at most 5 WhatsApp numbers" in assert_detail(response, 403)


@pytest.mark.django_db
class TestChannelList:
    def test_each_account_sees_and_deletes_only_its_own(self, client, key, owner, outsider, provider):
        post(client, "/api/v1/channels/whatsapp", key, {"number": NUMBER})
        post(client, "/api/v1/channels/whatsapp/verify", key, {"number": NUMBER, "code": sent_code(provider)})
        channel = LinkedChannel.objects.get(account=owner)
        other_key = api_key_for(outsider)
        assert client.get("/api/v1/channels", headers=bearer(other_key)).json() == {"channels": []}
        assert assert_detail(client.delete(f"/api/v1/channels/{channel.pk}", headers=bearer(other_key)), 404)
        stolen = post(client, "/api/v1/channels/whatsapp/verify", other_key, {"number": NUMBER, "code": "000000"})
        assert stolen.status_code == 422 and not is_linked(outsider, "whatsapp", NUMBER)
        listed = client.get("/api/v1/channels", headers=bearer(key)).json()["channels"]
        assert listed == [{"id": channel.pk, "kind": "whatsapp", "address": NUMBER, "verified": True,
                           "verified_at": listed[0]["verified_at"], "created_at": listed[0]["created_at"]}]
        response = client.delete(f"/api/v1/channels/{channel.pk}", headers=bearer(key))
        assert response.status_code == 200 and response.json() == {"deleted": True, "id": channel.pk}
        assert not is_linked(owner, "whatsapp", NUMBER)
        assert assert_detail(client.delete(f"/api/v1/channels/{channel.pk}", headers=bearer(key)), 404)

    def test_the_list_takes_no_other_method(self, client, key):
        assert client.post("/api/v1/channels", headers=bearer(key)).status_code == 405
