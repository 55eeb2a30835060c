"""`manage.py receive_email [--recipient ADDRESS ...]`: one RFC 822 message on stdin, for an MTA's
pipe transport (Postfix: `pipe ... argv=manage.py receive_email --recipient ${recipient}`).

Exit status in the sysexits convention MTAs read: 0 when a routine accepted or deliberately
ignored the message (paused, duplicate, rate-limited), 67 (EX_NOUSER) when no recipient is a
routine's address, 65 (EX_DATAERR) when the message is over the size cap, 75 (EX_TEMPFAIL) when
the gateway could not take it now (the MTA tries again later).
"""

import logging
import sys

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from routines.inbound_email import receive_message

EX_DATAERR, EX_NOUSER, EX_TEMPFAIL = 65, 67, 75
CHUNK = 64 * 1024

log = logging.getLogger(__name__)


class Command(BaseCommand):
    help = "Take one e-mail message on stdin and feed it to the routine it is addressed to."

    def add_arguments(self, parser):
        parser.add_argument("--recipient", action="append", default=[],
                            help="envelope recipient (repeatable); without it, the message's own headers")

    def handle(self, *args, recipient, **options):
        raw = read_capped(sys.stdin.buffer, settings.WEBHOOK_MAX_BODY_BYTES + 1)
        try:
            outcome = receive_message(raw, envelope_recipients=recipient or None)
        except Exception as exc:  # the database or the broker is away: let the MTA try again
            log.exception("could not take an inbound message")
            raise CommandError(f"temporary failure, try again later ({type(exc).__name__})",
                               returncode=EX_TEMPFAIL) from None
        if outcome.taken:
            for address, _status, answer in outcome.answers:
                result = answer.get("ignored") or ("queued" if answer.get("queued") else answer.get("error"))
                self.stdout.write(f"{address}: {result}")
            return
        if outcome.too_large:
            raise CommandError(f"message larger than {settings.WEBHOOK_MAX_BODY_BYTES} bytes", returncode=EX_DATAERR)
        raise CommandError("no recipient is a routine's address (unknown user)", returncode=EX_NOUSER)


def read_capped(stream, cap: int) -> bytes:
    """Up to `cap` bytes of the stream; the rest is read and dropped so the writer is not cut off."""
    data = stream.read(cap)
    while stream.read(CHUNK):
        pass
    return data
