"""A change to servers, models, fallbacks or a group's allowed models is seen by
every process on its next call, through a version stamp read per call, not after a TTL."""

import socket
from unittest import mock

import httpx
import pytest
from django.test import override_settings

from accounts.models import AccountGroup
from gateway.models import Model
from gateway.registry import cooldown
from gateway.registry.config_file import apply_config
from gateway.registry.snapshot import read_stamps, registry, registry_version_key
from gateway.state.counters import version_bump
from tests.conftest import clear_counters
from tests.factories import (
    AccountFactory,
    AccountGroupFactory,
    ModelFactory,
    ModelFallbackFactory,
    ModelServerFactory,
    api_key_for,
    bearer,
)
from tests.servers import wait_for_quiet_database, web_process
from tests.upstream.fixtures import upstream  # noqa: F401 — the fixture


@pytest.fixture(autouse=True)
def _long_ttl(settings, redis_url):
    settings.REGISTRY_TTL_SECONDS = 3600  # only the stamp can make a process read the registry again


def stamp() -> int:
    return read_stamps()[0]


def test_a_moved_stamp_makes_the_registry_read_again(db):
    server = ModelServerFactory(name="local")
    ModelFactory(server=server, name="first")
    assert set(registry().by_public_id) == {"local/first"}
    # Another process adds a model: its signals move the stamp, none reach this process.
    Model.objects.bulk_create([Model(server=server, name="second")])
    assert set(registry().by_public_id) == {"local/first"}  # the copy is kept while the stamp stands
    version_bump([registry_version_key()])
    assert set(registry().by_public_id) == {"local/first", "local/second"}


@pytest.mark.parametrize("kind", ["redis", "cache"])
def test_both_stamps_are_read_in_one_step_from_either_backend(db, settings, kind):
    """The registry's stamp and the cooldowns' come from the backend chosen for the shared state:
    Redis, or the Django cache of the embedded default."""
    if kind == "cache":
        settings.REDIS_URL = ""
        clear_counters()
    assert read_stamps() == (0, 0)
    version_bump([registry_version_key()])
    cooldown.clear(ModelServerFactory(name="local").pk)  # an operator's change: the cooldowns' stamp moves
    assert read_stamps() == (1, 1)
    clear_counters()


def test_a_stamp_that_cannot_be_read_leaves_the_registry_to_its_ttl(db):
    ModelFactory(server=ModelServerFactory(name="local"), name="first")
    before = registry()
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        with override_settings(REDIS_URL=f"redis://127.0.0.1:{sock.getsockname()[1]}/0"):
            assert read_stamps() is None
            assert registry() is before


@pytest.mark.parametrize("change", ["server", "model", "model_delete", "fallback", "allowed_models",
                                    "allowed_models_reverse", "group_delete", "fallbacks_m2m"])
def test_every_change_moves_the_stamp_once_committed(db, django_capture_on_commit_callbacks, change):
    server = ModelServerFactory(name="local")
    first = ModelFactory(server=server, name="first")
    second = ModelFactory(server=server, name="second")
    group = AccountGroupFactory(name="team", all_models=False)
    before = stamp()
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        if change == "server":
            server.read_timeout = 12
            server.save()
        elif change == "model":
            first.enabled = False
            first.save()
        elif change == "model_delete":
            second.delete()
        elif change == "fallback":
            ModelFallbackFactory(model=first, fallback=second)
        elif change == "allowed_models":
            group.allowed_models.add(first)
        elif change == "allowed_models_reverse":
            first.groups.add(group)
        elif change == "group_delete":
            group.delete()
        elif change == "fallbacks_m2m":
            first.fallbacks.add(second, through_defaults={"position": 0})
    assert stamp() == before  # not before the commit
    for callback in callbacks:
        callback()
    assert stamp() > before


