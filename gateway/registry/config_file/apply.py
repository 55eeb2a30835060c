"""The operator's configuration file (`manage.py applyconfig FILE`, docs/configuration.md): model
servers and their models (with their prices), fallbacks, the default model, aliases and account groups
(with their token quotas, budgets and guardrails), in one YAML file.

Applying is idempotent and all-or-nothing: the whole file is checked and written in one
transaction, and any error names its place in the file (`servers[1].models[0].fallbacks[0]`)
and writes nothing. Objects are matched by name. For an object the file names, the file is
authoritative: a field it leaves out takes its default (a group without `allowed_models` or
`allowed_aliases` may use every model; a model without `fallbacks` has none, a group without `guardrails` has
none) — except a server's API key, which is kept when the file gives neither `api_key` nor `api_key_env`, and a
guardrails webhook's secret, kept for its url when the item gives neither `secret` nor `secret_env` (`guardrails`).
Objects the file does not name are left alone: applying never deletes anything.

Account groups belong to the accounts app; their model is looked up through the app registry so
that gateway/ still imports no app above it.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field

from django.apps import apps
from django.core.exceptions import ValidationError
from django.db import transaction

from gateway.models import (
    GEMINI_ENDPOINT,
    Model,
    ModelFallback,
    ModelServer,
    bedrock_endpoint,
    validate_region,
    vertex_endpoint,
)
from gateway.registry.config_file.aliases import apply_aliases, group_aliases
from gateway.registry.config_file.checks import (
    BATCH_DISCOUNT,
    PRICE_KEYS,
    ConfigError,
    KnownModels,
    Tally,
    boolean,
    budget,
    choice,
    default_of,
    from_env,
    list_of,
    mapping,
    names_once,
    percent,
    price,
    read_yaml,
    save,
    seconds,
    string,
    whole,
)
from gateway.registry.config_file.guardrails import read_guardrails
from gateway.registry.default_model import choose_default

TOP_KEYS = ("servers", "default_model", "aliases", "groups")
SERVER_KEYS = ("name", "kind", "base_url", "api_key", "api_key_env", "is_remote", "enabled", "connect_timeout",
               "read_timeout", "drop_unsupported_fields", "structured_output", "models", "region",
               "aws_access_key_id_env", "aws_secret_access_key_env", "aws_session_token_env", "anthropic_betas",
               "api_version", "azure_tenant_id", "azure_client_id", "azure_client_secret_env", "azure_authority_host",
               "project", "credentials_file", "forward_batches", "batch_s3_uri", "batch_role_arn",
               "batch_s3_endpoint_url", "batch_gcs_uri")
# a cloud's settings (the clouds only): plain ones, and secrets read from the environment variable the file names
CLOUD_KEYS = ("region", "api_version", "azure_tenant_id", "azure_client_id", "azure_authority_host")
CLOUD_SECRETS = ("aws_access_key_id", "aws_secret_access_key", "aws_session_token", "azure_client_secret")
CLOUDS = (ModelServer.Kind.BEDROCK, ModelServer.Kind.AZURE, ModelServer.Kind.VERTEX, ModelServer.Kind.GEMINI)
# the clouds serving Claude, whose `anthropic_betas` replace their own list of the betas carried
CLAUDE_CLOUDS = (ModelServer.Kind.BEDROCK, ModelServer.Kind.VERTEX)
# Google Vertex AI's own (file key -> field): its project, the service account's key file, and the Cloud Storage
# location of the batches forwarded there
VERTEX_KEYS = {"project": "gcp_project", "credentials_file": "gcp_credentials_file", "batch_gcs_uri": "batch_gcs_uri"}
# AWS Bedrock's batch inference: the S3 location its jobs use, the role they run as, the S3 endpoint
BEDROCK_BATCH_KEYS = ("batch_s3_uri", "batch_role_arn", "batch_s3_endpoint_url")
# where a server's address comes from its region when the file gives none
REGIONAL = {ModelServer.Kind.BEDROCK: bedrock_endpoint, ModelServer.Kind.VERTEX: vertex_endpoint}
MIN_CONTEXT_WINDOW = 256  # as the admin allows (gateway.models.Model.context_window)
MODEL_KEYS = ("name", "chat", "embeddings", "audio", "enabled", "context_window", *PRICE_KEYS, BATCH_DISCOUNT,
              "fallbacks", "publisher")
BUDGET_KEYS = ("daily_budget", "weekly_budget", "monthly_budget")  # settings.CURRENCY; -1 = none
GROUP_KEYS = ("name", "api_access", "allowed_models", "allowed_aliases", "daily_tokens", "weekly_tokens",
              "monthly_tokens", *BUDGET_KEYS, "remote_servers_allowed", "attachments_per_message",
              "response_cache_ttl", "guardrails", "file_storage_bytes")

# file key → model field, where they differ
MODEL_FIELDS = {"chat": "supports_chat", "embeddings": "supports_embeddings", "audio": "supports_audio"}


AUTOMATIC = "chosen automatically"


@dataclass
class Summary:
    servers: Tally = field(default_factory=Tally)
    models: Tally = field(default_factory=Tally)
    aliases: Tally | None = None  # set when the file has an `aliases` section
    groups: Tally = field(default_factory=Tally)
    # (public id, "set", "unchanged" or "chosen automatically": the file named none and there was none)
    default_model: tuple[str, str] | None = None

    @property
    def changed(self) -> bool:
        if self.default_model and self.default_model[1] in ("set", AUTOMATIC):
            return True
        return any(t.created or t.updated for t in (self.servers, self.models, self.aliases, self.groups) if t)

    def lines(self) -> list[str]:
        lines = [f"servers: {self.servers}", f"models: {self.models}"]
        if self.aliases is not None:
            lines.append(f"aliases: {self.aliases}")
        lines.append(f"groups: {self.groups}")
        if self.default_model:
            lines.append(f"default model: {self.default_model[0]} ({self.default_model[1]})")
        return lines


def read_config(path: str) -> dict:
    """The file's content as a mapping; an empty file is an empty mapping."""
    return read_yaml(path, TOP_KEYS)


