"""What the gateway writes of the calls it serves: usage records and their daily sums, the daily failures, the
calls log (and the text a group keeps), and the replies kept for `Idempotency-Key`."""

from django.db import models


class UsageRecord(models.Model):
    """Tokens of one successful call (or of what was delivered before a reply stopped)."""

    account = models.ForeignKey("accounts.Account", on_delete=models.CASCADE, related_name="usage_records")
    model = models.CharField(max_length=300, help_text="The model that answered, as server/model.")
    surface = models.CharField(max_length=40)
    input_tokens = models.PositiveIntegerField(default=0)
    output_tokens = models.PositiveIntegerField(default=0)
    request_id = models.CharField("request ID", max_length=64, blank=True)
    # What makes a record the same record when it is written again (a spool replayed after a
    # crash, a run executed again): unique; null on the records written before it existed.
    key = models.CharField(max_length=80, null=True, blank=True, unique=True, default=None)
    # Answered from the response cache (gateway/cache/): no model server was called; the tokens are
    # those the cached reply delivered. A database default too: a writer of an older release (mid-deploy)
    # still inserts.
    cached = models.BooleanField(default=False, db_default=False)
    # Input tokens the provider read from its prompt cache (part of input_tokens), priced at the
    # cached input price.
    cached_input_tokens = models.PositiveIntegerField(default=0, db_default=0)
    # Input tokens the provider wrote to its prompt cache (part of input_tokens too), priced at the
    # cache-write price.
    cache_write_input_tokens = models.PositiveIntegerField(default=0, db_default=0)
    # What the call cost when it was metered, in COST_UNITS of settings.CURRENCY (an integer, exact on
    # SQLite too: gateway/registry/prices.py). A price changed later never rewrites it.
    cost_units = models.BigIntegerField(default=0, db_default=0)
    created_at = models.DateTimeField(db_index=True)
    tags = models.JSONField(default=dict, db_default={}, blank=True)  # the call's (CallRecord.tags); not rolled up
    # A batch line's call (batches/): its batch's id; its cost is the batch price. Empty: a live call. Not rolled
    # up: the usage console reads the batch records apart. A database default, as for the columns above.
    batch_id = models.CharField(max_length=40, blank=True, default="", db_default="")

    class Meta:
        indexes = [
            models.Index(fields=["account", "created_at"], name="usage_account_time"),
            # the usage console's cache hits (gateway/console/usage_reads.py): only the cached records
            models.Index(fields=["created_at"], condition=models.Q(cached=True), name="usage_cached_time"),
            # its batch figures and batch filter (the same), and a batch's own records: only the batch records
            models.Index(fields=["created_at"], condition=~models.Q(batch_id=""), name="usage_batch_time"),
            models.Index(fields=["batch_id"], condition=~models.Q(batch_id=""), name="usage_batch"),
        ]

    def __str__(self) -> str:
        return f"{self.model}: {self.input_tokens}+{self.output_tokens}"


class UsageDaily(models.Model):
    """The usage records added up per UTC day, account and model: what the usage console
    (gateway/console/usage_reads.py) reads, so that its page adds up days rather than calls
    (bench/usage_console.py). Kept by database triggers on UsageRecord (migration 0007): every insert, update, delete
    and truncate of records, by whatever writes them, changes the day's row in the same
    transaction. The application never writes it. No foreign-key constraint: a deleted account's
    rows go with its records (a row whose calls reach 0 is removed)."""

    day = models.DateField()
    account = models.ForeignKey("accounts.Account", on_delete=models.DO_NOTHING, db_constraint=False,
                                related_name="+")
    model = models.CharField(max_length=300)
    calls = models.BigIntegerField(default=0)
    input_tokens = models.BigIntegerField(default=0)
    output_tokens = models.BigIntegerField(default=0)
    cost_units = models.BigIntegerField(default=0, db_default=0)

    class Meta:
        verbose_name_plural = "usage per day"
        constraints = [models.UniqueConstraint(fields=["day", "account", "model"], name="usage_daily_key")]
        indexes = [models.Index(fields=["account", "day"], name="usage_daily_account")]

    def __str__(self) -> str:
        return f"{self.model} on {self.day}: {self.calls} calls"


class CallFailureDaily(models.Model):
    """How often a model failed a call, per UTC day (gateway/usage/call_failures.py): counted in each
    process on the failure path and written a moment later, never on the call's own path."""

    class Kind(models.TextChoices):
        FELL_THROUGH = "fell_through", "Fell through"  # failed before its first byte; the next model was tried
        CHAIN_FAILED = "chain_failed", "Chain failed"  # failed, no model left: the call was answered with an error
        REFUSED = "refused", "Refused"  # the server refused the request; answered at once with its status

    day = models.DateField()
    model = models.CharField(max_length=300)
    kind = models.CharField(max_length=16, choices=Kind.choices)
    count = models.BigIntegerField(default=0)

    class Meta:
        verbose_name = "call failures per day"
        verbose_name_plural = "call failures per day"
        constraints = [models.UniqueConstraint(fields=["day", "model", "kind"], name="call_failure_daily_key")]

    def __str__(self) -> str:
        return f"{self.model} {self.get_kind_display().lower()} {self.count}× on {self.day}"


