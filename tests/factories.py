"""Factories for the rows tests need: one per model, with defaults only for what the model
requires (an optional field keeps the model's own default, so `XFactory(**fields)` makes the row
the model's manager would make from the same fields)."""

from datetime import timedelta

import factory
from django.utils import timezone

from accounts.keys import KEY_PREFIX, api_key_generate, api_key_preview
from accounts.models import Account, AccountGroup, ApiKey, SessionToken
from accounts.secrets import digest, random_alnum
from accounts.sessions import session_create
from gateway.models import (
    Alias,
    AliasDeployment,
    AliasFallback,
    CallCapture,
    CallFailureDaily,
    CallRecord,
    IdempotentRequest,
    Model,
    ModelFallback,
    ModelServer,
    StoredFile,
    UsageDaily,
    UsageRecord,
)
from native import vectors
from native.models import Chunk, Collection, Conversation, Document, McpServer, Message, Profile
from routines.models import Delivery, Event, InboxMessage, LinkedChannel, RefusedEvent, Routine, Run
from routines.routine_writes import new_token
from tests.batch_factories import BatchFactory, BatchLineFactory  # noqa: F401 — the batches' rows, kept beside

PASSWORD = "correct horse battery staple"


class AccountGroupFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = AccountGroup
        django_get_or_create = ["name"]

    name = factory.Sequence(lambda n: f"group-{n}")
    api_access = True


class AccountFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Account
        skip_postgeneration_save = True

    email = factory.Sequence(lambda n: f"person{n}@example.test")
    full_name = factory.Faker("name")
    group = factory.SubFactory(AccountGroupFactory)
    password = factory.PostGenerationMethodCall("set_password", PASSWORD)

    @factory.post_generation
    def _save(obj, create, extracted, **kwargs):
        if create:
            obj.save()


class ModelServerFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = ModelServer

    name = factory.Sequence(lambda n: f"server{n}")
    base_url = "http://127.0.0.1:9100/v1"


class ModelFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Model

    server = factory.SubFactory(ModelServerFactory)
    name = factory.Sequence(lambda n: f"model-{n}")


class UsageRecordFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = UsageRecord

    account = factory.SubFactory(AccountFactory)
    model = "srv/model-a"
    surface = "chat_completions"
    input_tokens = 10
    output_tokens = 5
    created_at = factory.LazyFunction(timezone.now)


class ModelFallbackFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = ModelFallback

    model = factory.SubFactory(ModelFactory)
    fallback = factory.SubFactory(ModelFactory)


class AliasFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Alias

    name = factory.Sequence(lambda n: f"alias-{n}")


class AliasDeploymentFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = AliasDeployment

    alias = factory.SubFactory(AliasFactory)
    model = factory.SubFactory(ModelFactory)


class AliasFallbackFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = AliasFallback

    alias = factory.SubFactory(AliasFactory)
    fallback = factory.SubFactory(ModelFactory)


class UsageDailyFactory(factory.django.DjangoModelFactory):
    """A day's row written directly; usually the triggers on UsageRecord keep these."""

    class Meta:
        model = UsageDaily

    day = factory.LazyFunction(lambda: timezone.now().date())
    account = factory.SubFactory(AccountFactory)
    model = "srv/model-a"
    calls = 1


class CallFailureDailyFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = CallFailureDaily

    day = factory.LazyFunction(lambda: timezone.now().date())
    model = factory.Sequence(lambda n: f"srv/model-{n}")
    kind = CallFailureDaily.Kind.FELL_THROUGH
    count = 1


class IdempotentRequestFactory(factory.django.DjangoModelFactory):
    """A kept answer to an Idempotency-Key (`status=None`: a claim still held), made for now."""

    class Meta:
        model = IdempotentRequest

    account = factory.SubFactory(AccountFactory)
    key = factory.Sequence(lambda n: f"key-{n}")
    fingerprint = "0" * 64
    claim = factory.Sequence(lambda n: f"{n:032x}")
    status = 200
    content_type = "application/json"
    body = b"{}"
    created_at = factory.LazyFunction(timezone.now)
    held_until = factory.LazyAttribute(lambda row: row.created_at + timedelta(minutes=15))
    expires_at = factory.LazyAttribute(lambda row: row.created_at + timedelta(days=1))


class CallRecordFactory(factory.django.DjangoModelFactory):
    """A call of the calls log, answered, made for now (the gateway writes them from its spool)."""

    class Meta:
        model = CallRecord

    key = factory.Sequence(lambda n: f"{n:032x}")
    created_at = factory.LazyFunction(timezone.now)
    account = factory.SubFactory(AccountFactory)
    group = factory.LazyAttribute(lambda row: row.account.group if row.account else None)
    surface = "chat.completions"
    model_requested = model = "srv/model-a"
    status = 200
    outcome = CallRecord.Outcome.OK
    latency_ms = 120.0
    ttft_ms = 40.0
    input_tokens = 10
    output_tokens = 5
    request_id = factory.Sequence(lambda n: f"req-{n}")
    attempts = factory.LazyAttribute(lambda row: [{"model": row.model, "server": "srv", "outcome": "ok", "status": 200,
                                                    "error": None, "ttfb_ms": row.ttft_ms}] if row.model else [])


