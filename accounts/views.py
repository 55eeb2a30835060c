"""Authentication endpoints (spec 4.1–4.4, 5.2, 5.5)."""


from django.utils import timezone
from rest_framework import serializers

from accounts.endpoints import NONE, SESSION, endpoint
from accounts.keys import api_key_generate, api_key_revoke
from accounts.login import account_login, password_confirm
from accounts.records import account_identity, account_record, allowed_model_ids
from accounts.sessions import session_delete
from gateway.limits import ratelimit
from gateway.web.body import read_json_object
from gateway.web.errors import ApiError
from gateway.web.output import respond, timestamp, timestamp_with_offset
from gateway.web.validation import validated


class LoginInput(serializers.Serializer):
    email = serializers.EmailField(max_length=254)
    password = serializers.CharField(max_length=1024, trim_whitespace=False)
    remember_me = serializers.BooleanField(required=False, default=False)


class PasswordInput(serializers.Serializer):
    password = serializers.CharField(max_length=1024, trim_whitespace=False)


@endpoint("POST", auth=NONE, limit=ratelimit.LOGIN)
def login(request):
    data = validated(LoginInput, read_json_object(request))
    account, session = account_login(email=data["email"], password=data["password"], remember=data["remember_me"])
    return respond(
        {
            "status": "success",
            "message": "Login successful.",
            "data": {
                "access_token": session.token,
                "token_type": "Bearer",
                "expires_in": session.expires_in,
                "user": account_record(account),
            },
        }
    )


@endpoint("POST", auth=SESSION, session_needs_api_access=False)
def logout(request):
    session_delete(session=request.principal.session)
    return respond({"status": "success", "message": "Logged out."})


@endpoint("POST", auth=SESSION)
def api_key_create(request):
    data = validated(PasswordInput, read_json_object(request))
    account = request.principal.account
    password_confirm(account=account, password=data["password"])
    issued = api_key_generate(account=account)
    return respond(
        {
            "status": "success",
            "message": "API key generated. Store it now: it will not be shown again.",
            "data": {"api_key": issued.key, "expires_at": timestamp(issued.expires_at)},
        },
        status=201,
    )


@endpoint("DELETE", auth=SESSION)
def api_key_delete(request):
    if not api_key_revoke(account=request.principal.account):
        raise ApiError(404, "There is no API key to revoke.", code="not_found")
    return respond({"status": "success", "message": "API key revoked."})


@endpoint("GET")
def verify(request):
    principal = request.principal
    return respond(
        {
            "valid": True,
            "via": principal.via,
            "user": account_identity(principal.account),
            "checked_at": timestamp_with_offset(timezone.now()),
        }
    )


@endpoint("GET", session_needs_api_access=False)
def me(request):
    account = request.principal.account
    group = account.group
    return respond(
        {
            **account_record(account),
            "allowed_models": allowed_model_ids(account),
            "limits": {
                "daily_tokens": group.daily_tokens,
                "weekly_tokens": group.weekly_tokens,
                "monthly_tokens": group.monthly_tokens,
                "remote_servers_allowed": group.remote_servers_allowed,
                "attachments_per_message": group.attachments_per_message,
            },
        }
    )
