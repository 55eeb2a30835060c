"""Model discovery: ask every enabled model server which models it serves and bring the registry
in line (docs/design.md, "Profiles"; docs/decisions/0034-model-discovery.md).

- OpenAI-compatible servers: `GET {base_url}/models`. When that answers anything but a model
  list (an older Ollama answers 404), `GET {root}/api/tags`, Ollama's own listing, where `root`
  is the base URL without its trailing `/v1`. A server that cannot be reached at all is not asked
  twice. A base URL without `/v1` that answers /api/tags is an Ollama's root, where chat calls
  would get 404: a failure that says to add /v1, not a listing that would make the server look healthy.
- Anthropic servers: `GET {base_url}/v1/models`, every page.
- AWS Bedrock servers: `GET /foundation-models` and `GET /inference-profiles` of the region's control
  plane (the runtime's address with `bedrock-runtime` made `bedrock`), signed as the model calls are
  (gateway/registry/aws_auth.py) or with the server's Bedrock API key.
- Gemini API servers: `GET /v1beta/models`, every page: the models that generate or embed content.
- Google Vertex AI servers: `GET /v1beta1/publishers/google/models` (Model Garden's Google models), every
  page, with the access token the calls use (gateway/registry/google_auth.py): Gemini and the embedding
  models. Other publishers' models (Claude) are added by name.

A name the server lists that the registry lacks becomes a `Model` row (chat, unless its name says
embeddings or audio: `capabilities_for`). A row the server no longer lists gets `unlisted_since`
and nothing else changes: it stays enabled, keeps its capabilities, fallbacks, default flag,
group grants and profiles, and is cleared when the server lists it again. A server that fails
keeps its rows as they are; its failure is stored in `discovery_error` and reported. Either way the
server's health (gateway/registry/server_health.py) notes it: a listing is its last success, a failure
its last failure (as a refusal: it does not make calls avoid the server). One
failing server never stops the others: they are asked side by side, each in a thread of its own.
"""

from __future__ import annotations

import logging
import re
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlencode

import httpx
from django.conf import settings
from django.db import transaction
from django.utils import timezone

from gateway.models import Model, ModelServer
from gateway.registry import aws_auth, google_auth, server_health
from gateway.registry.default_model import choose_default
from gateway.registry.snapshot import registry_changed, server_of

logger = logging.getLogger(__name__)

ANTHROPIC_VERSION = "2023-06-01"
MAX_PAGES = 20  # Anthropic listings: pages of up to 1000 models
MAX_WORKERS = 8

_EMBEDDING_NAME = re.compile(r"embed|(^|[^a-z0-9])(bge|e5|gte|minilm)([^a-z]|$)", re.IGNORECASE)
_AUDIO_NAME = re.compile(r"whisper|transcribe|(^|[^a-z0-9])tts([^a-z]|$)", re.IGNORECASE)


class DiscoveryFailed(Exception):
    """A server that could not list its models. The message is ours: a provider's own error text
    can quote the key it refused, so it is never passed on."""


@dataclass(frozen=True)
class Found:
    name: str
    embeddings_family: bool = False  # Ollama says the model is a BERT-family encoder


@dataclass
class ServerReport:
    server: str
    models: int | None = None  # how many the server listed; None when it failed
    added: list[str] = field(default_factory=list)
    unlisted: list[str] = field(default_factory=list)
    relisted: list[str] = field(default_factory=list)
    error: str | None = None
    default_chosen: str | None = None  # the model made the default, there being none (default_model.py)
    note: str | None = None  # a kind that lists nothing: what to do instead


    def as_dict(self) -> dict[str, Any]:
        return {"server": self.server, "models": self.models, "added": len(self.added),
                "unlisted": len(self.unlisted), "error": self.error}

    def summary(self) -> str:
        if self.note:
            return f"{self.server}: {self.note}"
        if self.error:
            return f"{self.server}: {self.error}"
        return (f"{self.server}: {self.models} model(s) listed, {len(self.added)} added, "
                f"{len(self.unlisted)} no longer listed, {len(self.relisted)} listed again.")


def capabilities_for(found: Found) -> dict[str, bool]:
    """A guess from the name the operator can correct in the admin: embedding models by name
    (`embed`, bge, e5, gte, MiniLM) or Ollama family (BERT), audio models (whisper, tts,
    transcribe), chat for everything else."""
    if found.embeddings_family or _EMBEDDING_NAME.search(found.name):
        return {"supports_chat": False, "supports_embeddings": True, "supports_audio": False}
    if _AUDIO_NAME.search(found.name):
        return {"supports_chat": False, "supports_embeddings": False, "supports_audio": True}
    return {"supports_chat": True, "supports_embeddings": False, "supports_audio": False}


