"""deploy/compose.yaml held to the image's contract: every gateway service runs a command the image knows from
the one image, the web waits for `migrate` to succeed, beat is one, each service has its health check (or
says why it has none), and no secret is written in the file: each is a file deploy/make-secrets makes."""

import hashlib
import os
import re
import stat
import subprocess
from urllib.parse import urlsplit

from tests.deploy.manifests import DEPLOY, IMAGE, VAR_DIR, compose, image_commands, known_settings, procfile

GATEWAY = {"migrate", "web-1", "web-2", "worker", "batch-worker", "beat"}


def gateway_services() -> dict[str, dict]:
    return {name: s for name, s in compose()["services"].items() if s["image"].split(":")[0] == IMAGE}


def test_the_gateway_services_are_the_procfiles_processes_and_migrate():
    services = gateway_services()
    assert set(services) == GATEWAY
    commands = {name: s["command"] for name, s in services.items()}
    assert all(command[0] in image_commands() for command in commands.values()), commands
    assert {command[0] for command in commands.values()} == (set(procfile()) - {"release"}) | {"migrate"}
    assert commands["migrate"] == ["migrate"]


def test_every_gateway_service_runs_the_one_image_built_from_the_containerfile():
    services = gateway_services()
    assert {s["image"] for s in services.values()} == {"model-gateway:${GATEWAY_TAG:-local}"}
    assert all(s["build"] == {"context": "..", "dockerfile": "Containerfile"} for s in services.values())


def test_every_gateway_process_but_migrate_waits_for_migrate_to_succeed_and_for_its_services():
    for name, service in gateway_services().items():
        if name == "migrate":
            assert service["depends_on"] == {"postgres": {"condition": "service_healthy"}}
            assert service["restart"] == "no"
            continue
        assert service["depends_on"]["migrate"] == {"condition": "service_completed_successfully"}, name
        assert service["depends_on"]["postgres"] == {"condition": "service_healthy"}, name
        assert service["depends_on"]["redis"] == {"condition": "service_healthy"}, name


def test_two_web_processes_and_exactly_one_beat():
    services = compose()["services"]
    assert [name for name, s in gateway_services().items() if s["command"] == ["web"]] == ["web-1", "web-2"]
    assert [name for name, s in gateway_services().items() if s["command"] == ["beat"]] == ["beat"]
    assert services["beat"]["deploy"]["replicas"] == 1
    assert all(s.get("deploy", {}).get("replicas", 1) == 1 for s in services.values())


def test_health_checks():
    services = compose()["services"]
    for name in ("web-1", "web-2"):
        test = services[name]["healthcheck"]["test"]
        assert test[:2] == ["CMD", "python"] and "http://127.0.0.1:8000/readyz" in test[-1], name
    assert services["postgres"]["healthcheck"]["test"][:2] == ["CMD", "pg_isready"]
    assert "redis-cli" in services["redis"]["healthcheck"]["test"][1]
    assert "ping | grep -qx PONG" in services["redis"]["healthcheck"]["test"][1]  # an error reply exits 0
    # no web port to ask: the image's own HEALTHCHECK (/livez) would mark them unhealthy forever
    for name in ("migrate", "worker", "batch-worker", "beat"):
        assert services[name]["healthcheck"] == {"disable": True}, name


def test_each_gateway_process_has_a_var_volume_of_its_own_and_the_files_volume_is_shared():
    spec = compose()
    seen = set()
    for name, service in gateway_services().items():
        mounts = dict(reversed(volume.split(":")) for volume in service["volumes"])
        assert mounts[VAR_DIR] == f"{name}-var", name
        seen.add(mounts[VAR_DIR])
        if name != "migrate":
            assert mounts[f"{VAR_DIR}/files"] == "files", name
            assert service["environment"]["FILES_DIR"] == f"{VAR_DIR}/files"
            assert service["depends_on"]["files-volume"] == {"condition": "service_completed_successfully"}
        assert service["read_only"] is True and service["tmpfs"] == ["/tmp"], name
    assert set(spec["volumes"]) == seen | {"database", "files"}
    assert spec["services"]["postgres"]["volumes"] == ["database:/var/lib/postgresql/data"]
    assert spec["services"]["files-volume"]["entrypoint"] == ["chown", "10001:10001", f"{VAR_DIR}/files"]


