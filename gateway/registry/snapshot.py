"""The model registry as each process holds it: the servers and models the operator enabled, and the
pools (aliases, and bare names several servers hold), read from the database into a snapshot
(`registry()`) and read again when it changed.

Each process keeps the registry it read from the database, tagged with a version stamp held with the
counters (`gw:registry:v` in Redis, or the Django cache). Every change to a server, a model, a fallback, an
alias (its deployments, its fallbacks) or a group's allowed models or aliases moves the stamp once it is
committed (gateway/registry/signals.py), and every `registry()` call knows the current stamp (with the stamp
of the model servers' cooldowns, see gateway/registry/cooldown.py): when it moved, the registry is read
again. An API request reads both in its atomic counter step (accounts/endpoints.py, `note_stamps`), so the
hot path pays no round trip for them; any other caller (a Celery task) reads them in one `MGET`. So a change
made in any process (admin, `applyconfig`, the API) is seen by every web and worker process on its next
call. REGISTRY_TTL_SECONDS stays as a backstop for changes made around the signals (raw SQL,
`QuerySet.update`) and for a stamp that could not be read or moved (Redis down).
"""

from __future__ import annotations

import contextvars
import dataclasses
import logging
import threading
import time
from dataclasses import dataclass, field
from functools import cached_property

from django.conf import settings
from django.db import transaction

from gateway.models import CLOUD_KINDS, Alias, AliasDeployment, AliasFallback, Model, ModelFallback, ModelServer
from gateway.registry import cooldown
from gateway.registry.prices import NO_PRICE, Price, price_of
from gateway.state import per_process

logger = logging.getLogger(__name__)

CAPABILITIES = ("chat", "embeddings", "audio")


@dataclass(frozen=True)
class Cloud:
    """A cloud server's own settings (gateway/models/registry.py ModelServer): AWS Bedrock's region and credentials;
    Azure OpenAI's API version and Entra ID client; Google Vertex AI's project, location (`region`), key file."""

    region: str = ""
    aws_access_key_id: str = ""
    aws_secret_access_key: str = ""
    aws_session_token: str = ""
    anthropic_betas: tuple[str, ...] = ()  # to Claude on Bedrock or Vertex AI; empty: the cloud's list
    api_version: str = ""
    azure_tenant_id: str = ""
    azure_client_id: str = ""
    azure_client_secret: str = ""
    azure_authority_host: str = ""
    gcp_project: str = ""
    gcp_credentials_file: str = ""  # empty: Google's Application Default Credentials
    batch_gcs_uri: str = ""  # Vertex AI: gs://bucket/folder of the batches forwarded there (batches/clouds_vertex.py)


NO_CLOUD = Cloud()


@dataclass(frozen=True)
class Server:
    id: int
    name: str
    kind: str
    base_url: str
    api_key: str
    is_remote: bool
    connect_timeout: float
    read_timeout: float
    drop_unsupported_fields: bool = False
    structured_output: str = "tool"
    cloud: Cloud = NO_CLOUD


def server_of(row: ModelServer) -> Server:
    """The snapshot's server of a database row (also for discovery and "Test connection", which ask a
    server whether or not it is enabled)."""
    cloud = NO_CLOUD
    if row.kind in CLOUD_KINDS:
        cloud = Cloud(row.region, row.aws_access_key_id, row.aws_secret_access_key, row.aws_session_token,
                      tuple(line.strip() for line in row.anthropic_betas.splitlines() if line.strip()),
                      row.api_version, row.azure_tenant_id, row.azure_client_id, row.azure_client_secret,
                      row.azure_authority_host.rstrip("/"), row.gcp_project, row.gcp_credentials_file,
                      batch_gcs_uri=row.batch_gcs_uri)
    return Server(row.id, row.name, row.kind, row.base_url.rstrip("/"), row.api_key, row.is_remote,
                  row.connect_timeout, row.read_timeout, row.drop_unsupported_fields, row.structured_output, cloud)


@dataclass(frozen=True)
class Target:
    id: int
    public_id: str
    name: str  # the name the server knows the model by
    server: Server
    capabilities: frozenset[str]
    fallback_ids: tuple[int, ...]
    created: int
    price: Price = NO_PRICE  # an alias deployment's own prices where it has them
    publisher: str = ""  # Google Vertex AI: the model's publisher as the operator set it (empty: by its name)