def _apply_server(entry, where: str, environ: Mapping[str, str], summary: Summary) -> list[tuple]:
    """Writes one server and its models; returns (model row, its entry, its place) for the fallbacks."""
    entry = mapping(entry, where, SERVER_KEYS)
    if "name" not in entry:
        raise ConfigError(where, "a server needs a name")
    name = string(entry["name"], f"{where}.name")
    kind = choice(entry.get("kind", default_of(ModelServer, "kind")), f"{where}.kind", ModelServer.Kind.values, "kind")
    cloud = _cloud_settings(entry, kind, where, environ)
    if "base_url" in entry:
        cloud["base_url"] = string(entry["base_url"], f"{where}.base_url")
    elif kind in REGIONAL and cloud.get("region"):
        try:
            validate_region(cloud["region"])
        except ValidationError as exc:
            raise ConfigError(f"{where}.region", " ".join(exc.messages)) from None
        cloud["base_url"] = REGIONAL[kind](cloud["region"])
    elif kind == ModelServer.Kind.GEMINI:
        cloud["base_url"] = GEMINI_ENDPOINT
    else:
        raise ConfigError(where, "a server needs a base_url" + (" (or, on AWS Bedrock or Google Vertex AI, a region)"
                                                                if kind in REGIONAL else ""))
    wanted = {
        "kind": kind,
        **cloud,
        "is_remote": kind in CLOUDS or boolean(entry.get("is_remote", default_of(ModelServer, "is_remote")),
                                               f"{where}.is_remote"),
        "enabled": boolean(entry.get("enabled", default_of(ModelServer, "enabled")), f"{where}.enabled"),
        "drop_unsupported_fields": boolean(entry.get("drop_unsupported_fields",
                                                   default_of(ModelServer, "drop_unsupported_fields")),
                                         f"{where}.drop_unsupported_fields"),
        # OpenAI's, Anthropic's and Vertex AI's batch APIs only (Vertex AI's with `batch_gcs_uri`): on another
        # kind, or without it, ModelServer.clean refuses it by its place
        "forward_batches": boolean(entry.get("forward_batches", default_of(ModelServer, "forward_batches")),
                                   f"{where}.forward_batches"),
    }
    structured = choice(entry.get("structured_output", default_of(ModelServer, "structured_output")),
                        f"{where}.structured_output", ModelServer.StructuredOutput.values, "structured_output")
    wanted["structured_output"] = structured
    for timeout in ("connect_timeout", "read_timeout"):
        wanted[timeout] = seconds(entry.get(timeout, default_of(ModelServer, timeout)), f"{where}.{timeout}")
    if "api_key" in entry and "api_key_env" in entry:
        raise ConfigError(f"{where}.api_key_env", "give api_key or api_key_env, not both")
    if "api_key" in entry:
        if not isinstance(entry["api_key"], str):
            raise ConfigError(f"{where}.api_key", "must be a string")
        wanted["api_key"] = entry["api_key"]
    elif "api_key_env" in entry:
        wanted["api_key"] = from_env(entry, "api_key_env", where, environ)

    server = ModelServer.objects.filter(name=name).first() or ModelServer(name=name)
    summary.servers.add(save(server, wanted, where, {**{name: f"{name}_env" for name in CLOUD_SECRETS},
                                                     **{v: k for k, v in VERTEX_KEYS.items()}}))

    written = []
    models = list_of(entry.get("models", []), f"{where}.models")
    names_once(models, f"{where}.models", "model")
    for i, model_entry in enumerate(models):
        place = f"{where}.models[{i}]"
        model_entry = mapping(model_entry, place, MODEL_KEYS)
        if "name" not in model_entry:
            raise ConfigError(place, "a model needs a name")
        model_name = string(model_entry["name"], f"{place}.name")
        wanted = {
            field_name: boolean(model_entry.get(key, default_of(Model, field_name)), f"{place}.{key}")
            for key, field_name in (*MODEL_FIELDS.items(), ("enabled", "enabled"))
        }
        wanted["context_window"] = whole(model_entry.get("context_window", default_of(Model, "context_window")),
                                        f"{place}.context_window", MIN_CONTEXT_WINDOW)
        for key in PRICE_KEYS:  # left out: no price
            wanted[key] = price(model_entry.get(key), f"{place}.{key}")
        wanted[BATCH_DISCOUNT] = percent(model_entry.get(BATCH_DISCOUNT, default_of(Model, BATCH_DISCOUNT)),
                                         f"{place}.{BATCH_DISCOUNT}")
        if "publisher" in model_entry and kind != ModelServer.Kind.VERTEX:
            raise ConfigError(f"{place}.publisher", f"only for a model of a server of kind {ModelServer.Kind.VERTEX}")
        wanted["publisher"] = (string(model_entry["publisher"], f"{place}.publisher") if "publisher" in model_entry
                               else "")
        model = Model.objects.filter(server=server, name=model_name).first() or Model(server=server, name=model_name)
        status = save(model, wanted, place, {v: k for k, v in MODEL_FIELDS.items()})
        written.append((model, model_entry, place, status))
    return written


