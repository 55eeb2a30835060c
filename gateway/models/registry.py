"""The model registry the operator edits in the admin: model servers and their models, and aliases.

A model is addressed as `server/model` (its `public_id`) or by its bare upstream name; an alias by its name, over
a weighted list of models (its deployments). The provider clients (`gateway/upstream/providers/`) call the servers.
"""

from urllib.parse import urlsplit

from django.core.exceptions import ValidationError
from django.core.validators import MaxValueValidator, MinValueValidator, RegexValidator
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


validate_region = RegexValidator(r"^[a-z0-9]+(-[a-z0-9]+)*$",
                                 "A region is lower-case letters, digits and dashes, e.g. us-east-1.")
# AWS Bedrock's batch inference: an S3 location as its CreateModelInvocationJob takes one (bucket, then an optional
# prefix), and the IAM role its jobs run as
validate_s3_uri = RegexValidator(r"^s3://[a-z0-9][-.a-z0-9]{1,61}[a-z0-9](/[-!_*'().a-zA-Z0-9]+)*/?$",
                                 "An S3 location is s3://bucket or s3://bucket/prefix, e.g. s3://my-bucket/batches.")
validate_role_arn = RegexValidator(r"^arn:aws(-[a-z]+)*:iam::[0-9]{12}:role/[A-Za-z0-9+=,.@_/-]+$",
                                   "An IAM role's ARN, e.g. arn:aws:iam::123456789012:role/BedrockBatch.")
# a Cloud Storage location: gs:// and a bucket's name (3 to 63 of its characters, as Google names them), then an
# optional folder within it
validate_gcs_uri = RegexValidator(r"^gs://[a-z0-9][a-z0-9._-]{1,61}[a-z0-9](/[^\s#?]*)?$",
                                  "A Cloud Storage location is gs://bucket or gs://bucket/folder, e.g. "
                                  "gs://my-bucket/gateway-batches.")
validate_publisher = RegexValidator(r"^[a-z0-9]+(-[a-z0-9]+)*$",
                                    "A publisher is lower-case letters, digits and dashes, e.g. anthropic.")