@dataclass(frozen=True)
class Deployment:
    """One model of a pool, with its weight (0: a standby, tried only after the others)."""

    target: Target
    weight: int


@dataclass(frozen=True)
class Pool:
    """A name several deployments answer: an alias the operator defined, or a bare name
    several enabled servers hold (an implicit pool: weighted, weight 1 each, no affinity, each
    deployment's own fallbacks). gateway/registry/pools.py orders its deployments for a call."""

    name: str
    deployments: tuple[Deployment, ...]
    policy: str = "weighted"  # gateway.models.Alias.Policy's values
    affinity: str = "none"  # gateway.models.Alias.Affinity's values
    alias_id: int | None = None  # None: an implicit pool
    fallback_ids: tuple[int, ...] = ()  # an alias's own fallbacks (an implicit pool uses its deployments')
    created: int = 0

    @property
    def is_alias(self) -> bool:
        return self.alias_id is not None


@dataclass(frozen=True)
class Registry:
    by_id: dict[int, Target]
    by_public_id: dict[str, Target]
    # bare upstream name → first model with it (by server name), and each alias's name → its first
    # deployment: every name the registry answers (other than the default's) is a key here
    by_name: dict[str, Target]
    server_names: frozenset[str]
    server_ids: frozenset[int]
    default_id: int | None
    group_models: dict[int, frozenset[int]]  # group id → allowed model ids
    pools: dict[str, Pool] = field(default_factory=dict)  # name → the pool it names (aliases first)
    group_aliases: dict[int, frozenset[int]] = field(default_factory=dict)  # group id → allowed alias ids

    @property
    def default(self) -> Target | None:
        return self.by_id.get(self.default_id) if self.default_id else None

    @cached_property
    def aliases(self) -> tuple[Pool, ...]:
        """The enabled aliases with a deployment, by name."""
        return tuple(sorted((p for p in self.pools.values() if p.is_alias), key=lambda p: p.name))

    @cached_property
    def server_keys(self) -> tuple[str, ...]:
        """The model servers' keys and cloud secrets, for redaction (gateway/telemetry/redact.py)."""
        found = set()
        for server in {target.server for target in self.by_id.values()}:
            cloud = server.cloud
            found.update(value for value in (server.api_key, cloud.aws_secret_access_key, cloud.aws_session_token,
                                             cloud.azure_client_secret) if value)
        return tuple(found)  # Google's access tokens: gateway/registry/google_auth.py `tokens`


REGISTRY_STAMP_KEY = f"registry:{cooldown.REGISTRY_TAG}:v"


def registry_version_key() -> str:
    """The counters' key (without their prefix) of the registry's version stamp."""
    return REGISTRY_STAMP_KEY


def stamp_keys() -> list[str]:
    """The counters' keys of the stamps `registry()` reads: a request's counter step may read
    them as guards expecting any value, and hand them over with `note_stamps`."""
    return [REGISTRY_STAMP_KEY, cooldown.STAMP_KEY]


# The stamps the current request read with its counter step (time.monotonic(), stamps). A
# request under ASGI has a context of its own, and the worker-thread hop of its checks hands its
# context back, so the note is the request's own; where a context outlives a request (a thread
# serving synchronous requests one after the other) it is dropped when the request finishes, and
# NOTED_STAMPS_SECONDS bounds it in any case.
_noted: contextvars.ContextVar[tuple[float, tuple[int, int]] | None] = contextvars.ContextVar(
    "gateway_registry_stamps", default=None)
NOTED_STAMPS_SECONDS = 1.0
# The copy `registry_current` found current for this request: its later `registry()` calls answer from
# it even if REGISTRY_TTL_SECONDS ran out (or another thread loaded a newer copy) in between, since its
# step then runs in the event loop, where reading the database is not allowed.
_pinned: contextvars.ContextVar[_Snapshot | None] = contextvars.ContextVar("gateway_registry_pinned", default=None)


def note_stamps(values) -> None:
    """The stamps (in `stamp_keys()` order) the request just read in its counter step: this
    request's `registry()` calls use them instead of reading them again."""
    _noted.set((time.monotonic(), (int(values[0]), int(values[1]))))


def forget_noted_stamps(**_kwargs) -> None:
    """At the end of a request (gateway/registry/signals.py): its noted stamps go with it."""
    _noted.set(None)
    _pinned.set(None)