def _cloud_settings(entry: dict, kind: str, where: str, environ: Mapping[str, str]) -> dict:
    """A cloud server's own fields. A secret the file leaves out is kept as stored (like `api_key`), and a
    cloud's key on another kind of server is an error, not silently ignored."""
    given = [key for key in (*CLOUD_KEYS, "anthropic_betas", *(f"{name}_env" for name in CLOUD_SECRETS))
             if key in entry]
    if given and kind not in CLOUDS:
        raise ConfigError(f"{where}.{given[0]}", f"only for a server of kind {' or '.join(CLOUDS)}")
    if "anthropic_betas" in entry and kind not in CLAUDE_CLOUDS:
        raise ConfigError(f"{where}.anthropic_betas", f"only for a server of kind {' or '.join(CLAUDE_CLOUDS)}")
    google = [key for key in VERTEX_KEYS if key in entry]
    if google and kind != ModelServer.Kind.VERTEX:
        raise ConfigError(f"{where}.{google[0]}", f"only for a server of kind {ModelServer.Kind.VERTEX}")
    bedrock = [key for key in BEDROCK_BATCH_KEYS if key in entry]
    if bedrock and kind != ModelServer.Kind.BEDROCK:
        raise ConfigError(f"{where}.{bedrock[0]}", f"only for a server of kind {ModelServer.Kind.BEDROCK}")
    if kind not in CLOUDS:
        return {}
    wanted = {key: string(entry[key], f"{where}.{key}") if key in entry else ""
              for key in (*CLOUD_KEYS, *BEDROCK_BATCH_KEYS)}
    wanted.update({name: string(entry[key], f"{where}.{key}") if key in entry else ""
                   for key, name in VERTEX_KEYS.items()})
    betas = [string(beta, f"{where}.anthropic_betas[{i}]")
             for i, beta in enumerate(list_of(entry.get("anthropic_betas", []), f"{where}.anthropic_betas"))]
    wanted["anthropic_betas"] = "\n".join(betas)
    for name in CLOUD_SECRETS:
        if f"{name}_env" in entry:
            wanted[name] = from_env(entry, f"{name}_env", where, environ)
    return wanted


def _apply_fallbacks(model: Model, entry: dict, where: str, known: KnownModels) -> bool:
    """Sets the model's ordered fallbacks; True when they changed."""
    wanted = []
    for i, model_id in enumerate(list_of(entry.get("fallbacks", []), f"{where}.fallbacks")):
        place = f"{where}.fallbacks[{i}]"
        target = known.get(model_id, place)
        if target.pk == model.pk:
            raise ConfigError(place, "a model cannot fall back to itself")
        if target.pk in wanted:
            raise ConfigError(place, f"{model_id} is listed twice")
        wanted.append(target.pk)
    current = list(ModelFallback.objects.filter(model=model).order_by("position", "id").values_list("fallback_id",
                                                                                                    flat=True))
    if current == wanted:
        return False
    for link in ModelFallback.objects.filter(model=model):
        link.delete()
    for position, fallback_id in enumerate(wanted):
        ModelFallback.objects.create(model=model, fallback_id=fallback_id, position=position)
    return True


