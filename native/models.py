"""What the native surface keeps: profiles, conversations, collections of documents, MCP servers.

Embeddings are stored with their chunks as float32 bytes; search loads a collection's vectors
into numpy (`native/vectors.py`), so PostgreSQL and SQLite behave the same and no extension is
needed.
"""

from django.db import models

from gateway.models import validate_server_url


class Profile(models.Model):
    """A preset an operator defines and grants to groups: a model, a system prompt, a temperature,
    tools and collections used for retrieval."""

    name = models.SlugField(max_length=64, unique=True)
    title = models.CharField(max_length=120, blank=True)
    description = models.TextField(blank=True)
    model = models.ForeignKey(
        "gateway.Model", null=True, blank=True, on_delete=models.SET_NULL, related_name="profiles",
        help_text="Empty: the default model.",
    )
    system_prompt = models.TextField(blank=True)
    temperature = models.FloatField(null=True, blank=True)
    tools = models.JSONField(default=list, blank=True, help_text="Names of tools the profile offers (agent).")
    collections = models.ManyToManyField("Collection", blank=True, related_name="profiles")
    groups = models.ManyToManyField("accounts.AccountGroup", blank=True, related_name="profiles")
    enabled = models.BooleanField(default=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name


class Conversation(models.Model):
    account = models.ForeignKey("accounts.Account", on_delete=models.CASCADE, related_name="conversations")
    title = models.CharField(max_length=200, blank=True)
    profile = models.ForeignKey(Profile, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    model = models.CharField(max_length=300, blank=True, help_text="The model of the last reply.")
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True, db_index=True)
    trashed_at = models.DateTimeField(null=True, blank=True, help_text="Set when deleted to the trash.")

    class Meta:
        ordering = ["-updated_at", "-id"]
        indexes = [models.Index(fields=["account", "-updated_at"], name="conversation_account_recent")]

    def __str__(self) -> str:
        return self.title or f"Conversation {self.pk}"


class Message(models.Model):
    class Role(models.TextChoices):
        USER = "user"
        ASSISTANT = "assistant"

    class Status(models.TextChoices):
        COMPLETE = "complete"
        PARTIAL = "partial", "Partial (the reply stopped midway)"
        FAILED = "failed", "Failed (no text arrived)"

    conversation = models.ForeignKey(Conversation, on_delete=models.CASCADE, related_name="messages")
    role = models.CharField(max_length=16, choices=Role.choices)
    content = models.TextField(blank=True)
    attachments = models.JSONField(default=list, blank=True)
    citations = models.JSONField(default=list, blank=True)
    model = models.CharField(max_length=300, blank=True)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.COMPLETE)
    usage = models.JSONField(null=True, blank=True)
    request_id = models.CharField("request ID", max_length=64, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["id"]

    def __str__(self) -> str:
        return f"{self.role}: {self.content[:40]}"


class Collection(models.Model):
    account = models.ForeignKey("accounts.Account", on_delete=models.CASCADE, related_name="collections")
    name = models.CharField(max_length=120)
    description = models.TextField(blank=True)
    embedding_model = models.CharField(
        max_length=300, blank=True, help_text="The model (server/model) the stored vectors were made with."
    )
    vectors_version = models.PositiveBigIntegerField(
        default=0, editable=False,
        help_text="Moved on by every write, delete and reindex: search processes refresh their cached vectors.",
    )
    vectors_generation = models.PositiveBigIntegerField(
        default=0, editable=False,
        help_text="Moved on when stored vectors change or go (delete, reindex): processes reload them all "
                  "rather than adding the new chunks.",
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return self.name


class Document(models.Model):
    collection = models.ForeignKey(Collection, on_delete=models.CASCADE, related_name="documents")
    name = models.CharField(max_length=255)
    content_type = models.CharField(max_length=100)
    size = models.PositiveIntegerField(default=0, help_text="Bytes received.")
    text = models.TextField(blank=True, help_text="The extracted text, kept for reindexing.")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return self.name


class Chunk(models.Model):
    collection = models.ForeignKey(Collection, on_delete=models.CASCADE, related_name="chunks")
    document = models.ForeignKey(Document, on_delete=models.CASCADE, related_name="chunks")
    position = models.PositiveIntegerField()
    text = models.TextField()
    embedding = models.BinaryField(help_text="float32, little-endian.")

    class Meta:
        ordering = ["document_id", "position"]
        indexes = [models.Index(fields=["collection", "id"], name="chunk_collection")]

    def __str__(self) -> str:
        return f"Chunk {self.position} of document {self.document_id}"


class McpServer(models.Model):
    """An MCP server whose tools the agent may call (Streamable HTTP)."""

    name = models.SlugField(max_length=64, unique=True)
    url = models.CharField("URL", max_length=500, validators=[validate_server_url])
    auth_header_name = models.CharField(max_length=100, blank=True, default="Authorization")
    auth_header_value = models.CharField(
        max_length=1000, blank=True, help_text="Sent to the server; never shown again."
    )
    is_remote = models.BooleanField(default=False, help_text="Outside the operator's network.")
    enabled = models.BooleanField(default=True)
    groups = models.ManyToManyField(
        "accounts.AccountGroup", blank=True, related_name="mcp_servers", help_text="Empty: every group."
    )
    timeout = models.FloatField(default=30.0)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name"]
        verbose_name = "MCP server"

    def __str__(self) -> str:
        return self.name
