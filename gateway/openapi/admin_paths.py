"""Paths of the administration API (`/api/v1/admin/`, admin_api/): staff session tokens only, an API key
answered 401. Lists are `{data, next}` pages by cursor; writes take the fields named, and no other."""

from __future__ import annotations

from typing import Any

from gateway.openapi.components import (
    NULLABLE_STRING,
    NULLABLE_TIMESTAMP,
    SESSION,
    TIMESTAMP,
    id_param,
    json_response,
    obj,
    operation,
    ref,
)

ADMIN = ["admin"]
INT, BOOL, STR, NUM = {"type": "integer"}, {"type": "boolean"}, {"type": "string"}, {"type": "number"}
NULLABLE_INT = {"type": ["integer", "null"]}
IDS = {"type": "array", "items": {"type": "integer", "minimum": 0}}
# an amount as exact decimal text as it was written ("0.15", "-1"), or null; sent as a number or text
AMOUNT = {"type": ["string", "null"], "pattern": r"^-?\d+(\.\d+)?$"}
AMOUNT_IN = {"type": ["number", "string", "null"]}
COST = {"type": "string", "pattern": r"^\d+\.\d+$"}
BUDGETS = ("daily_budget", "weekly_budget", "monthly_budget")
PRICES = ("input_price", "cached_input_price", "output_price", "cache_write_price")
SECRETS = ("api_key", "aws_secret_access_key", "aws_session_token", "azure_client_secret")
KEY_RECORD = obj({"preview": STR, "created_at": TIMESTAMP, "expires_at": TIMESTAMP,
                  "last_used_at": NULLABLE_TIMESTAMP}, closed=True)

ACCOUNT_IN = {"email": STR, "full_name": STR, "group": INT, "role": {"enum": ["user", "admin"]}, "is_active": BOOL,
              "is_staff": BOOL, **dict.fromkeys(BUDGETS, AMOUNT_IN)}
GROUP_IN = {"name": STR, "api_access": BOOL, "all_models": BOOL, "allowed_models": IDS, "allowed_aliases": IDS,
            **dict.fromkeys(("daily_tokens", "weekly_tokens", "monthly_tokens"), NULLABLE_INT),
            **dict.fromkeys(BUDGETS, AMOUNT_IN), "remote_servers_allowed": BOOL, "attachments_per_message": INT,
            "response_cache_ttl": INT, "capture_calls": BOOL, "guardrails": {"type": "array"},
            "file_storage_bytes": NULLABLE_INT}
SERVER_TEXT = ("name", "kind", "base_url", "region", "aws_access_key_id", "anthropic_betas", "api_version",
               "azure_tenant_id", "azure_client_id", "azure_authority_host", "gcp_project", "gcp_credentials_file",
               "structured_output", "batch_s3_uri", "batch_role_arn", "batch_s3_endpoint_url", "batch_gcs_uri")
SERVER_OUT = {**dict.fromkeys(SERVER_TEXT, STR), "is_remote": BOOL, "enabled": BOOL, "connect_timeout": NUM,
              "read_timeout": NUM, "drop_unsupported_fields": BOOL, "forward_batches": BOOL}
MODEL_IN = {"server": INT, "name": STR, "publisher": STR, "supports_chat": BOOL, "supports_embeddings": BOOL,
            "supports_audio": BOOL, "enabled": BOOL, "is_default": BOOL, "context_window": INT,
            **dict.fromkeys(PRICES, AMOUNT_IN), "batch_discount_percent": INT, "fallbacks": IDS}

DEPLOYMENT = {"model": INT, "weight": INT, **dict.fromkeys(PRICES, AMOUNT), "batch_discount_percent": NULLABLE_INT}
ALIAS_IN = {"name": STR, "policy": {"enum": ["weighted", "least-busy", "latency"]},
            "affinity": {"enum": ["none", "session", "user"]}, "enabled": BOOL,
            "deployments": {"type": "array", "items": obj({"model": INT}, {
                **DEPLOYMENT, **dict.fromkeys(PRICES, AMOUNT_IN)}, closed=True)}, "fallbacks": IDS}

