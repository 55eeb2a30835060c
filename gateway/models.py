"""The model registry the operator edits in the admin: model servers and their models, and aliases.

A model is addressed as `server/model` (its `public_id`) or by its bare upstream name; an alias by its name, over
a weighted list of models (its deployments). The provider clients (`gateway/upstream/providers/`) call the servers.
"""

from urllib.parse import urlsplit

from django.core.exceptions import ValidationError
from django.core.validators import MinValueValidator
from django.db import models
from django.db.models import Q


def validate_server_url(value: str) -> None:
    """An http(s) URL with a host. Unlike URLField this accepts single-label hosts such as
    `http://ollama:11434/v1`, the usual address of a model server in a container network."""
    try:
        parts = urlsplit(value)
        parts.port  # noqa: B018 — raises ValueError on a bad port
    except ValueError:
        raise ValidationError("Enter a valid http(s) URL.") from None
    if parts.scheme not in ("http", "https") or not parts.hostname or any(c.isspace() for c in value):
        raise ValidationError("Enter a valid http(s) URL, for example http://127.0.0.1:11434/v1.")


class ModelServer(models.Model):
    class Kind(models.TextChoices):
        OPENAI = "openai", "OpenAI-compatible (vLLM, Ollama, llama.cpp, OpenAI)"
        ANTHROPIC = "anthropic", "Anthropic"

    class StructuredOutput(models.TextChoices):
        TOOL = "tool", "A forced tool (every Anthropic model)"
        OUTPUT_CONFIG = "output_config", "output_config.format (models with structured outputs)"

    name = models.SlugField(max_length=64, unique=True, help_text="Used in model ids: <server>/<model>.")
    kind = models.CharField(max_length=16, choices=Kind.choices, default=Kind.OPENAI)
    base_url = models.CharField(
        "base URL",
        max_length=500,
        validators=[validate_server_url],
        help_text="OpenAI-compatible: up to /v1, e.g. http://ollama:11434/v1. Anthropic: without /v1, "
        "e.g. https://api.anthropic.com",
    )
    api_key = models.CharField("API key", max_length=500, blank=True,
                               help_text="Sent to the server; never shown again.")
    is_remote = models.BooleanField(default=False, help_text="A cloud provider rather than a local server.")
    enabled = models.BooleanField(default=True)
    connect_timeout = models.FloatField(default=5.0, validators=[MinValueValidator(0.1)])
    read_timeout = models.FloatField(
        default=120.0, validators=[MinValueValidator(0.1)], help_text="Seconds without a byte from the server."
    )
    drop_unsupported_fields = models.BooleanField(
        default=False,
        help_text="A request field this server's wire format cannot carry (a translated request) is dropped; "
        "off: such a request is refused with 400 naming the field.",
    )
    structured_output = models.CharField(
        max_length=16, choices=StructuredOutput.choices, default=StructuredOutput.TOOL,
        help_text="Anthropic servers: how an OpenAI client's response_format (JSON schema or JSON object) "
        "is asked for.",
    )
    discovered_at = models.DateTimeField(null=True, blank=True, help_text="When model discovery last asked it.")
    discovery_error = models.CharField(
        max_length=300, blank=True, help_text="Why the last model discovery failed; empty when it succeeded."
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name


PRICE_HELP = {
    "input": "Per million input tokens, in the installation's currency; empty = no price (costs nothing).",
    "cached": "Per million input tokens read from the provider's prompt cache; empty = the input price.",
    "output": "Per million output tokens; empty = no price.",
}
DEPLOYMENT_PRICE_HELP = "Per million tokens through this alias; empty = the model's own price."


class Model(models.Model):
    server = models.ForeignKey(ModelServer, on_delete=models.CASCADE, related_name="models")
    name = models.CharField(max_length=200, help_text="The name the server knows the model by.")
    supports_chat = models.BooleanField(default=True)
    supports_embeddings = models.BooleanField(default=False)
    supports_audio = models.BooleanField(default=False)
    enabled = models.BooleanField(default=True)
    is_default = models.BooleanField(
        default=False, help_text="Answers bare names no server has, and ends every fallback chain."
    )
    context_window = models.PositiveIntegerField(
        default=8192, validators=[MinValueValidator(256)],
        help_text="Tokens the model reads at once; native chat trims a conversation's history to fit.",
    )
    unlisted_since = models.DateTimeField(
        null=True, blank=True,
        help_text="Set by model discovery while the server does not list this model (nothing else changes).",
    )
    # Prices per million tokens, in settings.CURRENCY; none set: the model costs nothing and
    # the usage console says it has no price. A change applies to the calls metered from then on.
    input_price = models.DecimalField(max_digits=12, decimal_places=4, null=True, blank=True,
                                      validators=[MinValueValidator(0)], help_text=PRICE_HELP["input"])
    cached_input_price = models.DecimalField(max_digits=12, decimal_places=4, null=True, blank=True,
                                             validators=[MinValueValidator(0)], help_text=PRICE_HELP["cached"])
    output_price = models.DecimalField(max_digits=12, decimal_places=4, null=True, blank=True,
                                       validators=[MinValueValidator(0)], help_text=PRICE_HELP["output"])
    fallbacks = models.ManyToManyField(
        "self", through="ModelFallback", through_fields=("model", "fallback"), symmetrical=False, blank=True
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["server__name", "name"]
        constraints = [
            models.UniqueConstraint(fields=["server", "name"], name="model_unique_per_server"),
            models.UniqueConstraint(fields=["is_default"], condition=Q(is_default=True), name="one_default_model"),
        ]

    def __str__(self) -> str:
        return self.public_id

    @property
    def public_id(self) -> str:
        return f"{self.server.name}/{self.name}"


class ModelFallback(models.Model):
    """An ordered fallback: when `model` fails for a retryable cause, `fallback` is tried."""

    model = models.ForeignKey(Model, on_delete=models.CASCADE, related_name="fallback_links")
    fallback = models.ForeignKey(Model, on_delete=models.CASCADE, related_name="+")
    position = models.PositiveSmallIntegerField(default=0)

    class Meta:
        ordering = ["position", "id"]
        constraints = [models.UniqueConstraint(fields=["model", "fallback"], name="fallback_once")]

    def __str__(self) -> str:
        return f"{self.model} → {self.fallback}"


def validate_alias_name(value: str) -> None:
    """A name a client can send as `model`: no spaces or control characters."""
    if not value or any(c.isspace() or not c.isprintable() for c in value):
        raise ValidationError("An alias name has no spaces or control characters.")


class Alias(models.Model):
    """A public model name over a weighted list of deployments (docs/decisions/0110-pools-and-aliases.md):
    each call picks one by the alias's policy, and the others answer when it fails before its
    first byte, before the alias's own fallbacks. An alias named like a bare model name defines that
    name's pool."""

    class Policy(models.TextChoices):
        WEIGHTED = "weighted", "Weighted: at random, by weight"
        LEAST_BUSY = "least-busy", "Least busy: fewest calls in flight for its weight"
        LATENCY = "latency", "Latency: the lowest moving time to first byte"

    class Affinity(models.TextChoices):
        NONE = "none", "None"
        SESSION = "session", "Session: one X-Session-Id header or native conversation stays on one deployment"
        USER = "user", "User: one `user` field stays on one deployment (else the session)"

    name = models.CharField(max_length=200, unique=True, validators=[validate_alias_name],
                            help_text="The model name clients send (not server/model: that names a server's model).")
    policy = models.CharField(max_length=16, choices=Policy.choices, default=Policy.WEIGHTED)
    affinity = models.CharField(max_length=16, choices=Affinity.choices, default=Affinity.NONE,
                                help_text="Calls of one session or user go to the same deployment while it is "
                                "healthy, so its prefix cache is reused.")
    enabled = models.BooleanField(default=True, help_text="A disabled alias is as if it did not exist.")
    fallbacks = models.ManyToManyField(Model, through="AliasFallback", through_fields=("alias", "fallback"),
                                       related_name="+", blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name"]
        verbose_name_plural = "aliases"

    def __str__(self) -> str:
        return self.name

    def clean(self) -> None:
        server_name, sep, _rest = (self.name or "").partition("/")
        if sep and ModelServer.objects.filter(name=server_name).exists():
            raise ValidationError({"name": f"'{server_name}/…' names a model of the server '{server_name}'."})


class AliasDeployment(models.Model):
    """One model behind an alias, with its weight (0: a standby, tried only after the others)."""

    alias = models.ForeignKey(Alias, on_delete=models.CASCADE, related_name="deployments")
    model = models.ForeignKey(Model, on_delete=models.CASCADE, related_name="alias_deployments")
    weight = models.PositiveIntegerField(default=1, help_text="Its share of the calls; 0 = only when the others fail.")
    # Its own prices, per million tokens; a price left empty is the model's.
    input_price = models.DecimalField(max_digits=12, decimal_places=4, null=True, blank=True,
                                      validators=[MinValueValidator(0)], help_text=DEPLOYMENT_PRICE_HELP)
    cached_input_price = models.DecimalField(max_digits=12, decimal_places=4, null=True, blank=True,
                                             validators=[MinValueValidator(0)], help_text=DEPLOYMENT_PRICE_HELP)
    output_price = models.DecimalField(max_digits=12, decimal_places=4, null=True, blank=True,
                                       validators=[MinValueValidator(0)], help_text=DEPLOYMENT_PRICE_HELP)

    class Meta:
        ordering = ["id"]
        constraints = [models.UniqueConstraint(fields=["alias", "model"], name="alias_deployment_once")]

    def __str__(self) -> str:
        return f"{self.alias} → {self.model} ({self.weight})"


class AliasFallback(models.Model):
    """An alias's ordered fallback: tried when every deployment failed, before the default model."""

    alias = models.ForeignKey(Alias, on_delete=models.CASCADE, related_name="fallback_links")
    fallback = models.ForeignKey(Model, on_delete=models.CASCADE, related_name="+")
    position = models.PositiveSmallIntegerField(default=0)

    class Meta:
        ordering = ["position", "id"]
        constraints = [models.UniqueConstraint(fields=["alias", "fallback"], name="alias_fallback_once")]

    def __str__(self) -> str:
        return f"{self.alias} → {self.fallback}"


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
    # What the call cost when it was metered, in COST_UNITS of settings.CURRENCY (an integer, exact on
    # SQLite too: gateway/registry/prices.py). A price changed later never rewrites it.
    cost_units = models.BigIntegerField(default=0, db_default=0)
    created_at = models.DateTimeField(db_index=True)
    tags = models.JSONField(default=dict, db_default={}, blank=True)  # the call's (CallRecord.tags); not rolled up

    class Meta:
        indexes = [
            models.Index(fields=["account", "created_at"], name="usage_account_time"),
            # the usage console's cache hits (gateway/console/usage_reads.py): only the cached records
            models.Index(fields=["created_at"], condition=models.Q(cached=True), name="usage_cached_time"),
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
    the chain tried, each {model, server, outcome, status, error, ttfb_ms}; `tags`: OpenAI's `metadata`."""

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


def account_model() -> type[models.Model]:
    """The accounts app's Account, found through the usage record's relation: the gateway's tables
    point at the accounts', and its code reads them without importing the app above it."""
    return UsageRecord._meta.get_field("account").related_model


def account_group_model() -> type[models.Model]:
    """The accounts app's AccountGroup, found the same way (an account's `group`)."""
    return account_model()._meta.get_field("group").related_model
