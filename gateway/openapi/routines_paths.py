"""Paths of the account endpoints (spec 4.1 to 4.4), routines, inbox, hooks and channels (4.5 to 4.8)."""

from __future__ import annotations

from gateway.openapi.components import (
    ANY_OBJECT,
    NO_CREDENTIAL,
    NULLABLE_STRING,
    NULLABLE_TIMESTAMP,
    SESSION,
    TIMESTAMP,
    id_param,
    json_response,
    obj,
    operation,
    ref,
    str_param,
)

NULLABLE_INT = {"type": ["integer", "null"]}

SCHEMAS = {
    "LoginRequest": obj({"email": {"type": "string"}, "password": {"type": "string"}},
                        {"remember_me": {"type": "boolean"}}),
    "LoginResponse": obj({
        "status": {"type": "string"}, "message": {"type": "string"},
        "data": obj({"access_token": {"type": "string"}, "token_type": {"const": "Bearer"},
                     "expires_in": {"type": "integer"}, "user": obj({"id": {"type": "integer"}})}),
    }),
    "StatusMessage": obj({"status": {"type": "string"}, "message": {"type": "string"}}),
    "KeyRequest": obj({"password": {"type": "string"}}),
    "KeyResponse": obj({
        "status": {"type": "string"}, "message": {"type": "string"},
        "data": obj({"api_key": {"type": "string", "pattern": "^svc_usr_[0-9]+_[A-Za-z0-9]{32}$"},
                     "expires_at": {"type": "string",
                                    "pattern": r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$"}}, closed=True),
    }),
    "VerifyResponse": obj({
        "valid": {"const": True}, "via": {"enum": ["apikey", "sanctum"]},
        "user": obj({"id": {"type": "integer"}, "full_name": {"type": "string"}, "email": {"type": "string"},
                     "work_group": {"type": ["string", "null"]}, "role": {"type": "string"},
                     "is_active": {"type": "boolean"}}),
        "checked_at": {"type": "string", "format": "date-time"},
    }, closed=True),
    "MeResponse": obj({"id": {"type": "integer"}, "allowed_models": {"type": ["array", "null"],
                                                                     "items": {"type": "string"}},
                       "limits": obj({
                           "daily_tokens": {"type": "integer"}, "weekly_tokens": {"type": "integer"},
                           "monthly_tokens": {"type": "integer"}, "remote_servers_allowed": {"type": "boolean"},
                           "attachments_per_message": {"type": ["integer", "null"]}}, closed=True)}),
    "RoutineInput": obj({"name": {"type": "string", "maxLength": 120}, "prompt": {"type": "string",
                                                                                 "maxLength": 8000},
                         "delivery_targets": {"type": "array", "minItems": 1, "maxItems": 5,
                                              "items": {"type": "string"}}},
                        {"trigger": {"enum": ["schedule", "webhook", "email"]}, "uses_ai": {"type": "boolean"},
                         "is_enabled": {"type": "boolean"},
                         "webhook_secret": {"type": ["string", "null"], "maxLength": 128},
                         "webhook_signature_scheme": {"enum": ["body", "standard"]},
                         # "" or null: no schedule; a schedule routine then runs only by run-now
                         "schedule": {"type": ["string", "null"], "maxLength": 120},
                         "timezone": {"type": "string", "maxLength": 64},
                         "model": {"type": ["string", "null"], "maxLength": 300}}),
    "Routine": obj({
        "id": {"type": "integer"}, "name": {"type": "string"}, "prompt": {"type": "string"},
        "trigger": {"enum": ["schedule", "webhook", "email"]},
        "delivery_targets": {"type": "array", "items": {"type": "string"}},
        "uses_ai": {"type": "boolean"}, "is_enabled": {"type": "boolean"}, "webhook_assinado": {"type": "boolean"},
        "created_at": TIMESTAMP,
    }, {
        "webhook_signature_scheme": {"type": ["string", "null"]}, "schedule": NULLABLE_STRING,
        "timezone": NULLABLE_STRING, "model": NULLABLE_STRING, "consecutive_failures": {"type": "integer"},
        "disabled_reason": NULLABLE_STRING, "last_run_at": NULLABLE_TIMESTAMP, "next_run_at": NULLABLE_TIMESTAMP,
        "schedule_note": NULLABLE_STRING,
        "webhook_token": {"type": "string", "pattern": "^[0-9a-f]{48}$"}, "email_address": NULLABLE_STRING,
    }),
    "RoutineWithToken": {"allOf": [ref("Routine"), {"required": ["webhook_token"]}]},
    "RoutineWritten": obj({
        "routine": ref("RoutineWithToken"),
        "webhook_url": {"type": "string", "pattern": "/api/v1/hooks/[0-9a-f]{48}$"},
        "webhook_assinado": {"type": "boolean"}, "webhook_aviso": NULLABLE_STRING,
    }, {"webhook_secret": {"type": ["string", "null"], "pattern": "^[0-9a-f]{64}$"}}),
    "Run": obj({"id": {"type": "integer"}, "status": {"type": "string"}, "trigger": {"type": "string"},
                "created_at": TIMESTAMP, "deliveries": {"type": "array", "items": obj({
                    "target": {"type": "string"}, "status": {"type": "string"}, "attempts": {"type": "integer"},
                    "error": NULLABLE_STRING})}},
               {"event_id": NULLABLE_STRING, "error": NULLABLE_STRING, "model": NULLABLE_STRING,
                "started_at": NULLABLE_TIMESTAMP, "finished_at": NULLABLE_TIMESTAMP}),
    "Channel": obj({"id": {"type": "integer"}, "kind": {"enum": ["telegram", "whatsapp"]},
                    "address": NULLABLE_STRING, "verified": {"type": "boolean"}, "verified_at": NULLABLE_TIMESTAMP,
                    "created_at": TIMESTAMP}, closed=True),
    "Blueprint": obj({"id": {"type": "string"}, "name": {"type": "string"}, "description": {"type": "string"},
                      "routine": ref("RoutineInput"),
                      "suggested_targets": {"type": "array", "items": {"type": "string"}}}, closed=True),
    "InboxMessage": obj({"id": {"type": "integer"}, "title": {"type": "string"}, "body": {"type": "string"},
                         "routine_id": NULLABLE_INT, "run_id": NULLABLE_INT, "read_at": NULLABLE_TIMESTAMP,
                         "created_at": TIMESTAMP}, closed=True),
}

ACCOUNT, ROUTINES, CHANNELS = ["account"], ["routines"], ["channels"]


def _ok(schema, status="200", description="OK", limited=True):
    return {status: json_response(description, schema, limited=limited)}


def paths() -> dict:
    p = {}
    path = "/api/v1/auth/login"
    p[path] = {"post": operation(path, "Log in; returns a session token (10 per minute per address)",
                                 _ok(ref("LoginResponse")), security=NO_CREDENTIAL,
                                 body=ref("LoginRequest"), tags=ACCOUNT)}
    path = "/api/v1/auth/logout"
    p[path] = {"post": operation(path, "End the session", _ok(ref("StatusMessage")), security=SESSION, tags=ACCOUNT)}
    path = "/api/v1/auth/api-key/generate"
    p[path] = {"post": operation(path, "Generate the account's key (replaces the old one)",
                                 _ok(ref("KeyResponse"), "201", "Created; the key is shown once"),
                                 security=SESSION, body=ref("KeyRequest"), tags=ACCOUNT)}
    path = "/api/v1/auth/api-key/revoke"
    p[path] = {"delete": operation(path, "Revoke the account's key", _ok(ref("StatusMessage")),
                                   security=SESSION, tags=ACCOUNT)}
    path = "/api/v1/auth/verify"
    p[path] = {"get": operation(path, "Check a credential", _ok(ref("VerifyResponse")), tags=ACCOUNT)}
    path = "/api/auth/me"
    p[path] = {"get": operation(path, "The caller's account, allowed models and group limits",
                                _ok(ref("MeResponse")), tags=ACCOUNT)}

    path = "/api/v1/routines"
    p[path] = {
        "get": operation(path, "List the caller's routines (no secret, no token)",
                         _ok(obj({"routines": {"type": "array", "items": ref("Routine")}})), tags=ROUTINES),
        "post": operation(path, "Create a routine", _ok(ref("RoutineWritten"), "201", "Created"),
                          body=ref("RoutineInput"), tags=ROUTINES),
    }
    path = "/api/v1/routines/blueprints"
    p[path] = {"get": operation(path, "Ready-made automations",
                                _ok(obj({"blueprints": {"type": "array", "items": ref("Blueprint")}})), tags=ROUTINES)}
    path = "/api/v1/routines/{routine_id}"
    p[path] = {
        "parameters": [id_param("routine_id")],
        "get": operation(path, "One routine (no secret, no token)", _ok(obj({"routine": ref("Routine")})),
                         tags=ROUTINES),
        "put": operation(path, "Change a routine", _ok(ref("RoutineWritten")), body=ANY_OBJECT, tags=ROUTINES),
        "delete": operation(path, "Delete a routine", {"204": {"description": "Deleted"}}, tags=ROUTINES),
    }
    path = "/api/v1/routines/{routine_id}/run-now"
    p[path] = {"parameters": [id_param("routine_id")],
               "post": operation(path, "Queue a run", _ok(obj({"run": ref("Run")}), "202", "Queued"), tags=ROUTINES)}
    for action, summary in (("rotate-token", "New webhook URL"), ("rotate-secret", "New secret, shown once")):
        path = f"/api/v1/routines/{{routine_id}}/{action}"
        p[path] = {"parameters": [id_param("routine_id")],
                   "post": operation(path, summary, _ok(ref("RoutineWritten")), tags=ROUTINES)}
    path = "/api/v1/routines/{routine_id}/runs"
    p[path] = {"parameters": [id_param("routine_id")],
               "get": operation(path, "The last 50 runs",
                                _ok(obj({"runs": {"type": "array", "maxItems": 50, "items": ref("Run")}})),
                                tags=ROUTINES)}
    path = "/api/v1/inbox"
    p[path] = {"get": operation(path, "In-app deliveries",
                                _ok(obj({"messages": {"type": "array", "items": ref("InboxMessage")}}, closed=True)),
                                tags=ROUTINES)}
    path = "/api/v1/inbox/{message_id}/read"
    p[path] = {"parameters": [id_param("message_id")],
               "post": operation(path, "Mark read", _ok(obj({"message": ref("InboxMessage")}, closed=True)),
                                 tags=ROUTINES)}
    path = "/api/v1/hooks/{token}"
    p[path] = {"parameters": [str_param("token")],
               "post": operation(path, "A webhook event; the body is anything up to 65536 bytes",
                                 _ok(ref("HookAnswer")), security=NO_CREDENTIAL,
                                 body={}, body_type="*/*", tags=ROUTINES)}

    path = "/api/v1/channels"
    p[path] = {"get": operation(path, "Linked channels",
                                _ok(obj({"channels": {"type": "array", "items": ref("Channel")}}, closed=True)),
                                tags=CHANNELS)}
    path = "/api/v1/channels/{channel_id}"
    p[path] = {"parameters": [id_param("channel_id")],
               "delete": operation(path, "Unlink a channel",
                                   _ok(obj({"deleted": {"const": True}, "id": {"type": "integer"}}, closed=True)),
                                   tags=CHANNELS)}
    path = "/api/v1/channels/telegram/link"
    p[path] = {"post": operation(path, "Start linking Telegram",
                                 _ok(obj({"link": {"type": "string"}, "expires_at": TIMESTAMP}), "201", "Created"),
                                 tags=CHANNELS)}
    path = "/api/v1/channels/telegram/updates/{secret}"
    p[path] = {"parameters": [str_param("secret")],
               "post": operation(path, "Telegram's webhook", _ok(obj({"ok": {"const": True}})),
                                 security=NO_CREDENTIAL, body=ANY_OBJECT, tags=CHANNELS)}
    path = "/api/v1/channels/whatsapp"
    p[path] = {"post": operation(path, "Register a WhatsApp number",
                                 _ok(obj({"channel": ref("Channel"), "code_expires_at": TIMESTAMP}, closed=True),
                                     "201", "Created"),
                                 body=obj({"number": {"type": "string", "maxLength": 32}}), tags=CHANNELS)}
    path = "/api/v1/channels/whatsapp/verify"
    p[path] = {"post": operation(path, "Confirm a WhatsApp number",
                                 _ok(obj({"channel": ref("Channel")}, closed=True)),
                                 body=obj({"number": {"type": "string", "maxLength": 32},
                                           "code": {"type": "string", "pattern": "^[0-9]+$"}}),
                                 tags=CHANNELS)}
    return p
