"""What a cached reply is found by: the request's `Cache-Control` (`cache_control`), the model part
of the key (`key_model`) and the key itself (`cache_key`). docs/decisions/0109-response-cache.md."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any

from gateway.registry.snapshot import Target

# Top-level request fields that do not change the reply: how it is delivered (stream, stream_options),
# who asked (user, metadata), and the model, which the key holds as `key_model` resolves it.
IGNORED_FIELDS = frozenset({"stream", "stream_options", "user", "metadata", "model"})


@dataclass(frozen=True)
class Wanted:
    """What the request lets the cache do: `read` a kept reply, `write` the one it gets."""

    read: bool = True
    write: bool = True


def cache_control(header: str | None) -> Wanted:
    """`no-cache` skips the read (a fresh reply, which is kept), `no-store` the write (a kept reply
    may still answer). Other directives mean nothing to the cache; names are case-insensitive."""
    if not header:
        return Wanted()
    directives = {part.split("=", 1)[0].strip().lower() for part in header.split(",")}
    return Wanted(read="no-cache" not in directives, write="no-store" not in directives)


def key_model(requested: Any, chain: list[Target]) -> str:
    """The model the client asked for, once a pinned `server/model` and a bare name are told apart:
    a pinned model (or none named, which the default answers) is its public id; a bare name stays
    itself, since any server holding it (a pool) or an alias over several may answer it, and the
    chain's first model can differ from call to call."""
    first = chain[0]
    if not isinstance(requested, str) or not requested or requested == first.public_id:
        return f"id:{first.public_id}"
    return f"name:{requested}"


def cache_key(*, group_id: int, surface: str, model: str, body: dict[str, Any],
              extra: dict[str, Any] | None = None) -> str:
    """`rc:<group>:<sha256>` of the surface, the model and the body without IGNORED_FIELDS (JSON with
    sorted keys, ASCII only, no spaces: one text per request whatever its key order). `extra`: what
    else reaches the model server and may change its reply (a passed-through request's beta headers
    and query string). The group is in the key's name, so no reply crosses groups."""
    material = {"surface": surface, "model": model,
                "body": {name: value for name, value in body.items() if name not in IGNORED_FIELDS}}
    if extra:
        material["extra"] = extra
    text = json.dumps(material, sort_keys=True, separators=(",", ":"))
    return f"rc:{group_id}:{hashlib.sha256(text.encode()).hexdigest()}"
