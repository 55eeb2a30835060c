"""Who may call the administration API (spec 5.5): a staff account's session token only. An API key is
refused with 401 and the `/api/v1` body, whoever holds it; another account's session with 403."""

import pytest

from tests.contract import assert_native_unauthenticated
from tests.factories import AccountFactory, api_key_for, bearer, session_for

LISTS = ["/accounts", "/groups", "/servers", "/models", "/aliases", "/routines", "/usage", "/calls"]


@pytest.mark.parametrize("path", LISTS)
def test_a_staff_session_lists(api, path):
    response = api.get(path)
    assert response.status_code == 200
    assert set(response.json()) == {"data", "next"}


@pytest.mark.parametrize("path", LISTS)
def test_no_credential_is_401(client, db, path):
    assert_native_unauthenticated(client.get("/api/v1/admin" + path))


@pytest.mark.parametrize("path", LISTS)
def test_an_api_key_is_401_even_a_staff_accounts(client, staff, path):
    staff.group.api_access = True
    staff.group.save()
    key = api_key_for(staff)
    assert_native_unauthenticated(client.get("/api/v1/admin" + path, headers=bearer(key)))
    assert_native_unauthenticated(client.get("/api/v1/admin" + path, headers={"X-API-Key": key}))
    assert client.get("/v1/models", headers=bearer(key)).status_code == 200  # the key itself is good


def test_an_api_key_is_401_on_writes_too(client, staff):
    staff.group.api_access = True
    staff.group.save()
    response = client.post("/api/v1/admin/groups", {"name": "x"}, content_type="application/json",
                           headers=bearer(api_key_for(staff)))
    assert_native_unauthenticated(response)


def test_a_session_of_an_account_that_is_not_staff_is_403(client, owner):
    response = client.get("/api/v1/admin/accounts", headers=bearer(session_for(owner)))
    assert response.status_code == 403
    assert response.json() == {"detail": "Only staff accounts may use the administration API."}


def test_a_deactivated_staff_accounts_session_is_403(client, db):
    operator = AccountFactory(is_staff=True, is_active=False)
    response = client.get("/api/v1/admin/accounts", headers=bearer(session_for(operator)))
    assert response.status_code == 403
    assert response.json() == {"detail": "This account is deactivated."}


def test_a_wrong_token_is_401(client, db):
    assert_native_unauthenticated(client.get("/api/v1/admin/accounts", headers=bearer("no-such-token")))


def test_a_method_an_item_does_not_take_is_405(api):
    response = api.client.put("/api/v1/admin/groups/1", {}, content_type="application/json", headers=api.headers)
    assert response.status_code == 405
    assert response["Allow"] == "GET, PATCH, DELETE"


def test_a_staff_account_may_do_only_what_its_console_permissions_allow(client, owner):
    from django.contrib.auth.models import Permission

    viewer = AccountFactory(is_staff=True)
    headers = bearer(session_for(viewer))
    refused = client.get("/api/v1/admin/accounts", headers=headers)
    assert refused.status_code == 403
    assert refused.json() == {"detail": "Your account lacks the console's permission accounts.view_account."}
    viewer.user_permissions.add(Permission.objects.get(codename="view_account"))
    assert client.get("/api/v1/admin/accounts", headers=headers).status_code == 200  # seen at once
    changed = client.patch(f"/api/v1/admin/accounts/{owner.pk}", {"full_name": "x"}, content_type="application/json",
                           headers=headers)
    assert changed.status_code == 403
    assert changed.json() == {"detail": "Your account lacks the console's permission accounts.change_account."}
    assert client.post(f"/api/v1/admin/accounts/{owner.pk}/api-key", headers=headers).status_code == 403
    assert client.get("/api/v1/admin/groups", headers=headers).status_code == 403