def test_applyconfig_moves_the_stamp(db, django_capture_on_commit_callbacks):
    before = stamp()
    with django_capture_on_commit_callbacks(execute=True):
        apply_config({
            "servers": [{"name": "local", "base_url": "http://127.0.0.1:9/v1", "models": [{"name": "m1"}]}],
            "groups": [{"name": "team", "allowed_models": ["local/m1"]}],
        })
    after = stamp()
    assert after > before
    with django_capture_on_commit_callbacks(execute=True):
        apply_config({
            "servers": [{"name": "local", "base_url": "http://127.0.0.1:9/v1", "models": [{"name": "m1"}]}],
            "groups": [{"name": "team", "allowed_models": []}],
        })
    assert stamp() > after
    assert registry().group_models.get(AccountGroup.objects.get(name="team").pk, frozenset()) == frozenset()


def test_a_model_allowed_here_is_served_by_another_process_on_its_very_next_request(
        transactional_db, redis_url, upstream):  # noqa: F811
    group = AccountGroupFactory(name="team", api_access=True, all_models=False)
    key = api_key_for(AccountFactory(group=group))
    server = ModelServerFactory(name="oa", base_url=f"{upstream.url}/v1")
    allowed = ModelFactory(server=server, name="echo-1", is_default=True)
    other = ModelFactory(server=server, name="echo-2")
    group.allowed_models.add(allowed)
    headers = {"Authorization": f"Bearer {key}"}

    def ask(model):
        return httpx.post(f"{base}/v1/chat/completions", headers=headers, timeout=30,
                          json={"model": model, "messages": [{"role": "user", "content": "hi"}]})

    with web_process(REDIS_URL=redis_url, REGISTRY_TTL_SECONDS="60") as base:
        assert ask("oa/echo-1").status_code == 200
        assert ask("oa/echo-2").status_code == 403  # the other process now holds the registry
        group.allowed_models.add(other)
        assert ask("oa/echo-2").status_code == 200
        group.allowed_models.remove(other)
        assert ask("oa/echo-2").status_code == 403
        other.enabled = False
        other.save()
        group.allowed_models.add(other)
        r = ask("oa/echo-2")  # a disabled model: no server has it
        assert r.status_code == 404, r.text
    wait_for_quiet_database()


def test_a_proxied_call_reads_the_stamps_in_its_counter_step(transactional_db, client, upstream):  # noqa: F811
    """No round trip of the registry's own on the hot path: the stamps come with the ceilings."""
    key = api_key_for(AccountFactory(group=AccountGroupFactory(name="team", api_access=True)))
    ModelFactory(server=ModelServerFactory(name="oa", base_url=f"{upstream.url}/v1"), name="echo-1", is_default=True)
    with mock.patch("gateway.registry.snapshot.read_stamps", side_effect=AssertionError("a round trip of its own")):
        r = client.post("/v1/chat/completions", {"model": "oa/echo-1", "messages": [{"role": "user", "content": "hi"}]},
                        content_type="application/json", headers=bearer(key))
    assert r.status_code == 200, r.content
    wait_for_quiet_database()


def test_a_copy_found_current_for_a_request_answers_it_even_if_its_ttl_runs_out_meanwhile(db, settings,
                                                                                         django_assert_num_queries):
    """The event loop's way (accounts/endpoints.py) runs a request's step in the loop once
    `registry_current()` said the copy is current; if REGISTRY_TTL_SECONDS ran out between that check and
    the step's `registry()`, the step read the database from the loop (SynchronousOnlyOperation, a 500 seen
    once in 20,000 calls of the hot-path benchmark). The request keeps the copy it was promised."""
    from gateway.registry import snapshot

    ModelFactory(server=ModelServerFactory(name="local"), name="first")
    reg = registry()
    try:
        snapshot.note_stamps(read_stamps())
        assert snapshot.registry_current()
        settings.REGISTRY_TTL_SECONDS = 0  # the copy's TTL runs out meanwhile
        with django_assert_num_queries(0):
            assert registry() is reg
    finally:
        snapshot.forget_noted_stamps()  # the request ended: the next one reads the database again
    assert registry() is not reg and set(registry().by_public_id) == {"local/first"}
