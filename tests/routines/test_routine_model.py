"""A routine's model (routines/routine_model.py): one its owner's group may not use is refused
with the spec's 422 naming `model`; a routine without a model is still created while no default
exists (spec 4.5 requires only name, prompt and targets), and its record says it cannot run,
with the cure; the console offers only the models the owner may use."""

import pytest

from routines.models import Routine
from routines.routine_model import default_label, model_choices, model_note
from tests.factories import AliasFactory, ModelFactory, ModelServerFactory
from tests.routines import routines_api_support
from tests.routines.routines_api_support import ROUTINES, assert_validation, create, minimal

api_fixture = routines_api_support.api_fixture  # the fixture `api`

pytestmark = pytest.mark.django_db


@pytest.fixture
def served(db):
    server = ModelServerFactory(name="srv")
    return {name: ModelFactory(server=server, name=name) for name in ("allowed", "forbidden")}


@pytest.fixture
def narrow(owner, served):
    """The owner's group may use `srv/allowed` only."""
    group = owner.group
    group.all_models = False
    group.save()
    group.allowed_models.set([served["allowed"]])
    return group


def test_a_model_the_owner_may_not_use_is_refused_with_422_naming_the_field(api, narrow):
    response = api.post(ROUTINES, minimal(model="srv/forbidden"))

    body = assert_validation(response, "model")
    assert body == {"message": "The model 'srv/forbidden' is not allowed for your account group.",
                    "errors": {"model": ["The model 'srv/forbidden' is not allowed for your account group."]}}
    assert not Routine.objects.exists()


def test_a_model_the_owner_may_not_use_is_refused_on_change_too(api, narrow):
    routine = create(api, model="srv/allowed")["routine"]

    response = api.put(f"{ROUTINES}/{routine['id']}", {"model": "srv/forbidden"})

    assert_validation(response, "model")
    assert Routine.objects.get().model == "srv/allowed"


def test_a_model_that_does_not_exist_is_refused_naming_the_field(api, served):
    assert_validation(api.post(ROUTINES, minimal(model="srv/nope")), "model")


def test_without_a_model_and_without_a_default_it_is_created_and_says_it_cannot_run(api, served):
    response = api.post(ROUTINES, minimal())

    assert response.status_code == 201, response.content
    routine = response.json()["routine"]
    assert routine["model"] is None
    assert routine["model_note"] == (
        "No model to run with: this routine names no model and no default model is set. Set the routine's model "
        f"(console: the routine's page, field Model; API: PUT /api/v1/routines/{routine['id']} with \"model\"), "
        "or make a chat model the default (console: Models, tick \"Is default\").")
    [listed] = api.get(ROUTINES).json()["routines"]
    assert listed["model_note"] == routine["model_note"]


def test_the_note_goes_once_a_default_exists_or_the_routine_names_a_model(api, served):
    routine = create(api)["routine"]
    assert routine["model_note"]

    named = api.put(f"{ROUTINES}/{routine['id']}", {"model": "srv/allowed"}).json()["routine"]
    assert named["model_note"] is None
    served["forbidden"].is_default = True
    served["forbidden"].save()
    unnamed = api.put(f"{ROUTINES}/{routine['id']}", {"model": None}).json()["routine"]
    assert (unnamed["model"], unnamed["model_note"]) == (None, None)


def test_a_default_the_owner_may_not_use_is_no_model_to_run_with(api, narrow, served):
    served["forbidden"].is_default = True
    served["forbidden"].save()

    routine = create(api)["routine"]

    assert routine["model_note"].startswith("No model to run with: this routine names no model and the default "
                                            "model (srv/forbidden) is not allowed to its owner's account group.")


def test_a_routine_without_ai_needs_no_model(api, served):
    assert create(api, uses_ai=False)["routine"]["model_note"] is None


def test_the_console_offers_the_chat_models_and_aliases_the_owner_may_use(owner, narrow, served):
    ModelFactory(server=served["allowed"].server, name="embedder", supports_chat=False, supports_embeddings=True)
    alias = AliasFactory(name="smart")
    alias.deployments.create(model=served["allowed"], weight=1)
    narrow.allowed_aliases.set([alias])

    assert model_choices(owner) == [("srv/allowed", "srv/allowed"), ("smart", "smart (alias)")]
    assert default_label(owner) == "None: the default model (no default model is set, so the routine cannot run)"
    served["allowed"].is_default = True
    served["allowed"].save()
    assert default_label(owner) == "None: the default model (srv/allowed)"


def test_the_note_of_a_routine_saved_without_the_api(owner, served):
    routine = Routine(account=owner, name="r", prompt="p", delivery_targets=["inapp"], webhook_token="a" * 48)
    assert model_note(routine).startswith("No model to run with")
