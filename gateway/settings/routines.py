"""Settings of the routines (routines/, spec 4.5–4.8, 8.6): webhooks, runs, deliveries, inbound
e-mail and the linked channels (Telegram, WhatsApp).

Part of gateway/settings/__init__.py, which puts what `from_env` returns beside its own.
"""

from gateway.settings.environment import Environment, reader


def from_env(env: Environment = None) -> dict:
    env = reader(env)
    return {
        # Check 1 of spec 4.7: false answers every webhook call with 200 {ok, ignored: disabled}.
        "WEBHOOKS_ENABLED": env.bool("WEBHOOKS_ENABLED", default=True),
        "WEBHOOK_MAX_BODY_BYTES": env.int("WEBHOOK_MAX_BODY_BYTES", default=65536),
        "WEBHOOK_DUPLICATE_WINDOW_SECONDS": env.int("WEBHOOK_DUPLICATE_WINDOW_SECONDS", default=600),
        "WEBHOOK_EVENTS_PER_MINUTE": env.int("WEBHOOK_EVENTS_PER_MINUTE", default=30),
        "ROUTINES_PER_ACCOUNT": env.int("ROUTINES_PER_ACCOUNT", default=10),
        "ROUTINE_FAILURES_TO_DISABLE": env.int("ROUTINE_FAILURES_TO_DISABLE", default=3),
        # Base of the webhook URLs handed out (e.g. https://gw.example.com); empty: the request's own.
        "PUBLIC_BASE_URL": env.str("PUBLIC_BASE_URL", default=""),
        # A run still running after this many seconds is taken as lost (its worker died) and, if its
        # model had not answered yet, run again. Also the run task's time limit.
        "ROUTINE_RUN_TIMEOUT_SECONDS": env.int("ROUTINE_RUN_TIMEOUT_SECONDS", default=600),
        # Internal (docs/configuration.md): how long a run or a delivery retries a completion write while the
        # database is unreachable.
        "ROUTINE_WRITE_RETRY_SECONDS": env.int("ROUTINE_WRITE_RETRY_SECONDS", default=120),
        # Internal (docs/configuration.md): how often the sweep re-enqueues runs left queued or lost while running.
        "ROUTINE_SWEEP_SECONDS": env.float("ROUTINE_SWEEP_SECONDS", default=60.0),
        # Internal (docs/configuration.md): a run still queued this many seconds after it was made is enqueued
        # again by the sweep (its message may have been lost with a Redis that restarted); a claim makes a
        # second message a no-op.
        "ROUTINE_QUEUED_GRACE_SECONDS": env.int("ROUTINE_QUEUED_GRACE_SECONDS", default=60),
        # Outbound deliveries: tries per target (retryable failures only) and the first backoff.
        "DELIVERY_RETRY_ATTEMPTS": env.int("DELIVERY_RETRY_ATTEMPTS", default=3),
        "DELIVERY_RETRY_BACKOFF_SECONDS": env.float("DELIVERY_RETRY_BACKOFF_SECONDS", default=2.0),
        # The longest wait between two tries (the backoff doubles from the first up to this).
        "DELIVERY_RETRY_BACKOFF_MAX_SECONDS": env.int("DELIVERY_RETRY_BACKOFF_MAX_SECONDS", default=300),
        "DELIVERY_TIMEOUT_SECONDS": env.float("DELIVERY_TIMEOUT_SECONDS", default=10.0),
        # webhook: deliveries to private, loopback or link-local addresses (off: refused).
        "DELIVERY_ALLOW_PRIVATE_ADDRESSES": env.bool("DELIVERY_ALLOW_PRIVATE_ADDRESSES", default=False),
        # A CA bundle (PEM) trusted for webhook: deliveries instead of the system's; empty: the system's.
        "DELIVERY_CA_BUNDLE": env.str("DELIVERY_CA_BUNDLE", default=""),
        # --- Inbound e-mail and linked channels ---
        # Domain of the routines' inbound addresses: an `email` routine receives at <webhook_token>@<this>.
        "INBOUND_EMAIL_DOMAIN": env.str("INBOUND_EMAIL_DOMAIN", default="routines.localhost").lower(),
        # Linking codes (Telegram deep link, WhatsApp confirmation): lifetime, wrong tries allowed, and
        # the shortest wait before a new WhatsApp code is sent to the same number.
        "CHANNEL_CODE_TTL_SECONDS": env.int("CHANNEL_CODE_TTL_SECONDS", default=900),
        "CHANNEL_CODE_MAX_ATTEMPTS": env.int("CHANNEL_CODE_MAX_ATTEMPTS", default=5),
        "CHANNEL_CODE_RESEND_SECONDS": env.int("CHANNEL_CODE_RESEND_SECONDS", default=60),
        # WhatsApp numbers (confirmed or waiting for their code) one account may have.
        "WHATSAPP_NUMBERS_PER_ACCOUNT": env.int("WHATSAPP_NUMBERS_PER_ACCOUNT", default=5),
        # Telegram Bot API: base URL, the bot's token and @username, and the secret last path segment of
        # the webhook Telegram posts updates to (empty: the updates endpoint answers 404).
        "TELEGRAM_API_BASE": env.str("TELEGRAM_API_BASE", default="https://api.telegram.org"),
        "TELEGRAM_BOT_TOKEN": env.str("TELEGRAM_BOT_TOKEN", default=""),
        "TELEGRAM_BOT_USERNAME": env.str("TELEGRAM_BOT_USERNAME", default=""),
        "TELEGRAM_WEBHOOK_SECRET": env.str("TELEGRAM_WEBHOOK_SECRET", default=""),
        # WhatsApp Cloud API: base URL (with the Graph API version), the business phone number id, the
        # access token, and optionally an approved authentication template for the confirmation code.
        "WHATSAPP_API_BASE": env.str("WHATSAPP_API_BASE", default="https://graph.facebook.com/v21.0"),
        "WHATSAPP_PHONE_NUMBER_ID": env.str("WHATSAPP_PHONE_NUMBER_ID", default=""),
        "WHATSAPP_TOKEN": env.str("WHATSAPP_TOKEN", default=""),
        "WHATSAPP_CODE_TEMPLATE": env.str("WHATSAPP_CODE_TEMPLATE", default=""),
        "WHATSAPP_CODE_TEMPLATE_LANGUAGE": env.str("WHATSAPP_CODE_TEMPLATE_LANGUAGE", default="en_US"),
    }
