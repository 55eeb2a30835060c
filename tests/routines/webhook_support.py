"""For the tests of POST /api/v1/hooks/{token}: the fixtures `routine` (signed) and `unsigned`, the
body signature, and `hook`, which posts an event to a routine or a bare token."""

import hashlib
import hmac

import pytest

from routines.routine_writes import new_token
from tests.factories import RoutineFactory

SECRET = "s3cret-for-tests"
T0 = 1_800_000_000


@pytest.fixture(name="routine")
def routine_fixture(owner):
    return RoutineFactory(account=owner, name="Hook", prompt="Summarize.", trigger="webhook",
                          delivery_targets=["inapp"], webhook_secret=SECRET, webhook_token=new_token())


@pytest.fixture(name="unsigned")
def unsigned_fixture(owner):
    return RoutineFactory(account=owner, name="Open", prompt="Summarize.", trigger="webhook",
                          delivery_targets=["inapp"], webhook_secret=None, webhook_token=new_token())


def sig(body: bytes, secret: str = SECRET) -> str:
    return hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def hook(client, routine_or_token, body=b"{}", *, signed=True, headers=None, content_type="application/json"):
    token = routine_or_token if isinstance(routine_or_token, str) else routine_or_token.webhook_token
    headers = dict(headers or {})
    if signed and not isinstance(routine_or_token, str) and routine_or_token.webhook_secret:
        headers.setdefault("X-Svc-Signature", sig(body, routine_or_token.webhook_secret))
    return client.post(f"/api/v1/hooks/{token}", body, content_type=content_type, headers=headers)
