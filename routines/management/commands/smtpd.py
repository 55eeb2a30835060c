"""`manage.py smtpd --host 127.0.0.1 --port 2525`: an SMTP server (aiosmtpd) taking mail for the
routines' inbound domain only, fed to the same function as `receive_email`.

Answers: 550 at RCPT TO for an address outside INBOUND_EMAIL_DOMAIN (no relaying) or one that is
no `email` routine's; 552 for a message over WEBHOOK_MAX_BODY_BYTES; 451 when the gateway cannot
take the message now (the sender tries again); 250 once it was accepted or deliberately ignored
(paused routine, duplicate, rate-limited). Stops on SIGINT or SIGTERM.
"""

import asyncio
import logging
import signal

from aiosmtpd.smtp import SMTP
from asgiref.sync import sync_to_async
from django.conf import settings
from django.core.management.base import BaseCommand
from django.db import close_old_connections

from routines.inbound_email import is_inbound_domain, receive_message, routine_address_exists

log = logging.getLogger(__name__)


def _with_fresh_connection(function, *args, **kwargs):
    close_old_connections()
    try:
        return function(*args, **kwargs)
    finally:
        close_old_connections()


class InboundHandler:
    async def handle_RCPT(self, server, session, envelope, address, rcpt_options):
        if not is_inbound_domain(address):
            return f"550 5.7.1 This server takes mail only for @{settings.INBOUND_EMAIL_DOMAIN}"
        try:
            exists = await sync_to_async(_with_fresh_connection)(routine_address_exists, address)
        except Exception:
            log.exception("could not look up %s", address)
            return "451 4.3.0 Temporary failure, try again later"
        if not exists:
            return "550 5.1.1 No routine has this address"
        envelope.rcpt_tos.append(address)
        return "250 2.1.5 OK"

    async def handle_DATA(self, server, session, envelope):
        try:
            outcome = await sync_to_async(_with_fresh_connection)(
                receive_message, envelope.original_content, envelope_recipients=list(envelope.rcpt_tos))
        except Exception:
            log.exception("could not take an inbound message")
            return "451 4.3.0 Temporary failure, try again later"
        if outcome.taken:
            return "250 2.0.0 Accepted"
        if outcome.too_large:
            return "552 5.3.4 Message too large"
        return "550 5.1.1 No routine has this address"


class Command(BaseCommand):
    help = "Run an SMTP server that turns mail to routine addresses into routine events."

    def add_arguments(self, parser):
        parser.add_argument("--host", default="127.0.0.1")
        parser.add_argument("--port", type=int, default=2525)

    def handle(self, *args, host, port, **options):
        asyncio.run(self.serve(host, port))

    async def serve(self, host: str, port: int) -> None:
        loop = asyncio.get_running_loop()
        handler = InboundHandler()
        server = await loop.create_server(
            lambda: SMTP(handler, data_size_limit=settings.WEBHOOK_MAX_BODY_BYTES, enable_SMTPUTF8=True,
                         hostname=settings.INBOUND_EMAIL_DOMAIN, loop=loop),
            host=host, port=port,
        )
        stop = asyncio.Event()
        for signum in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(signum, stop.set)
        self.stdout.write(f"smtpd: taking mail for @{settings.INBOUND_EMAIL_DOMAIN} on {host}:{port}")
        self.stdout.flush()
        await stop.wait()
        server.close()
        await server.wait_closed()