def _apply_default(model_id, known: KnownModels) -> tuple[str, str]:
    model = known.get(model_id, "default_model")
    if model.is_default:
        return model.public_id, "unchanged"
    for previous in Model.objects.filter(is_default=True):  # saved one by one so the registry hears of it
        previous.is_default = False
        previous.save(update_fields=["is_default"])
    model.is_default = True
    model.save(update_fields=["is_default"])
    return model.public_id, "set"


def _apply_group(entry, where: str, known: KnownModels, environ: Mapping[str, str], summary: Summary) -> None:
    AccountGroup = apps.get_model("accounts", "AccountGroup")
    entry = mapping(entry, where, GROUP_KEYS)
    if "name" not in entry:
        raise ConfigError(where, "a group needs a name")
    name = string(entry["name"], f"{where}.name")
    wanted = {}
    for key in ("api_access", "remote_servers_allowed"):
        wanted[key] = boolean(entry.get(key, default_of(AccountGroup, key)), f"{where}.{key}")
    for key in ("daily_tokens", "weekly_tokens", "monthly_tokens", "file_storage_bytes"):
        wanted[key] = whole(entry.get(key, default_of(AccountGroup, key)), f"{where}.{key}", -1)
    for key in BUDGET_KEYS:
        wanted[key] = budget(entry.get(key, default_of(AccountGroup, key)), f"{where}.{key}")
    for key in ("attachments_per_message", "response_cache_ttl"):
        wanted[key] = whole(entry.get(key, default_of(AccountGroup, key)), f"{where}.{key}", 0)
    allowed: list[int] = []
    if "allowed_models" in entry:
        for i, model_id in enumerate(list_of(entry["allowed_models"], f"{where}.allowed_models")):
            model = known.get(model_id, f"{where}.allowed_models[{i}]")
            if model.pk not in allowed:
                allowed.append(model.pk)
    aliases = group_aliases(entry, where)
    wanted["all_models"] = "allowed_models" not in entry and "allowed_aliases" not in entry

    group = AccountGroup.objects.filter(name=name).first() or AccountGroup(name=name)
    # left out: none (the file is authoritative); a webhook's secret comes from `secret_env`, or is kept
    wanted["guardrails"] = read_guardrails(entry.get("guardrails", []), where, environ, group.guardrails or [])
    status = save(group, wanted, where, {"all_models": "allowed_models"})
    for field_name, ids in (("allowed_models", allowed), ("allowed_aliases", aliases)):
        related = getattr(group, field_name)
        if set(related.values_list("pk", flat=True)) != set(ids):
            related.set(ids)
            status = "updated" if status == "unchanged" else status
    summary.groups.add(status)


def apply_config(data: dict, *, environ: Mapping[str, str] | None = None, dry_run: bool = False) -> Summary:
    """Creates or updates what `data` (a file read by `read_config`) describes, in one transaction.
    Raises ConfigError, having written nothing, at the first mistake. With `dry_run` the
    transaction is rolled back: the summary tells what would change."""
    environ = os.environ if environ is None else environ
    data = mapping(data, "", TOP_KEYS)
    servers = list_of(data.get("servers", []), "servers")
    groups = list_of(data.get("groups", []), "groups")
    names_once(servers, "servers", "server")
    names_once(groups, "groups", "group")
    summary = Summary()
    known = KnownModels()
    with transaction.atomic():
        written = []
        for i, entry in enumerate(servers):
            written += _apply_server(entry, f"servers[{i}]", environ, summary)
        for model, entry, where, status in written:
            if _apply_fallbacks(model, entry, where, known) and status == "unchanged":
                status = "updated"
            summary.models.add(status)
        if "default_model" in data:
            summary.default_model = _apply_default(data["default_model"], known)
        else:
            chosen = choose_default([model for model, *_ in written])
            summary.default_model = (chosen.public_id, AUTOMATIC) if chosen else None
        if "aliases" in data:
            summary.aliases = apply_aliases(data["aliases"], known)
        for i, entry in enumerate(groups):
            _apply_group(entry, f"groups[{i}]", known, environ, summary)
        if dry_run:
            transaction.set_rollback(True)
    return summary


def apply_config_file(path: str, **options) -> Summary:
    return apply_config(read_config(path), **options)