def test_secrets_are_files_named_by_name_file_and_never_written_here():
    spec = compose()
    assert spec["secrets"] == {name: {"file": f"./secrets/{name}"} for name in
                               ("secret_key", "postgres_password", "database_url", "redis_url", "redis_acl")}
    settings = known_settings()
    for name, service in gateway_services().items():
        env = service["environment"]
        assert set(env) <= settings, (name, set(env) - settings)
        assert {key: env[key] for key in env if key.endswith("_FILE")} == {
            "SECRET_KEY_FILE": "/run/secrets/secret_key", "DATABASE_URL_FILE": "/run/secrets/database_url",
            "REDIS_URL_FILE": "/run/secrets/redis_url"}, name
        assert not {"SECRET_KEY", "DATABASE_URL", "REDIS_URL", "CELERY_BROKER_URL"} & set(env), name
        assert sorted(service["secrets"]) == ["database_url", "redis_url", "secret_key"], name
    postgres = spec["services"]["postgres"]
    assert postgres["environment"]["POSTGRES_PASSWORD_FILE"] == "/run/secrets/postgres_password"
    assert "POSTGRES_PASSWORD" not in postgres["environment"]
    for name, service in spec["services"].items():
        secretish = {key for key in service.get("environment", {})
                     if re.search(r"PASSWORD|SECRET|TOKEN|_KEY|_URL$", key) and not key.endswith("_FILE")
                     and key != "PUBLIC_BASE_URL"}  # an address, no secret
        assert not secretish, (name, secretish)
    text = (DEPLOY / "compose.yaml").read_text()
    assert not re.search(r"\w+://[^/\s:]*:[^@\s/]+@", text), "a URL with a password is written in compose.yaml"
    assert "deploy/secrets/" in (DEPLOY.parent / ".gitignore").read_text().splitlines()


def test_make_secrets_makes_each_secret_consistent_with_the_others_and_keeps_them(tmp_path):
    folder = tmp_path / "secrets"
    done = subprocess.run([str(DEPLOY / "make-secrets"), str(folder)], capture_output=True, text=True, timeout=30)
    assert done.returncode == 0, done.stderr
    names = {"secret_key", "postgres_password", "database_url", "redis_url", "redis_acl"}
    assert {p.name for p in folder.iterdir()} == names
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700
    assert {stat.S_IMODE((folder / n).stat().st_mode) for n in names} == {0o644}
    value = {n: (folder / n).read_text() for n in names}
    # what the settings accept: 50 or more characters, not a weak one
    assert len(value["secret_key"]) >= 50 and len(set(value["secret_key"])) >= 5
    database = urlsplit(value["database_url"])
    assert (database.scheme, database.username, database.hostname, database.port, database.path) == (
        "postgres", "gateway", "postgres", 5432, "/gateway")
    assert database.password == value["postgres_password"] and re.fullmatch(r"[0-9a-f]{48}", database.password)
    redis = urlsplit(value["redis_url"])
    assert (redis.scheme, redis.username, redis.hostname, redis.port, redis.path) == ("redis", "", "redis", 6379, "/0")
    digest = hashlib.sha256(redis.password.encode()).hexdigest()
    assert value["redis_acl"].splitlines() == [f"user default on #{digest} ~* &* +@all",
                                               "user healthcheck on nopass -@all +ping"]
    assert redis.password not in value["redis_acl"]

    (folder / "postgres_password").unlink()
    again = subprocess.run([str(DEPLOY / "make-secrets"), str(folder)], capture_output=True, text=True, timeout=30)
    assert again.returncode == 0, again.stderr
    assert again.stdout.splitlines() == [f"made {folder}/postgres_password", f"made {folder}/database_url"]
    assert {n: (folder / n).read_text() for n in ("secret_key", "redis_url", "redis_acl")} == {
        n: value[n] for n in ("secret_key", "redis_url", "redis_acl")}
    assert urlsplit((folder / "database_url").read_text()).password == (folder / "postgres_password").read_text()
    assert os.access(DEPLOY / "make-secrets", os.X_OK)