def metered_call(**fields) -> UsageRecord:
    """A call as the gateway leaves it when a model answered: its usage record (made with `fields`) and its
    row in the calls log, alike (time, account, group, model, tokens, cost, cache, tags, request ID). The
    console counts calls in the calls log and tokens in the usage records (gateway/console/call_counts.py)."""
    record = UsageRecordFactory(**fields)
    CallRecordFactory(created_at=record.created_at, account=record.account, group=record.account.group,
                      model=record.model, model_requested=record.model, input_tokens=record.input_tokens,
                      output_tokens=record.output_tokens, cost_units=record.cost_units, cached=record.cached,
                      tags=record.tags or {}, request_id=(record.request_id or "")[:64])
    return record


class CallCaptureFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = CallCapture

    call = factory.SubFactory(CallRecordFactory)
    prompt = '{"messages": [{"role": "user", "content": "hello"}]}'
    reply = "Echo: hello"
    created_at = factory.LazyAttribute(lambda row: row.call.created_at)


class ApiKeyFactory(factory.django.DjangoModelFactory):
    """An API key row for a key that is not kept; `api_key_for` issues one a test can send."""

    class Meta:
        model = ApiKey

    class Params:
        key = factory.LazyAttribute(lambda o: f"{KEY_PREFIX}{o.account.pk}_{random_alnum(32)}")

    account = factory.SubFactory(AccountFactory)
    key_hash = factory.LazyAttribute(lambda o: digest(o.key))
    preview = factory.LazyAttribute(lambda o: api_key_preview(o.key))
    expires_at = factory.LazyFunction(lambda: timezone.now() + timedelta(days=365))


class SessionTokenFactory(factory.django.DjangoModelFactory):
    """A session row for a token that is not kept; `session_for` issues one a test can send."""

    class Meta:
        model = SessionToken

    class Params:
        token = factory.LazyFunction(lambda: random_alnum(48))

    account = factory.SubFactory(AccountFactory)
    token_hash = factory.LazyAttribute(lambda o: digest(o.token))
    expires_at = factory.LazyFunction(lambda: timezone.now() + timedelta(days=1))


class ProfileFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Profile

    name = factory.Sequence(lambda n: f"profile-{n}")


class ConversationFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Conversation

    account = factory.SubFactory(AccountFactory)


class MessageFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Message

    conversation = factory.SubFactory(ConversationFactory)
    role = Message.Role.USER


class StoredFileFactory(factory.django.DjangoModelFactory):
    """A row of `/v1/files` without its bytes in the storage (tests that read the content upload through the API)."""

    class Meta:
        model = StoredFile

    id = factory.Sequence(lambda n: f"file-{n:024x}")
    account = factory.SubFactory(AccountFactory)
    filename = factory.Sequence(lambda n: f"batch-{n}.jsonl")
    purpose = "batch"
    bytes = 100
    storage_name = factory.LazyAttribute(lambda row: f"{row.account.pk}/{row.id}")


class CollectionFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Collection

    account = factory.SubFactory(AccountFactory)
    name = factory.Sequence(lambda n: f"collection {n}")


class DocumentFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Document

    collection = factory.SubFactory(CollectionFactory)
    name = factory.Sequence(lambda n: f"document-{n}.txt")
    content_type = "text/plain"


class ChunkFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Chunk

    document = factory.SubFactory(DocumentFactory)
    collection = factory.SelfAttribute("document.collection")
    position = factory.Sequence(lambda n: n)
    text = "chunk"
    embedding = factory.LazyFunction(lambda: vectors.to_blobs([[1.0, 0.0]])[0])


class McpServerFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = McpServer

    name = factory.Sequence(lambda n: f"mcp{n}")
    url = "http://127.0.0.1:9000/mcp"


class RoutineFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Routine

    account = factory.SubFactory(AccountFactory)
    name = factory.Sequence(lambda n: f"routine {n}")
    prompt = "Summarize."
    webhook_token = factory.LazyFunction(new_token)


class EventFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Event

    routine = factory.SubFactory(RoutineFactory)
    event_id = factory.Sequence(lambda n: f"evt-{n}")
    source = "webhook"


class RefusedEventFactory(factory.django.DjangoModelFactory):
    """A webhook event refused for its signature, as routines/refused_events.py keeps it."""

    class Meta:
        model = RefusedEvent

    routine = factory.SubFactory(RoutineFactory)
    reason = "The signature does not match the body."
    signature_headers = "X-Svc-Signature"
    content_type = "application/json"
    body_bytes = 2
    body_sha256 = factory.Sequence(lambda n: f"{n:064x}")


class RunFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Run

    routine = factory.SubFactory(RoutineFactory)
    trigger = Run.Trigger.MANUAL


class DeliveryFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Delivery

    run = factory.SubFactory(RunFactory)
    target = "inapp"


class InboxMessageFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = InboxMessage

    account = factory.SubFactory(AccountFactory)
    title = factory.Sequence(lambda n: f"message {n}")


class LinkedChannelFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = LinkedChannel

    account = factory.SubFactory(AccountFactory)
    kind = LinkedChannel.Kind.TELEGRAM
    address = factory.Sequence(lambda n: str(1000 + n))


def api_key_for(account: Account) -> str:
    return api_key_generate(account=account).key


def session_for(account: Account, remember: bool = False) -> str:
    return session_create(account=account, remember=remember).token


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}