class IdempotentRequest(models.Model):
    """The first answer to a request sent with an `Idempotency-Key` (accounts/idempotency.py), kept per
    account for IDEMPOTENCY_TTL_SECONDS: the same key with the same request gets it again instead of a
    second call. While the first request is being answered the row is its claim (`status` null), held
    until `held_until`; a retry takes over a claim whose process died after that. Expired rows are
    swept (accounts/tasks.py); until then they count as absent."""

    account = models.ForeignKey("accounts.Account", on_delete=models.CASCADE, related_name="+")
    key = models.CharField(max_length=255)
    fingerprint = models.CharField(max_length=64, help_text="SHA-256 of the method, the path and the body.")
    # the claim of the request answering the key: a settle or release by a request whose claim was taken over
    # changes nothing
    claim = models.CharField(max_length=32)
    status = models.PositiveSmallIntegerField(null=True, blank=True, help_text="Null while being answered.")
    content_type = models.CharField(max_length=255, blank=True)
    headers = models.JSONField(default=dict, blank=True)  # the identifying headers of the first answer
    body = models.BinaryField(default=bytes, blank=True)
    created_at = models.DateTimeField()
    held_until = models.DateTimeField(null=True, blank=True)
    expires_at = models.DateTimeField(db_index=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["account", "key"], name="idempotent_request_once")]

    def __str__(self) -> str:
        return f"{self.account_id}: {self.key}"


class CallRecord(models.Model):
    """One call of a model surface, answered or refused (gateway/usage/call_log.py). `attempts`:
    the chain tried, each {model, server, outcome, status, error, ttfb_ms}; `tags`: OpenAI's `metadata`;
    `guard`: the findings of the group's guardrails, each {check, entity, action, direction, index, offset},
    never the text found."""

    class Outcome(models.TextChoices):
        OK = "ok", "Answered"
        CUT = "cut", "Cut midway"  # the reply began, then stopped (an error inside the stream)
        FAILED = "failed", "Failed"  # no model answered (the chain failed, a server refused), or a 5xx
        REFUSED = "refused", "Refused"  # by the gateway, before any model: credential, ceiling, quota, input
        CLIENT_CLOSED = "client_closed", "Client left"

    key = models.CharField(max_length=64, unique=True)  # a uuid per call: a replayed spool writes it once
    created_at = models.DateTimeField("time", db_index=True, help_text="When the request arrived.")
    account = models.ForeignKey("accounts.Account", models.CASCADE, null=True, blank=True, db_index=False,
                                related_name="+")
    group = models.ForeignKey("accounts.AccountGroup", models.SET_NULL, null=True, blank=True, related_name="+")
    surface = models.CharField(max_length=40)
    model_requested = models.CharField("model asked", max_length=300, blank=True)
    model = models.CharField("model that answered", max_length=300, blank=True)
    status = models.PositiveSmallIntegerField()
    outcome = models.CharField(max_length=16, choices=Outcome.choices)
    error_code = models.CharField(max_length=64, blank=True, help_text="The error's code, as OpenAI's shape has it.")
    latency_ms = models.FloatField("latency (ms)", help_text="From the request's arrival to its last byte.")
    ttft_ms = models.FloatField("time to first token (ms)", null=True, blank=True)  # arrival to the model's 1st byte
    input_tokens = models.PositiveIntegerField(default=0)
    output_tokens = models.PositiveIntegerField(default=0)
    cost_units = models.BigIntegerField(default=0)  # COST_UNITS of settings.CURRENCY, as the usage record's
    cached = models.BooleanField(default=False, help_text="Whether the response cache answered.")
    fall_throughs = models.PositiveSmallIntegerField(default=0, help_text="Models that failed before the next.")
    request_id = models.CharField("request ID", max_length=64, blank=True, db_index=True)
    attempts = models.JSONField(default=list, blank=True)
    tags = models.JSONField(default=dict, db_default={}, blank=True)  # db_default: a writer of the release before
    guard = models.JSONField(default=list, db_default=[], blank=True)  # db_default: as the tags'

    class Meta:
        verbose_name = "call"
        indexes = [models.Index(fields=[name, "created_at"], name=f"call_{name}_time")
                   for name in ("account", "model", "status")]

    def __str__(self) -> str:
        return f"Call of {self.surface}, {self.status}, at {self.created_at:%Y-%m-%d %H:%M:%S} UTC"


class CallCapture(models.Model):
    """A call's prompt and reply, for a group that keeps them (`capture_calls`): redacted, cut (settings/calls.py)."""

    call = models.OneToOneField(CallRecord, models.CASCADE, to_field="key", related_name="capture")
    prompt = models.TextField(blank=True)
    reply = models.TextField(blank=True)
    created_at = models.DateTimeField(db_index=True)