def discover_models(*, servers=None) -> list[ServerReport]:
    """Ask `servers` (default: every enabled one) for their models and update the registry.
    One report per server, in the servers' order."""
    every = list(servers if servers is not None else ModelServer.objects.filter(enabled=True))
    rows = [row for row in every if row.kind in LISTINGS]
    if not rows:
        return [_unlisting(row) for row in every]
    with ThreadPoolExecutor(max_workers=min(MAX_WORKERS, len(rows)), thread_name_prefix="discovery") as pool:
        outcomes = dict(zip((row.pk for row in rows), pool.map(_listing_or_error, rows)))
    try:
        return [_apply(row, *outcomes[row.pk]) if row.pk in outcomes else _unlisting(row) for row in every]
    finally:
        registry_changed()


def _unlisting(row: ModelServer) -> ServerReport:
    return ServerReport(row.name, note=f"{row.get_kind_display()} does not list the models it serves: add them by "
                                       "name (a deployment's name on Azure OpenAI).")


def _listing_or_error(server: ModelServer) -> tuple[list[Found] | None, str | None]:
    try:
        return server_listing(server), None
    except DiscoveryFailed as exc:
        return None, str(exc)
    except Exception:  # one server's surprise must not cost the others their refresh
        logger.exception("model discovery failed on server %s", server.name)
        return None, "The model server's listing could not be read."


def server_listing(server: ModelServer) -> list[Found]:
    """The models `server` lists now (raises DiscoveryFailed)."""
    timeout = httpx.Timeout(connect=server.connect_timeout,
                            read=min(server.read_timeout, settings.DISCOVERY_TIMEOUT_SECONDS), write=10.0, pool=10.0)
    with httpx.Client(timeout=timeout, follow_redirects=False) as client:
        return LISTINGS[server.kind](client, server)


def _keyed(server: ModelServer) -> None:
    if server.is_remote and not server.api_key:
        raise DiscoveryFailed("No API key is configured for this server.")


def _openai_listing(client: httpx.Client, server: ModelServer) -> list[Found]:
    _keyed(server)
    base = server.base_url.rstrip("/")
    headers = {"Authorization": f"Bearer {server.api_key}"} if server.api_key else {}
    response = _get(client, f"{base}/models", headers)
    found = _openai_names(response) if response.status_code == 200 else None
    if found is not None:
        return found
    first = _refusal("/models", response)
    root = base[: -len("/v1")] if base.endswith("/v1") else base
    try:
        tags = _get(client, f"{root}/api/tags", headers)
    except DiscoveryFailed as exc:
        raise DiscoveryFailed(f"{first}; /api/tags: {exc}") from None
    found = _ollama_names(tags) if tags.status_code == 200 else None
    if found is None:
        raise DiscoveryFailed(f"{first}; {_refusal('/api/tags', tags)}.")
    if root == base:  # Ollama's own root, where no OpenAI-compatible call is answered
        raise DiscoveryFailed(f"{first}, but this address answers Ollama's /api/tags: it is the root of an Ollama "
                              "server, whose OpenAI-compatible API (where chat calls go) is under /v1. Add /v1 to "
                              "the base URL.")
    return found


def _anthropic_listing(client: httpx.Client, server: ModelServer) -> list[Found]:
    _keyed(server)
    base = server.base_url.rstrip("/")
    headers = {"anthropic-version": ANTHROPIC_VERSION}
    if server.api_key:
        headers["x-api-key"] = server.api_key
    found: list[Found] = []
    params: dict[str, Any] = {"limit": 1000}
    for _page in range(MAX_PAGES):
        response = _get(client, f"{base}/v1/models", headers, params=params)
        data = _json(response) if response.status_code == 200 else None
        page = _names(data.get("data")) if isinstance(data, dict) else None
        if page is None:
            raise DiscoveryFailed(f"{_refusal('/v1/models', response)}.")
        found.extend(page)
        if not (data.get("has_more") and isinstance(data.get("last_id"), str)):
            break
        params = {"limit": 1000, "after_id": data["last_id"]}
    return _unique(found)


