"""A batch and its lines. A batch is its account's (another account's id is a 404 on every surface); its
lines are the requests it holds, each run once and answered once. The counts a batch shows are its lines'
(`batches/progress.py`), never kept twice."""

from __future__ import annotations

from django.db import models
from django.utils import timezone


class Batch(models.Model):
    """One batch: OpenAI's batch object (`batch_…`) or Anthropic's message batch (`msgbatch_…`)."""

    class Kind(models.TextChoices):
        OPENAI = "openai", "OpenAI batch"
        ANTHROPIC = "anthropic", "Anthropic message batch"

    class Status(models.TextChoices):
        # OpenAI's statuses; an Anthropic batch's `processing_status` is read from them (compat/message_batches.py)
        VALIDATING = "validating"
        FAILED = "failed"
        IN_PROGRESS = "in_progress"
        FINALIZING = "finalizing"
        COMPLETED = "completed"
        EXPIRED = "expired"
        CANCELLING = "cancelling"
        CANCELLED = "cancelled"

    ENDED = (Status.FAILED, Status.COMPLETED, Status.EXPIRED, Status.CANCELLED)

    id = models.CharField(primary_key=True, max_length=40, editable=False)
    account = models.ForeignKey("accounts.Account", on_delete=models.CASCADE, related_name="batches")
    kind = models.CharField(max_length=10, choices=Kind.choices)
    endpoint = models.CharField(max_length=40, help_text="The surface every line calls, /v1/chat/completions for one.")
    input_file = models.ForeignKey("gateway.StoredFile", on_delete=models.SET_NULL, null=True, blank=True,
                                   related_name="+")
    input_file_name = models.CharField(max_length=40, blank=True,
                                       help_text="The input file's id, kept when the file is deleted.")
    completion_window = models.CharField(max_length=10, default="24h")
    metadata = models.JSONField(null=True, blank=True)
    status = models.CharField(max_length=12, choices=Status.choices, default=Status.VALIDATING)
    errors = models.JSONField(null=True, blank=True,
                              help_text="Why validation failed: [{code, message, param, line}].")
    created_at = models.DateTimeField(default=timezone.now)
    expires_at = models.DateTimeField()
    in_progress_at = models.DateTimeField(null=True, blank=True)
    finalizing_at = models.DateTimeField(null=True, blank=True)
    completed_at = models.DateTimeField(null=True, blank=True)
    failed_at = models.DateTimeField(null=True, blank=True)
    expired_at = models.DateTimeField(null=True, blank=True)
    cancelling_at = models.DateTimeField(null=True, blank=True)
    cancelled_at = models.DateTimeField(null=True, blank=True)
    output_file = models.ForeignKey("gateway.StoredFile", on_delete=models.SET_NULL, null=True, blank=True,
                                    related_name="+")
    error_file = models.ForeignKey("gateway.StoredFile", on_delete=models.SET_NULL, null=True, blank=True,
                                   related_name="+")
    runner = models.CharField(max_length=40, blank=True, help_text="The token of the worker that runs it now.")
    runner_until = models.DateTimeField(null=True, blank=True, help_text="Until when that worker holds it.")
    waiting_for = models.TextField(blank=True, help_text="Why its lines wait: a quota or budget reached.")
    forwarded_to = models.ForeignKey("gateway.ModelServer", on_delete=models.SET_NULL, null=True, blank=True,
                                     related_name="+", help_text="The cloud server whose own batch API runs it.")
    upstream_id = models.CharField(max_length=200, blank=True, help_text="The batch's id on that server.")

    class Meta:
        verbose_name_plural = "batches"
        indexes = [models.Index(fields=["account", "kind", "created_at"], name="batch_account_time"),
                   models.Index(fields=["status"], name="batch_status")]

    def __str__(self) -> str:
        return self.id

    @property
    def ended(self) -> bool:
        return self.status in self.ENDED


class BatchLine(models.Model):
    """One request of a batch: what it asks (`body`, the request body of `Batch.endpoint`) and, once
    ended, its answer (`status_code` and `result`, the response body or the error)."""

    class Status(models.TextChoices):
        QUEUED = "queued"
        RUNNING = "running"
        SUCCEEDED = "succeeded"
        ERRORED = "errored"
        CANCELLED = "cancelled"
        EXPIRED = "expired"

    ENDED = (Status.SUCCEEDED, Status.ERRORED, Status.CANCELLED, Status.EXPIRED)

    batch = models.ForeignKey(Batch, on_delete=models.CASCADE, related_name="lines")
    index = models.IntegerField(help_text="Its place in the input, from 0.")
    custom_id = models.CharField(max_length=512)
    body = models.JSONField()
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.QUEUED)
    tries = models.IntegerField(default=0)
    next_try_at = models.DateTimeField(null=True, blank=True, help_text="A retried line waits until then.")
    claim = models.CharField(max_length=40, blank=True, help_text="The token of the worker that runs it.")
    status_code = models.IntegerField(null=True, blank=True)
    request_id = models.CharField(max_length=64, blank=True)
    result = models.JSONField(null=True, blank=True)
    ended_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["batch", "index"], name="batch_line_index"),
                       models.UniqueConstraint(fields=["batch", "custom_id"], name="batch_line_custom_id")]
        indexes = [models.Index(fields=["batch", "status", "index"], name="batch_line_status")]

    def __str__(self) -> str:
        return f"{self.batch_id} #{self.index} ({self.custom_id})"

    @property
    def usage_key(self) -> str:
        """Its usage record's key: a line metered again (a worker killed after metering it) is one record."""
        return f"batch-line-{self.pk}"
