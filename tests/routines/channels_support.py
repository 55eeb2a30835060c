"""For the linked channel tests: a loopback server standing in for the Telegram and WhatsApp HTTP APIs,
the fixture `provider` that points the settings at it, and the tokens and numbers they use."""

import json
import threading
from datetime import datetime
from datetime import timezone as dt_timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

BOT_TOKEN = "123456:TEST-bot-token-do-not-show"
WA_TOKEN = "EAAG-test-whatsapp-token"
HOOK_SECRET = "tg-hook-" + "a1" * 16
NUMBER = "+5511999990000"
NOW = datetime(2026, 11, 22, 5, 0, 0, tzinfo=dt_timezone.utc)


class ProviderStandIn:
    """Records every request; answers with the queued (status, body) pairs, else 200."""

    def __init__(self):
        self.requests = []
        self.replies = []
        stand_in = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length)
                stand_in.requests.append({"path": self.path, "headers": dict(self.headers), "json": json.loads(raw)})
                status, body = stand_in.replies.pop(0) if stand_in.replies else (200, {"ok": True, "result": {}})
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.base = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture(name="provider")
def provider_fixture(settings):
    stand_in = ProviderStandIn()
    settings.TELEGRAM_API_BASE = stand_in.base
    settings.TELEGRAM_BOT_TOKEN = BOT_TOKEN
    settings.TELEGRAM_BOT_USERNAME = "gw_test_bot"
    settings.TELEGRAM_WEBHOOK_SECRET = HOOK_SECRET
    settings.WHATSAPP_API_BASE = stand_in.base + "/v21.0"
    settings.WHATSAPP_PHONE_NUMBER_ID = "1098765"
    settings.WHATSAPP_TOKEN = WA_TOKEN
    settings.WHATSAPP_CODE_TEMPLATE = ""
    settings.CHANNEL_CODE_TTL_SECONDS = 900
    settings.CHANNEL_CODE_MAX_ATTEMPTS = 5
    settings.CHANNEL_CODE_RESEND_SECONDS = 60
    settings.WHATSAPP_NUMBERS_PER_ACCOUNT = 5
    yield stand_in
    stand_in.close()