SCHEMAS: dict[str, Any] = {
    "AdminAccount": obj({"id": INT, "email": STR, "full_name": STR, "group": INT, "group_name": STR, "role": STR,
                         "is_active": BOOL, "is_staff": BOOL, "locked_until": NULLABLE_TIMESTAMP,
                         "failed_logins": INT, **dict.fromkeys(BUDGETS, AMOUNT),
                         "api_key": {"anyOf": [KEY_RECORD, {"type": "null"}]}, "date_joined": TIMESTAMP,
                         "last_login": NULLABLE_TIMESTAMP}, closed=True),
    "AdminAccountCreate": obj({"email": STR}, {**ACCOUNT_IN, "password": STR}, closed=True),
    "AdminAccountChange": obj({}, {**ACCOUNT_IN, "locked_until": {"type": ["string", "null"],
                                                                  "format": "date-time"}}, closed=True),
    "AdminKey": obj({"api_key": {"type": "string", "pattern": "^svc_usr_[0-9]+_[A-Za-z0-9]{32}$"}, "preview": STR,
                     "expires_at": TIMESTAMP}, closed=True),
    "AdminGroup": obj({"id": INT, **{name: schema for name, schema in GROUP_IN.items()
                                     if name not in BUDGETS}, **dict.fromkeys(BUDGETS, AMOUNT),
                       "created_at": TIMESTAMP}, closed=True),
    "AdminGroupInput": obj({}, GROUP_IN, closed=True),
    "AdminServer": obj({"id": INT, **SERVER_OUT, **{f"{name}_set": BOOL for name in SECRETS},
                        "discovered_at": NULLABLE_TIMESTAMP, "discovery_error": STR, "created_at": TIMESTAMP},
                       closed=True),
    "AdminServerInput": obj({}, {**SERVER_OUT, **dict.fromkeys(SECRETS, NULLABLE_STRING)}, closed=True),
    "AdminModel": obj({"id": INT, "public_id": STR, **{name: schema for name, schema in MODEL_IN.items()
                                                       if name not in PRICES}, **dict.fromkeys(PRICES, AMOUNT),
                       "unlisted_since": NULLABLE_TIMESTAMP, "created_at": TIMESTAMP}, closed=True),
    "AdminModelInput": obj({}, MODEL_IN, closed=True),
    "AdminAlias": obj({"id": INT, **{name: schema for name, schema in ALIAS_IN.items() if name != "deployments"},
                       "deployments": {"type": "array", "items": obj(DEPLOYMENT, closed=True)},
                       "created_at": TIMESTAMP}, closed=True),
    "AdminAliasInput": obj({}, ALIAS_IN, closed=True),
    "AdminRoutine": {"allOf": [ref("Routine"), obj({"account": INT, "account_email": STR})]},
    "AdminUsage": obj({"id": INT, "created_at": TIMESTAMP, "account": INT, "model": STR, "surface": STR,
                       "input_tokens": INT, "output_tokens": INT, "cached_input_tokens": INT,
                       "cache_write_input_tokens": INT, "cost": COST, "cached": BOOL, "request_id": STR,
                       "batch_id": NULLABLE_STRING, "tags": {"type": "object"}}, closed=True),
    "AdminCall": obj({"id": INT, "created_at": TIMESTAMP, "account": NULLABLE_INT, "group": NULLABLE_INT,
                      "surface": STR, "model_requested": STR, "model": STR, "status": INT, "outcome": STR,
                      "error_code": STR, "latency_ms": NUM, "ttft_ms": {"type": ["number", "null"]},
                      "input_tokens": INT, "output_tokens": INT, "cost": COST, "cached": BOOL,
                      "fall_throughs": INT, "request_id": STR, "attempts": {"type": "array"},
                      "tags": {"type": "object"}, "guard": {"type": "array"}}, closed=True),
}

PAGE_PARAMETERS = [
    {"name": "limit", "in": "query", "required": False, "description": "Rows per page, 1 to 200 (50 by default).",
     "schema": {"type": "integer", "minimum": 1, "maximum": 200}},
    {"name": "cursor", "in": "query", "required": False, "description": "The `next` of the page before, as it is.",
     "schema": {"type": "string"}},
]


def _query(name: str, schema: dict, description: str) -> dict:
    return {"name": name, "in": "query", "required": False, "description": description, "schema": schema}