@dataclass(frozen=True)
class _Snapshot:
    loaded_at: float  # time.monotonic()
    version: int | None  # the stamp read before loading; None: it could not be read
    registry: Registry


class _Copy:
    """This process's registry snapshot, and when it last warned of a stamp it could not read."""

    def __init__(self) -> None:
        self.lock = threading.Lock()  # one load at a time
        self.snapshot: _Snapshot | None = None
        self.warned_at = -STAMP_WARNING_SECONDS


STAMP_WARNING_SECONDS = 10.0
local = _Copy()


def registry() -> Registry:
    """This process's registry, read again when the shared stamp moved or REGISTRY_TTL_SECONDS
    passed. The stamp is the one the request read with its counters (`note_stamps`), else it is
    read here (one round trip: Celery tasks, the console). Either way it was read before the
    database, so a change committed while loading moves the stamp past the version the load is
    tagged with, and is read on the next call."""
    noted = _noted.get()
    if noted is not None and time.monotonic() - noted[0] < NOTED_STAMPS_SECONDS:
        stamps = noted[1]
        pinned = _pinned.get()
    else:
        stamps, pinned = read_stamps(), None
    version = stamps[0] if stamps is not None else None
    promised = pinned is not None and pinned.version == version
    snapshot = pinned if promised else local.snapshot
    if not promised and not _fresh(snapshot, version):
        with local.lock:
            snapshot = local.snapshot
            if not _fresh(snapshot, version):
                snapshot = local.snapshot = _Snapshot(time.monotonic(), version, load())
    reg = snapshot.registry
    cooldown.sync(stamps[1] if stamps is not None else None, reg.server_ids)
    return reg


def registry_current() -> bool:
    """Whether `registry()` would answer from this process's copy, reading neither the database
    nor Redis: the request noted the stamps (`note_stamps`) and the copy and the cooldowns are of
    those stamps. An endpoint's step may then run in the event loop (accounts/endpoints.py)."""
    noted = _noted.get()
    if noted is None or time.monotonic() - noted[0] >= NOTED_STAMPS_SECONDS:
        return False
    snapshot = local.snapshot
    if _fresh(snapshot, noted[1][0]) and cooldown.current(noted[1][1]):
        _pinned.set(snapshot)  # what this request's `registry()` answers from (its step runs in the loop)
        return True
    return False


def _fresh(snapshot: _Snapshot | None, version: int | None) -> bool:
    if snapshot is None or time.monotonic() - snapshot.loaded_at >= settings.REGISTRY_TTL_SECONDS:
        return False
    return version is None or version == snapshot.version


def read_stamps() -> tuple[int, int] | None:
    """(registry, cooldowns) version stamps, in one round trip; None when they cannot be read
    (the registry then lives by its TTL alone, and the cooldowns as this process knows them)."""
    from gateway.state import backend

    try:
        values = backend.current.read([REGISTRY_STAMP_KEY, cooldown.STAMP_KEY])
        return int(values[0] or 0), int(values[1] or 0)
    except cooldown.redis_errors() as exc:
        if time.monotonic() - local.warned_at > STAMP_WARNING_SECONDS:  # once in a while, not per call
            local.warned_at = time.monotonic()
            logger.warning("the registry's version stamp could not be read (the registry lives by its TTL "
                           "meanwhile): %s", exc)
        return None


def loaded_server_keys() -> tuple[str, ...]:
    """The model servers' keys of the registry this process has loaded; no I/O (a log filter
    calls it through gateway/telemetry/redact.py's secret sources)."""
    snapshot = local.snapshot
    return snapshot.registry.server_keys if snapshot is not None else ()


def registry_invalidate(**_kwargs) -> None:
    """Forget this process's registry (it is read again on the next call). Other processes
    learn of a change through `registry_changed`."""
    local.snapshot = None
    cooldown.reread()


per_process.register("model-registry", reset=registry_invalidate)


def registry_changed(**_kwargs) -> None:
    """A change to what the registry holds: this process reads it again at once, every other
    process on its next call, once the change is committed (the stamp moves then; a process that
    read the registry before the commit is tagged with the old stamp)."""
    registry_invalidate()
    transaction.on_commit(_bump_stamp, robust=True)


def _bump_stamp() -> None:
    from gateway.state.counters import version_bump

    try:
        version_bump([REGISTRY_STAMP_KEY])
    except cooldown.redis_errors() as exc:
        logger.warning("the registry's version stamp could not be moved (other processes see the change "
                       "within REGISTRY_TTL_SECONDS): %s", exc)


