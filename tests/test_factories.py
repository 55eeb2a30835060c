"""The factories tests make rows with: one for every model of the product apps, each making as
many rows as a test asks for without a unique field clashing, and the key and session rows
usable by the code that looks them up."""

import factory
import pytest
from django.apps import apps

from accounts.keys import api_key_row
from accounts.sessions import session_lookup
from tests import factories

PRODUCT_APPS = ("accounts", "gateway", "native", "routines", "batches")
FACTORIES = {
    value._meta.model: value
    for value in vars(factories).values()
    if isinstance(value, type) and issubclass(value, factory.django.DjangoModelFactory)
    and value is not factory.django.DjangoModelFactory
}
MODELS = [model for app in PRODUCT_APPS for model in apps.get_app_config(app).get_models()]


def test_every_model_of_the_product_apps_has_a_factory():
    assert [model.__name__ for model in MODELS if model not in FACTORIES] == []


@pytest.mark.django_db
@pytest.mark.parametrize("model", MODELS, ids=lambda model: model.__name__)
def test_a_factory_makes_distinct_rows_again_and_again(model):
    rows = [FACTORIES[model]() for _ in range(3)]
    assert len({row.pk for row in rows}) == 3
    assert model.objects.filter(pk__in=[row.pk for row in rows]).count() == 3


@pytest.mark.django_db
def test_an_api_key_row_is_found_by_its_key():
    account = factories.AccountFactory()
    row = factories.ApiKeyFactory(account=account, key=f"svc_usr_{account.pk}_{'a' * 32}")
    assert api_key_row(key=f"svc_usr_{account.pk}_{'a' * 32}") == row
    assert api_key_row(key=f"svc_usr_{account.pk}_{'b' * 32}") is None


@pytest.mark.django_db
def test_a_session_row_is_found_by_its_token():
    row = factories.SessionTokenFactory(token="t" * 48)
    assert session_lookup(token="t" * 48) == row
    assert session_lookup(token="u" * 48) is None