ID_FILTER = {"type": "integer", "minimum": 0}
TIME_FILTER = {"type": "string", "format": "date-time"}
RECORD_FILTERS = [_query("account", ID_FILTER, "The account's id."),
                  _query("model", STR, "The model that answered, server/model."),
                  _query("since", TIME_FILTER, "From this time (included)."),
                  _query("until", TIME_FILTER, "Before this time.")]


def _page(name: str) -> dict:
    return {"200": json_response("One page; `next` is null on the last", obj(
        {"data": {"type": "array", "maxItems": 200, "items": ref(name)}, "next": NULLABLE_STRING}, closed=True))}


def _op(path: str, summary: str, responses: dict, *, body: dict | None = None, query: list | None = None) -> dict:
    op = operation(path, summary, responses, security=SESSION, body=body, tags=ADMIN)
    if query is not None:
        op["parameters"] = [*PAGE_PARAMETERS, *query]
    return op


def _one(name: str, status: str = "200", description: str = "OK") -> dict:
    return {status: json_response(description, ref(name))}


DELETED = {"204": {"description": "Deleted"}}
# collection, item id, record schema, its create and change bodies, list filters, what it is
RESOURCES = (
    ("accounts", "account_id", "AdminAccount", "AdminAccountCreate", "AdminAccountChange",
     [_query("group", ID_FILTER, "The group's id."), _query("email", STR, "A part of the e-mail address.")],
     "account"),
    ("groups", "group_id", "AdminGroup", "AdminGroupInput", "AdminGroupInput", [], "group"),
    ("servers", "server_id", "AdminServer", "AdminServerInput", "AdminServerInput", [], "model server"),
    ("models", "model_id", "AdminModel", "AdminModelInput", "AdminModelInput",
     [_query("server", ID_FILTER, "The server's id.")], "model"),
    ("aliases", "alias_id", "AdminAlias", "AdminAliasInput", "AdminAliasInput", [], "alias"),
)


def paths() -> dict:
    p: dict[str, Any] = {}
    for collection, key, record, create, change, filters, what in RESOURCES:
        path = f"/api/v1/admin/{collection}"
        p[path] = {"get": _op(path, f"List {collection}", _page(record), query=filters),
                   "post": _op(path, f"Create a {what}", _one(record, "201", "Created"), body=ref(create))}
        path = f"/api/v1/admin/{collection}/{{{key}}}"
        p[path] = {"parameters": [id_param(key)],
                   "get": _op(path, f"One {what}", _one(record)),
                   "patch": _op(path, f"Change a {what} (the fields sent)", _one(record), body=ref(change)),
                   "delete": _op(path, f"Delete a {what}", DELETED)}
    path = "/api/v1/admin/accounts/{account_id}/api-key"
    p[path] = {"parameters": [id_param("account_id")],
               "post": _op(path, "Generate the account's API key (shown once; replaces the old one)",
                           _one("AdminKey", "201", "Created; the key is shown once")),
               "delete": _op(path, "Revoke the account's API key", DELETED)}
    path = "/api/v1/admin/routines"
    p[path] = {"get": _op(path, "List every account's routines", _page("AdminRoutine"),
                          query=[_query("account", ID_FILTER, "The account's id."),
                                 _query("is_enabled", BOOL, "Enabled or paused.")])}
    path = "/api/v1/admin/routines/{routine_id}"
    p[path] = {"parameters": [id_param("routine_id")],
               "get": _op(path, "One routine", _one("AdminRoutine")),
               "patch": _op(path, "Pause or resume a routine", _one("AdminRoutine"),
                            body=obj({"is_enabled": BOOL}, closed=True))}
    path = "/api/v1/admin/usage"
    p[path] = {"get": _op(path, "Usage records, newest first", _page("AdminUsage"), query=RECORD_FILTERS)}
    path = "/api/v1/admin/calls"
    p[path] = {"get": _op(path, "The calls log, newest first", _page("AdminCall"),
                          query=[*RECORD_FILTERS, _query("status", {"type": "integer"}, "The HTTP status."),
                                 _query("outcome", {"enum": ["ok", "cut", "failed", "refused", "client_closed"]},
                                        "How the call ended.")])}
    return p
