"""Data of the fault tests, written in a process of the stack's environment (its own database):

    python -m tests.faults.seed '{"op": "base", "upstream": "http://127.0.0.1:9100/v1"}'
    python -m tests.faults.seed '{"op": "account", "name": "kill", "routines": 2, "daily_tokens": -1}'
    python -m tests.faults.seed '{"op": "server", "name": "dead", "base_url": "...", "models": ["m1"]}'

Prints one JSON line with what the test needs (API key, webhook tokens and secrets)."""

from __future__ import annotations

import json
import os
import sys

PRICE = {"input_price": "2.5", "output_price": "10"}  # per million tokens (tests/faults/checks.py INPUT_UNITS)


def base(spec: dict) -> dict:
    """The default model `ref/echo-1`, and a second server `ref2` on the same upstream holding
    `echo-1` too: the bare name is a pool, and so is the alias `ref-pool` over both."""
    from gateway.models import Alias, AliasDeployment, Model, ModelServer

    server, _ = ModelServer.objects.update_or_create(
        name="ref", defaults={"base_url": spec["upstream"], "connect_timeout": 2.0, "read_timeout": 20.0})
    model, _ = Model.objects.update_or_create(server=server, name="echo-1", defaults={"is_default": True, **PRICE})
    twin_server, _ = ModelServer.objects.update_or_create(
        name="ref2", defaults={"base_url": spec["upstream"], "connect_timeout": 2.0, "read_timeout": 20.0})
    twin, _ = Model.objects.update_or_create(server=twin_server, name="echo-1", defaults=PRICE)
    alias, _ = Alias.objects.update_or_create(name="ref-pool", defaults={"policy": Alias.Policy.LEAST_BUSY})
    for deployment in (model, twin):
        AliasDeployment.objects.update_or_create(alias=alias, model=deployment, defaults={"weight": 1})
    return {"default": f"{server.name}/{model.name}", "pool": "echo-1", "alias": alias.name}


def server(spec: dict) -> dict:
    from gateway.models import Model, ModelServer

    srv, _ = ModelServer.objects.update_or_create(
        name=spec["name"], defaults={"base_url": spec["base_url"], "connect_timeout": spec.get("connect_timeout", 1.0),
                                     "read_timeout": spec.get("read_timeout", 1.0)})
    for name in spec.get("models", []):
        Model.objects.update_or_create(server=srv, name=name, defaults={})
    return {"server": srv.name, "models": [f"{srv.name}/{name}" for name in spec.get("models", [])]}


def account(spec: dict) -> dict:
    from accounts.keys import api_key_generate
    from accounts.models import Account, AccountGroup
    from gateway.models import Model
    from routines.models import Routine
    from routines.routine_writes import new_secret, new_token

    name = spec["name"]
    ceilings = {f"{p}_{kind}": spec.get(f"{p}_{kind}", -1) for p in ("daily", "weekly", "monthly")
                for kind in ("tokens", "budget")}
    group, _ = AccountGroup.objects.update_or_create(
        name=f"faults-{name}", defaults={"api_access": True, "all_models": spec.get("all_models", True), **ceilings})
    if "allowed_models" in spec:
        wanted = []
        for public_id in spec["allowed_models"]:
            server_name, model_name = public_id.split("/", 1)
            wanted.append(Model.objects.get(server__name=server_name, name=model_name))
        group.allowed_models.set(wanted)
    acc = Account.objects.create_user(email=f"{name}@faults.test", password="faults-password-1", group=group,
                                      full_name=f"Fault {name}")
    key = api_key_generate(account=acc).key
    routines = []
    for i in range(spec.get("routines", 0)):
        secret = new_secret()
        routine = Routine.objects.create(
            account=acc, name=f"{name}-{i}", prompt="Summarize the event in one line.",
            trigger=Routine.Trigger.WEBHOOK, delivery_targets=spec.get("targets", ["inapp"]),
            webhook_token=new_token(), webhook_secret=secret, model=spec.get("model", ""))
        routines.append({"id": routine.pk, "token": routine.webhook_token, "secret": secret})
    return {"account_id": acc.pk, "group_id": group.pk, "group": group.name, "key": key, "routines": routines}


OPS = {"base": base, "server": server, "account": account}


def main() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "gateway.settings")
    import django

    django.setup()
    spec = json.loads(sys.argv[1])
    print(json.dumps(OPS[spec["op"]](spec)))


if __name__ == "__main__":
    main()
