"""The Gemini surface under the account's limits, as google-genai reads them: a spent budget and a used-up token
quota refuse the call before any model is called, in Google's error shape; an alias's pool serves a model name
the surface is given, as on every other surface."""

import pytest
from google.genai import errors

from accounts.models import AccountGroup
from tests.compat.test_budgets import CALL, budget, call, priced, wait_spent
from tests.factories import AliasDeploymentFactory, AliasFactory


def model_calls(world) -> int:
    return sum(1 for request in world.upstream.requests if request.method == "POST")


def test_a_spent_budget_is_refused_in_googles_shape_before_any_model_call(world, gemini):
    priced(world)
    budget(world.group, daily=CALL)
    call(world)
    wait_spent(world, CALL)
    with pytest.raises(errors.ClientError) as refused:
        gemini.models.generate_content(model="oa/echo-1", contents="one two three")
    assert (refused.value.code, refused.value.status) == (403, "PERMISSION_DENIED")
    assert "daily budget of 0.0475 USD" in refused.value.message
    assert model_calls(world) == 1


def test_a_used_up_token_quota_is_refused_in_googles_shape_before_any_model_call(world, gemini):
    AccountGroup.objects.filter(pk=world.group.pk).update(daily_tokens=0)
    group = AccountGroup.objects.get(pk=world.group.pk)
    group.save()  # the save's signal is what the gateway's credential cache follows
    with pytest.raises(errors.ClientError) as refused:
        gemini.models.generate_content(model="oa/echo-1", contents="one two three")
    assert (refused.value.code, refused.value.status) == (403, "PERMISSION_DENIED")  # a quota is a 403, never a 429
    assert model_calls(world) == 0


def test_an_alias_pool_serves_the_model_name_it_is_given(world, gemini):
    AliasDeploymentFactory(alias=AliasFactory(name="house-chat"), model=world.default)
    reply = gemini.models.generate_content(model="house-chat", contents="one two three")
    assert reply.text == "Echo: one two three"
    assert world.upstream.requests[-1].json["model"] == "echo-1"