def load() -> Registry:
    """The registry as the database holds it now: enabled servers and their enabled models."""
    servers = {s.id: server_of(s) for s in ModelServer.objects.filter(enabled=True)}
    fallbacks: dict[int, list[int]] = {}
    for link in ModelFallback.objects.order_by("position", "id"):
        fallbacks.setdefault(link.model_id, []).append(link.fallback_id)
    by_id, default_id = {}, None
    for m in Model.objects.filter(enabled=True, server_id__in=servers.keys()).order_by("server__name", "name"):
        server = servers[m.server_id]
        caps = frozenset(c for c in CAPABILITIES if getattr(m, f"supports_{c}"))
        by_id[m.id] = Target(m.id, f"{server.name}/{m.name}", m.name, server, caps, tuple(fallbacks.get(m.id, ())),
                             int(m.created_at.timestamp()), _price(m), m.publisher)
        if m.is_default:
            default_id = m.id
    by_name: dict[str, Target] = {}
    for target in by_id.values():
        by_name.setdefault(target.name, target)
    group_models: dict[int, set[int]] = {}
    for group_id, model_id in Model.groups.through.objects.values_list("accountgroup_id", "model_id"):
        group_models.setdefault(group_id, set()).add(model_id)
    pools = _pools(by_id, by_name)
    group_aliases: dict[int, set[int]] = {}
    for group_id, alias_id in Alias.groups.through.objects.values_list("accountgroup_id", "alias_id"):
        group_aliases.setdefault(group_id, set()).add(alias_id)
    return Registry(
        by_id=by_id,
        by_public_id={t.public_id: t for t in by_id.values()},
        by_name=by_name,
        server_names=frozenset(s.name for s in servers.values()),
        server_ids=frozenset(servers),
        default_id=default_id,
        group_models={g: frozenset(ids) for g, ids in group_models.items()},
        pools=pools,
        group_aliases={g: frozenset(ids) for g, ids in group_aliases.items()},
    )


def _price(row) -> Price:
    return price_of(input_price=row.input_price, cached_input_price=row.cached_input_price,
                    output_price=row.output_price, cache_write_price=row.cache_write_price,
                    batch_discount_percent=row.batch_discount_percent)


def _priced_through(target: Target, deployment: AliasDeployment) -> Target:
    """The target as an alias deployment reaches it: with the deployment's own prices and batch discount
    where it has them (each left empty is the model's). The same model by every other way keeps its own."""
    own = _price(deployment)  # without a discount of its own, the default's: `through` takes the model's
    if own == NO_PRICE and deployment.batch_discount_percent is None:
        return target
    return dataclasses.replace(target, price=target.price.through(own, deployment.batch_discount_percent))


def _pools(by_id: dict[int, Target], by_name: dict[str, Target]) -> dict[str, Pool]:
    """The implicit pools (a bare name on several enabled servers), then the enabled aliases with at
    least one enabled deployment, each over its implicit pool of the same name. An alias's name is
    added to `by_name` (its first deployment) where no model has it."""
    holders: dict[str, list[Target]] = {}
    for target in by_id.values():  # by server name
        holders.setdefault(target.name, []).append(target)
    pools = {
        name: Pool(name, tuple(Deployment(t, 1) for t in targets), created=min(t.created for t in targets))
        for name, targets in holders.items() if len(targets) > 1
    }
    deployments: dict[int, list[Deployment]] = {}
    rows = AliasDeployment.objects.filter(alias__enabled=True).order_by("id")
    for row in rows:
        if (target := by_id.get(row.model_id)) is not None:
            deployments.setdefault(row.alias_id, []).append(Deployment(_priced_through(target, row), row.weight))
    fallbacks: dict[int, list[int]] = {}
    for alias_id, model_id in AliasFallback.objects.order_by("position", "id").values_list("alias_id", "fallback_id"):
        fallbacks.setdefault(alias_id, []).append(model_id)
    for alias in Alias.objects.filter(enabled=True, pk__in=deployments.keys()):
        found = tuple(deployments[alias.pk])
        pools[alias.name] = Pool(alias.name, found, alias.policy, alias.affinity, alias.pk,
                                 tuple(fallbacks.get(alias.pk, ())), int(alias.created_at.timestamp()))
        by_name.setdefault(alias.name, found[0].target)
    return pools
