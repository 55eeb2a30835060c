"""`email:<address>`: the result by Django e-mail (EMAIL_URL; the console by default)."""

from __future__ import annotations

import smtplib
import socket

from django.conf import settings
from django.core.mail import send_mail

from routines.deliveries.base import DeliveryFailed


def send(run, target: str, text: str) -> None:
    address = target.partition(":")[2]
    name = " ".join(run.routine.name.split())  # a line break in a header is refused by the mailer
    subject = f"[{name}] routine result"[:200]
    try:
        send_mail(subject, text, settings.DEFAULT_FROM_EMAIL, [address], fail_silently=False)
    except smtplib.SMTPRecipientsRefused as exc:
        raise DeliveryFailed(f"The mail server refused the recipient: {exc}") from None
    except (smtplib.SMTPException, socket.error, OSError) as exc:
        raise DeliveryFailed(f"The mail server could not be reached: {exc}", retryable=True) from None