def _bedrock_listing(client: httpx.Client, server: ModelServer) -> list[Found]:
    """Bedrock's control plane (`bedrock.<region>`, beside the runtime's `bedrock-runtime.<region>`): the
    foundation models callable on demand by their id, text and embedding ones (embeddings only for the
    latter), then the inference profiles (the cross-region ids newer models are called by), every page."""
    base = bedrock_control_plane(server.base_url)
    found: list[Found] = []
    for path, items_key, id_key in (("/foundation-models", "modelSummaries", "modelId"),
                                    ("/inference-profiles", "inferenceProfileSummaries", "inferenceProfileId")):
        token = None
        for _page in range(MAX_PAGES):
            query = urlencode({"maxResults": 1000, "nextToken": token} if token else {})
            url = f"{base}{path}" + (f"?{query}" if query else "")
            response = _get(client, url, _bedrock_auth(server, url))
            data = _json(response) if response.status_code == 200 else None
            items = data.get(items_key) if isinstance(data, dict) else None
            if not isinstance(items, list):
                raise DiscoveryFailed(f"{_refusal(path, response)}.")
            found += [item for item in (_bedrock_model(i, id_key) for i in items) if item is not None]
            token = data.get("nextToken")
            if not (isinstance(token, str) and token):
                break
    return _unique(found)


def bedrock_control_plane(base_url: str) -> str:
    """The control plane's address of a runtime's: `bedrock-runtime.<region>` becomes `bedrock.<region>`; any
    other address (a fake, a proxy of one's own) serves both."""
    return base_url.rstrip("/").replace("bedrock-runtime", "bedrock", 1)


def _bedrock_auth(server: ModelServer, url: str) -> dict[str, str]:
    """A Bedrock API key as a bearer token, else the SigV4 signature of a GET of `url` (sent as signed)."""
    if server.api_key:
        return {"Authorization": f"Bearer {server.api_key}"}
    cloud = server_of(server).cloud
    credentials = aws_auth.frozen(cloud)
    if credentials is None:
        raise DiscoveryFailed("No AWS credentials: give the server an access key or a Bedrock API key, or give the "
                              "gateway's processes AWS credentials.")
    return aws_auth.signed_headers(credentials, service="bedrock", region=cloud.region, method="GET", url=url,
                                   headers={}, body=b"")


def _bedrock_model(item: Any, id_key: str) -> Found | None:
    if not isinstance(item, dict) or not _valid_name(item.get(id_key)):
        return None
    if id_key == "inferenceProfileId":
        return Found(item[id_key].strip()) if item.get("status", "ACTIVE") == "ACTIVE" else None
    outputs = item.get("outputModalities") or ["TEXT"]
    inference = item.get("inferenceTypesSupported") or ["ON_DEMAND"]
    if "ON_DEMAND" not in inference or not ({"TEXT", "EMBEDDING"} & set(outputs)):
        return None  # provisioned throughput or a profile only; image and video generation
    return Found(item[id_key].strip(), embeddings_family="EMBEDDING" in outputs)


def _google_listing(client: httpx.Client, server: ModelServer) -> list[Found]:
    """Google's pages of models (`nextPageToken`): the Gemini API's with its key, Vertex AI's Google models with
    the server's access token."""
    base = re.sub(r"/v1(beta1?)?$", "", server.base_url.rstrip("/"))
    if server.kind == ModelServer.Kind.GEMINI:
        _keyed(server)
        path, items_key, headers = "/v1beta/models", "models", {"x-goog-api-key": server.api_key}
    else:
        try:
            token = google_auth.token_now(server_of(server))
        except google_auth.TokenFailed as exc:
            raise DiscoveryFailed(str(exc)) from None
        path, items_key, headers = "/v1beta1/publishers/google/models", "publisherModels", {
            "Authorization": f"Bearer {token}"}
    found: list[Found] = []
    token = None
    for _page in range(MAX_PAGES):
        response = _get(client, f"{base}{path}", headers, params={"pageSize": 1000, **({"pageToken": token}
                                                                                         if token else {})})
        data = _json(response) if response.status_code == 200 else None
        items = data.get(items_key) if isinstance(data, dict) else None
        if not isinstance(items, list):
            raise DiscoveryFailed(f"{_refusal(path, response)}.")
        found += [item for item in (_google_model(i) for i in items) if item is not None]
        token = data.get("nextPageToken")
        if not (isinstance(token, str) and token):
            break
    return _unique(found)


def _google_model(item: Any) -> Found | None:
    """A Gemini API model that generates or embeds content (`models/` left out of its name), or a Vertex AI
    Google model that does (by its name: Gemini and the embedding models; `publishers/google/models/` left out)."""
    name = item.get("name") if isinstance(item, dict) else None
    if not isinstance(name, str):
        return None
    name = name.rpartition("/")[2]
    methods = item.get("supportedGenerationMethods")
    if isinstance(methods, list):
        serves = {"generateContent", "embedContent"} & set(methods)
        embeds = serves == {"embedContent"}
    else:
        embeds = "embedding" in name
        serves = name.startswith("gemini-") or embeds
    return Found(name.strip(), embeddings_family=embeds) if serves and _valid_name(name) else None