class ModelServer(models.Model):
    class Kind(models.TextChoices):
        OPENAI = "openai", "OpenAI-compatible (vLLM, Ollama, llama.cpp, OpenAI)"
        ANTHROPIC = "anthropic", "Anthropic"
        BEDROCK = "bedrock", "AWS Bedrock"
        AZURE = "azure", "Azure OpenAI"
        VERTEX = "vertex", "Google Vertex AI"
        GEMINI = "gemini", "Gemini API (Google AI Studio)"

    class StructuredOutput(models.TextChoices):
        TOOL = "tool", "A forced tool (every Anthropic model)"
        OUTPUT_CONFIG = "output_config", "output_config.format (models with structured outputs)"

    name = models.SlugField(max_length=64, unique=True, help_text="Used in model ids: <server>/<model>.")
    kind = models.CharField(max_length=16, choices=Kind.choices, default=Kind.OPENAI)
    base_url = models.CharField(
        "base URL",
        max_length=500,
        blank=True,
        validators=[validate_server_url],
        help_text="OpenAI-compatible: up to /v1, e.g. http://ollama:11434/v1. Anthropic: without /v1, "
        "e.g. https://api.anthropic.com. Azure OpenAI: the resource, e.g. https://myresource.openai.azure.com. "
        "AWS Bedrock and Google Vertex AI: empty for the region's own endpoint. Gemini API: empty for "
        "https://generativelanguage.googleapis.com.",
    )
    api_key = models.CharField("API key", max_length=500, blank=True,
                               help_text="Sent to the server; never shown again. AWS Bedrock: a Bedrock API key "
                               "(sent as a bearer token, nothing signed) instead of AWS credentials. Gemini API: "
                               "required (sent as x-goog-api-key).")
    # AWS Bedrock (gateway/upstream/providers/bedrock/): where, and who signs. Without the access key pair,
    # AWS's standard credential chain of the serving process (environment, shared config and profile, web
    # identity, container and instance roles).
    region = models.CharField(max_length=32, blank=True, validators=[validate_region],
                              help_text="AWS Bedrock: the AWS region, e.g. us-east-1. Google Vertex AI: the "
                              "location, e.g. us-east5, or global.")
    aws_access_key_id = models.CharField("AWS access key id", max_length=128, blank=True,
                                         help_text="Empty: AWS's standard credential chain.")
    aws_secret_access_key = models.CharField("AWS secret access key", max_length=500, blank=True)
    aws_session_token = models.CharField("AWS session token", max_length=4000, blank=True)
    anthropic_betas = models.TextField(
        "Anthropic betas carried", blank=True,
        help_text="AWS Bedrock and Google Vertex AI: the anthropic-beta values sent on to Claude models, one per "
        "line; the cloud refuses others. Empty: the cloud's own list (docs/compatibility.md).")
    # Azure OpenAI (gateway/upstream/providers/azure.py): its API version, and an API key or Microsoft Entra ID
    api_version = models.CharField(
        "API version", max_length=32, blank=True,
        help_text="Azure OpenAI: e.g. 2024-10-21, or v1 for Azure's /openai/v1 API.")
    azure_tenant_id = models.CharField("Entra ID tenant", max_length=64, blank=True,
                                       help_text="Azure OpenAI without an API key: Microsoft Entra ID's client "
                                       "credentials (tenant, client id and secret).")
    azure_client_id = models.CharField("Entra ID client id", max_length=64, blank=True)
    azure_client_secret = models.CharField("Entra ID client secret", max_length=500, blank=True)
    azure_authority_host = models.CharField(
        "Entra ID authority", max_length=200, blank=True, validators=[validate_server_url],
        help_text="Empty: https://login.microsoftonline.com (sovereign clouds set their own).")
    # Google Vertex AI (gateway/upstream/providers/google/): the project, and who the calls are made as. Without a
    # key file, Google's Application Default Credentials of the serving process (GOOGLE_APPLICATION_CREDENTIALS,
    # workload identity, the metadata server).
    gcp_project = models.CharField("Google Cloud project", max_length=64, blank=True,
                                   help_text="Google Vertex AI: the project id, e.g. my-project.")
    gcp_credentials_file = models.CharField(
        "service account key file", max_length=500, blank=True,
        help_text="Google Vertex AI: the path of a service account's JSON key on the gateway's hosts. Empty: "
        "Google's Application Default Credentials.")
    batch_gcs_uri = models.CharField(
        "Cloud Storage location of batches", max_length=500, blank=True, validators=[validate_gcs_uri],
        help_text="Google Vertex AI, to forward batches of Claude models: gs://bucket/folder, where each batch's "
        "input is written and Vertex AI writes its output; the service account reads and writes objects there.")
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
        help_text="Anthropic, AWS Bedrock and Google Vertex AI (Claude) servers: how an OpenAI client's "
        "response_format (JSON schema or JSON object) is asked for.",
    )
    forward_batches = models.BooleanField(
        default=False,
        help_text="OpenAI-compatible, Anthropic, AWS Bedrock and Google Vertex AI servers only: a batch whose every "
        "model this server answers is sent to the server's own batch API (OpenAI's Batch API, Anthropic's Message "
        "Batches, Bedrock's batch inference, Vertex AI's batch prediction of Claude) rather than run line by line on "
        "the gateway's workers (docs/batches.md).",
    )
    # AWS Bedrock's batch inference (batches/clouds_bedrock.py): where its jobs read and write, and who runs them
    batch_s3_uri = models.CharField(
        "batch S3 location", max_length=1024, blank=True, validators=[validate_s3_uri],
        help_text="AWS Bedrock, to forward batches: the S3 bucket and prefix its batch jobs read their requests "
        "from and write their results to, e.g. s3://my-bucket/gateway-batches.")
    batch_role_arn = models.CharField(
        "batch IAM role", max_length=2048, blank=True, validators=[validate_role_arn],
        help_text="AWS Bedrock, to forward batches: the IAM role Bedrock runs the jobs as (it reads and writes the "
        "S3 location), e.g. arn:aws:iam::123456789012:role/BedrockBatch.")
    batch_s3_endpoint_url = models.CharField(
        "batch S3 endpoint", max_length=500, blank=True, validators=[validate_server_url],
        help_text="AWS Bedrock: the S3 endpoint the gateway writes and reads the S3 location through. Empty: AWS's "
        "own, in the server's region.")
    discovered_at = models.DateTimeField(null=True, blank=True, help_text="When model discovery last asked it.")
    discovery_error = models.CharField(
        max_length=300, blank=True, help_text="Why the last model discovery failed; empty when it succeeded."
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name

    def clean(self) -> None:
        """What each kind needs: an address (Bedrock's and Vertex AI's come from their region, the Gemini API's is
        Google's), and for the clouds their own settings. Every cloud is a remote provider."""
        super().clean()
        errors = {}
        if self.kind in CLOUD_KINDS:
            self.is_remote = True
        if self.kind == self.Kind.VERTEX:
            if not self.gcp_project:
                errors["gcp_project"] = "A Google Vertex AI server needs its project."
            if not self.region:
                errors["region"] = "A Google Vertex AI server needs its location (e.g. us-east5, or global)."
            elif not self.base_url:
                self.base_url = vertex_endpoint(self.region)
        elif self.kind == self.Kind.GEMINI:
            self.base_url = self.base_url or GEMINI_ENDPOINT
            if not self.api_key:
                errors["api_key"] = "A Gemini API server needs an API key."
        elif self.kind == self.Kind.BEDROCK:
            if not self.region:
                errors["region"] = "An AWS Bedrock server needs its region."
            elif not self.base_url:
                self.base_url = bedrock_endpoint(self.region)
            if bool(self.aws_access_key_id) != bool(self.aws_secret_access_key):
                errors["aws_secret_access_key"] = "Give the access key id and the secret access key together."
        elif not self.base_url:
            errors["base_url"] = "This field is required."
        if self.kind == self.Kind.AZURE:
            if not self.api_version:
                errors["api_version"] = "An Azure OpenAI server needs its API version (e.g. 2024-10-21, or v1)."
            entra = (self.azure_tenant_id, self.azure_client_id, self.azure_client_secret)
            if any(entra) and not all(entra):
                errors["azure_client_secret"] = "Microsoft Entra ID needs the tenant, the client id and its secret."
            if not self.api_key and not all(entra):
                errors["api_key"] = ("An Azure OpenAI server needs an API key or Microsoft Entra ID's client "
                                     "credentials.")
        if self.forward_batches and self.kind not in BATCH_API_KINDS:
            errors["forward_batches"] = ("Only an OpenAI-compatible, an Anthropic, an AWS Bedrock or a Google Vertex "
                                         "AI server has a batch API the gateway forwards batches to.")
        elif self.forward_batches and self.kind == self.Kind.BEDROCK:  # its jobs read and write S3, as a role
            if not self.batch_s3_uri:
                errors["batch_s3_uri"] = "Forwarding batches to AWS Bedrock needs the S3 location its jobs use."
            if not self.batch_role_arn:
                errors["batch_role_arn"] = "Forwarding batches to AWS Bedrock needs the IAM role its jobs run as."
        elif self.forward_batches and self.kind == self.Kind.VERTEX and not self.batch_gcs_uri:
            errors["batch_gcs_uri"] = ("Forwarding batches to Vertex AI needs the Cloud Storage location their input "
                                       "and output are written to (gs://bucket/folder).")
        if errors:
            raise ValidationError(errors)


CLOUD_KINDS = (ModelServer.Kind.BEDROCK, ModelServer.Kind.AZURE, ModelServer.Kind.VERTEX, ModelServer.Kind.GEMINI)
GEMINI_ENDPOINT = "https://generativelanguage.googleapis.com"
# the kinds whose own batch API a batch may be forwarded to (batches/forward.py, batches/cloud_apis.py): Vertex
# AI's batch prediction of Claude through a Cloud Storage location (`batch_gcs_uri`)
BATCH_API_KINDS = (ModelServer.Kind.OPENAI, ModelServer.Kind.ANTHROPIC, ModelServer.Kind.BEDROCK,
                   ModelServer.Kind.VERTEX)


def vertex_endpoint(region: str) -> str:
    """Vertex AI's endpoint in `region`; the global location's has no region in its host."""
    return "https://aiplatform.googleapis.com" if region == "global" else f"https://{region}-aiplatform.googleapis.com"


def bedrock_endpoint(region: str) -> str:
    """Bedrock's runtime endpoint in `region` (AWS's own address; a VPC endpoint is set as the base URL)."""
    return f"https://bedrock-runtime.{region}.amazonaws.com"


PRICE_HELP = {
    "input": "Per million input tokens, in the installation's currency; empty = no price (costs nothing).",
    "cached": "Per million input tokens read from the provider's prompt cache; empty = the input price.",
    "cache_write": "Per million input tokens written to the provider's prompt cache (Anthropic, Bedrock); "
                   "empty = the input price.",
    "output": "Per million output tokens; empty = no price.",
}
DEPLOYMENT_PRICE_HELP = "Per million tokens through this alias; empty = the model's own price."
BATCH_DISCOUNT_HELP = ("Percent off the cost of a batch line (the Batch APIs), rounded down to the smallest unit; "
                       "0 = the live price, 100 = free.")
DEPLOYMENT_BATCH_DISCOUNT_HELP = "Percent off a batch line through this alias; empty = the model's own discount."
PERCENT = [MinValueValidator(0), MaxValueValidator(100)]


class Model(models.Model):
    server = models.ForeignKey(ModelServer, on_delete=models.CASCADE, related_name="models")
    name = models.CharField(max_length=200, help_text="The name the server knows the model by.")
    publisher = models.CharField(
        max_length=32, blank=True, validators=[validate_publisher],
        help_text="Google Vertex AI: the model's publisher (google, anthropic, ...). Empty: anthropic for a claude- "
        "name, else google.")
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
    cache_write_price = models.DecimalField(max_digits=12, decimal_places=4, null=True, blank=True,
                                            validators=[MinValueValidator(0)], help_text=PRICE_HELP["cache_write"])
    # of a batch line's cost (gateway/registry/prices.py `Price.batch_cost_units`, its default there too)
    batch_discount_percent = models.PositiveSmallIntegerField("batch discount (%)", default=50, db_default=50,
                                                              validators=PERCENT,
                                                              help_text=BATCH_DISCOUNT_HELP)
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
    cache_write_price = models.DecimalField(max_digits=12, decimal_places=4, null=True, blank=True,
                                            validators=[MinValueValidator(0)], help_text=DEPLOYMENT_PRICE_HELP)
    batch_discount_percent = models.PositiveSmallIntegerField("batch discount (%)", null=True, blank=True,
                                                              validators=PERCENT,
                                                              help_text=DEPLOYMENT_BATCH_DISCOUNT_HELP)

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
