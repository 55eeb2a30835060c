"""Two web processes on one Redis share one count: the limit is not multiplied (spec 8.1)."""

import httpx
import pytest

from tests.factories import AccountFactory, AccountGroupFactory, api_key_for
from tests.servers import web_process
from tests.upstream.fixtures import upstream  # noqa: F401 — the fixture

pytestmark = pytest.mark.django_db(transaction=True)


def test_two_web_processes_share_the_per_account_count(redis_url):
    account = AccountFactory(group=AccountGroupFactory(api_access=True))
    headers = {"Authorization": f"Bearer {api_key_for(account)}", "Accept": "application/json"}
    with web_process(REDIS_URL=redis_url) as first, web_process(REDIS_URL=redis_url) as second:
        statuses = []
        for i in range(20):
            base = first if i % 2 else second
            statuses.append(httpx.get(f"{base}/v1/models", headers=headers).status_code)
        assert statuses == [200] * 20
        for base in (first, second):
            refused = httpx.get(f"{base}/v1/models", headers=headers)
            assert refused.status_code == 429
            assert refused.json() == {"message": "Too Many Attempts."}
        remaining = [
            httpx.get(f"{base}/api/v1/version", headers=headers).headers["X-RateLimit-Remaining"]
            for base in (first, second)
        ]
        assert remaining == ["39", "38"]  # one shared count of 20, 21, 22 against the 60 ceiling


def test_two_web_processes_share_one_token_quota(redis_url, upstream):  # noqa: F811
    """Calls through either process count against the same windows: the ceiling holds across
    processes rather than once per process."""
    from accounts.models import AccountGroup
    from tests.factories import ModelFactory, ModelServerFactory

    group = AccountGroupFactory(api_access=True, daily_tokens=7)
    account = AccountFactory(group=group)
    ModelFactory(server=ModelServerFactory(name="oa", base_url=f"{upstream.url}/v1"), name="echo-1", is_default=True)
    headers = {"Authorization": f"Bearer {api_key_for(account)}", "Accept": "application/json"}
    body = {"model": "oa/echo-1", "messages": [{"role": "user", "content": "hi"}]}  # 3 tokens a call
    with web_process(REDIS_URL=redis_url, REGISTRY_TTL_SECONDS="0") as first, \
            web_process(REDIS_URL=redis_url, REGISTRY_TTL_SECONDS="0") as second:
        used = 0
        for base in (first, second, first):  # 0 → 3 → 6: the third call is the last allowed
            r = httpx.post(f"{base}/v1/chat/completions", json=body, headers=headers)
            assert r.status_code == 200, r.text
            used += r.json()["usage"]["total_tokens"]
            _wait(lambda: httpx.get(f"{second}/api/v1/usage", headers=headers).json()["day"]["used"] >= used)
        for base in (second, first):
            refused = httpx.post(f"{base}/v1/chat/completions", json=body, headers=headers)
            assert refused.status_code == 403
            assert refused.json()["error"]["code"] == "permission_denied"
        assert httpx.get(f"{first}/api/v1/usage", headers=headers).json()["day"]["used"] == 9
    assert AccountGroup.objects.get(pk=group.pk).daily_tokens == 7


def _wait(condition, timeout=5.0):
    import time

    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.05)