# each kind's listing (a kind without one is never asked: the console says to add its models by name)
LISTINGS = {ModelServer.Kind.OPENAI: _openai_listing, ModelServer.Kind.ANTHROPIC: _anthropic_listing,
            ModelServer.Kind.BEDROCK: _bedrock_listing, ModelServer.Kind.GEMINI: _google_listing,
            ModelServer.Kind.VERTEX: _google_listing}


def _get(client: httpx.Client, url: str, headers: dict[str, str], **kwargs: Any) -> httpx.Response:
    try:
        return client.get(url, headers=headers, **kwargs)
    except httpx.TimeoutException:
        raise DiscoveryFailed("The model server did not answer in time.") from None
    except httpx.HTTPError:
        raise DiscoveryFailed("The model server could not be reached.") from None


def _refusal(path: str, response: httpx.Response) -> str:
    if response.status_code == 200:
        return f"GET {path} answered without a model list"
    return f"GET {path} answered {response.status_code}"


def _json(response: httpx.Response) -> Any:
    try:
        return response.json()
    except ValueError:
        return None


def _openai_names(response: httpx.Response) -> list[Found] | None:
    """`{"data": [{"id": ...}]}` (llama.cpp also sends `models`; `data` is the standard part)."""
    data = _json(response)
    return _names(data.get("data")) if isinstance(data, dict) else None


def _ollama_names(response: httpx.Response) -> list[Found] | None:
    data = _json(response)
    items = data.get("models") if isinstance(data, dict) else None
    if not isinstance(items, list):
        return None
    found = []
    for item in items:
        if not isinstance(item, dict):
            continue
        name = item.get("model") or item.get("name")
        details = item.get("details") if isinstance(item.get("details"), dict) else {}
        families = [f for f in (details.get("families") or [details.get("family")]) if isinstance(f, str)]
        if _valid_name(name):
            found.append(Found(name.strip(), embeddings_family=any(f.lower().endswith("bert") for f in families)))
    return _unique(found)


def _names(items: Any) -> list[Found] | None:
    if not isinstance(items, list):
        return None
    return _unique([Found(i["id"].strip()) for i in items if isinstance(i, dict) and _valid_name(i.get("id"))])


def _valid_name(name: Any) -> bool:
    max_length = Model._meta.get_field("name").max_length
    return isinstance(name, str) and 0 < len(name.strip()) <= max_length


def _unique(found: list[Found]) -> list[Found]:
    seen: dict[str, Found] = {}
    for item in found:
        seen.setdefault(item.name, item)
    return list(seen.values())


def _apply(server: ModelServer, found: list[Found] | None, error: str | None) -> ServerReport:
    """Write what one server said: new rows, unlisted marks, its discovery status."""
    now = timezone.now()
    report = ServerReport(server=server.name)
    with transaction.atomic():
        if found is None:
            report.error = (error or "The model server could not list its models.")[:300]
            ModelServer.objects.filter(pk=server.pk).update(discovered_at=now, discovery_error=report.error)
            _choose_default(server, report)  # models the operator added by hand on the server's page
            server_health.probed(server, cause=f"model discovery: {report.error}", refusal=True)  # not `failing`
            return report
        report.models = len(found)
        listed = {item.name for item in found}
        existing = {m.name: m for m in Model.objects.filter(server_id=server.pk)}
        new = [Model(server_id=server.pk, name=item.name, **capabilities_for(item))
               for item in found if item.name not in existing]
        Model.objects.bulk_create(new, ignore_conflicts=True)  # a refresh running alongside may add them too
        report.added = [m.name for m in new]
        gone = [m for name, m in existing.items() if name not in listed and m.unlisted_since is None]
        back = [m for name, m in existing.items() if name in listed and m.unlisted_since is not None]
        Model.objects.filter(id__in=[m.id for m in gone]).update(unlisted_since=now)
        Model.objects.filter(id__in=[m.id for m in back]).update(unlisted_since=None)
        report.unlisted = sorted(m.name for m in gone)
        report.relisted = sorted(m.name for m in back)
        ModelServer.objects.filter(pk=server.pk).update(discovered_at=now, discovery_error="")
        _choose_default(server, report)
    server_health.probed(server)  # it answered: its health says so at once, not "never seen"
    return report


def _choose_default(server: ModelServer, report: ServerReport) -> None:
    """With no default model yet, the first of this server's listed chat models becomes it."""
    chosen = choose_default(Model.objects.filter(server_id=server.pk, unlisted_since__isnull=True))
    report.default_chosen = chosen.public_id if chosen else None
