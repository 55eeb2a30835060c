"""Two web processes on one Redis share one count: the limit is not multiplied (spec 8.1)."""

import httpx
import pytest
from django.conf import settings

from tests.factories import AccountFactory, AccountGroupFactory, api_key_for
from tests.servers import web_process

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
