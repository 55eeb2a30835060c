"""Routines, the events that start them, their runs and deliveries, the inbox, linked channels."""

from django.db import models


class Routine(models.Model):
    class Trigger(models.TextChoices):
        SCHEDULE = "schedule"
        WEBHOOK = "webhook"
        EMAIL = "email"

    class DisabledReason(models.TextChoices):
        USER = "user"
        FAILURES = "failures"

    class SignatureScheme(models.TextChoices):
        BODY = "body"  # spec 5.4: HMAC of the body in X-Svc-Signature / X-Hub-Signature-256
        STANDARD = "standard"  # Standard Webhooks: webhook-id, webhook-timestamp, webhook-signature

    account = models.ForeignKey("accounts.Account", on_delete=models.CASCADE, related_name="routines")
    name = models.CharField(max_length=120)
    prompt = models.TextField(max_length=8000)
    trigger = models.CharField(max_length=16, choices=Trigger.choices, default=Trigger.SCHEDULE)
    delivery_targets = models.JSONField(default=list)
    uses_ai = models.BooleanField(
        "answered by a model", default=True,
        help_text="Off: no model is called; the prompt itself is delivered on each event.")
    is_enabled = models.BooleanField(default=True)
    webhook_secret = models.CharField(max_length=128, null=True, blank=True, help_text="Null: unsigned.")
    webhook_token = models.CharField(max_length=64, unique=True)
    webhook_signature_scheme = models.CharField(
        max_length=16, choices=SignatureScheme.choices, default=SignatureScheme.BODY,
        help_text="body: the spec's HMAC of the body. standard: Standard Webhooks (id and timestamp signed, "
                  "replays refused).")
    schedule = models.CharField(max_length=120, blank=True, help_text="5-field cron, for the schedule trigger.")
    timezone = models.CharField(max_length=64, default="UTC")
    model = models.CharField(max_length=300, blank=True, help_text="Empty: the default model.")
    consecutive_failures = models.PositiveIntegerField(default=0)
    disabled_reason = models.CharField(max_length=16, choices=DisabledReason.choices, blank=True)
    last_run_at = models.DateTimeField(null=True, blank=True)
    next_run_at = models.DateTimeField(null=True, blank=True, db_index=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["id"]

    def __str__(self) -> str:
        return self.name


class Event(models.Model):
    """An accepted event (webhook call, e-mail), stored before the sender gets its 200."""

    routine = models.ForeignKey(Routine, on_delete=models.CASCADE, related_name="events")
    event_id = models.CharField("event ID", max_length=200)
    source = models.CharField(max_length=16)
    content_type = models.CharField(max_length=200, blank=True)
    body = models.TextField(blank=True, help_text="As the routine sees it: pretty JSON or text.")
    received_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-id"]
        indexes = [models.Index(fields=["routine", "event_id"], name="routines_event_seen")]  # duplicates

    def __str__(self) -> str:  # the console's titles: the sender's id, and the routine it started
        return f"Event {self.event_id} for {self.routine}"


class Run(models.Model):
    class Trigger(models.TextChoices):
        WEBHOOK = "webhook"
        SCHEDULE = "schedule"
        EMAIL = "email"
        MANUAL = "manual"

    class Status(models.TextChoices):
        QUEUED = "queued"
        RUNNING = "running"
        SUCCEEDED = "succeeded"
        FAILED = "failed"

    routine = models.ForeignKey(Routine, on_delete=models.CASCADE, related_name="runs")
    source_event = models.ForeignKey(Event, null=True, blank=True, on_delete=models.SET_NULL, related_name="runs")
    # the failed run this one tries again (the console's Retry), with the same event and trigger
    retry_of = models.ForeignKey("self", null=True, blank=True, on_delete=models.SET_NULL, related_name="retries")
    event_id = models.CharField("event ID", max_length=200, blank=True)
    trigger = models.CharField(max_length=16, choices=Trigger.choices)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.QUEUED, db_index=True)
    output = models.TextField(blank=True)
    error = models.TextField(blank=True)
    model = models.CharField(max_length=300, blank=True)
    usage = models.JSONField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    # Set, with output, model and usage, as soon as the model answered (or, without AI, the
    # prompt was taken as the output): from then on the run is never sent to the model again.
    answered_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-id"]

    def __str__(self) -> str:  # the console's titles and breadcrumbs
        return f"Run {self.pk} of {self.routine} ({self.status})"


class RefusedEvent(models.Model):
    """A webhook event refused for its signature (spec 4.7, check 5), kept so the routine's page can
    show why its sender is refused. What helps to find the fault, and nothing an unauthenticated
    sender could use the gateway to keep: the reason, the signature headers' names, the body's
    size and SHA-256 (never the body, never a signature or the secret). The newest
    `routines.refused_events.KEPT` per routine are kept."""

    routine = models.ForeignKey(Routine, on_delete=models.CASCADE, related_name="refused_events")
    received_at = models.DateTimeField(auto_now_add=True)
    reason = models.CharField(max_length=200)
    signature_headers = models.CharField(max_length=200, blank=True, help_text="Names only; empty: none was sent.")
    content_type = models.CharField(max_length=200, blank=True)
    body_bytes = models.PositiveIntegerField(default=0)
    body_sha256 = models.CharField("body SHA-256", max_length=64, blank=True)

    class Meta:
        ordering = ["-id"]

    def __str__(self) -> str:
        return f"Refused event for {self.routine_id}: {self.reason}"


class Delivery(models.Model):
    """One target of an answered run, sent by its own task (routines/deliveries/__init__.py)."""

    class Status(models.TextChoices):
        PENDING = "pending"
        SUCCEEDED = "succeeded"
        FAILED = "failed"

    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="deliveries")
    target = models.CharField(max_length=600)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.PENDING, db_index=True)
    attempts = models.PositiveIntegerField(default=0)
    error = models.TextField(blank=True, help_text="The last try's error (while pending: the one being retried).")
    # The task that holds the delivery and until when: another task (the sweep's) takes it only
    # after that; a retry of the same task (same id) takes it at once.
    task_id = models.CharField("task ID", max_length=64, blank=True)
    busy_until = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["id"]
        verbose_name_plural = "deliveries"

    def __str__(self) -> str:
        return f"Delivery to {self.target} ({self.status})"


class InboxMessage(models.Model):
    account = models.ForeignKey("accounts.Account", on_delete=models.CASCADE, related_name="inbox")
    routine = models.ForeignKey(Routine, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    run = models.ForeignKey(Run, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    title = models.CharField(max_length=200)
    body = models.TextField(blank=True)
    read_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return self.title or f"Inbox message {self.pk}"


class LinkedChannel(models.Model):
    """A Telegram chat or a WhatsApp number an account linked, usable once verified."""

    class Kind(models.TextChoices):
        TELEGRAM = "telegram"
        WHATSAPP = "whatsapp"

    account = models.ForeignKey("accounts.Account", on_delete=models.CASCADE, related_name="channels")
    kind = models.CharField(max_length=16, choices=Kind.choices)
    address = models.CharField(max_length=64, blank=True, help_text="Telegram chat id, or WhatsApp number.")
    code_hash = models.CharField(max_length=64, blank=True)
    code_expires_at = models.DateTimeField(null=True, blank=True)
    code_attempts = models.PositiveSmallIntegerField(default=0, help_text="Wrong codes tried against the current code.")
    verified_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["account", "kind", "address"], name="channel_once")]

    def __str__(self) -> str:
        return f"{self.get_kind_display()} {self.address or '(not linked yet)'}"
