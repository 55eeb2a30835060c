"""Secrets by file: any setting NAME given as NAME_FILE, the path of a file holding its value (django-environ's
FileAwareEnv, gateway/settings/environment.py), and SECRET_KEY_FILE's two meanings made one: a file that is
there holds the key, read as every NAME_FILE is; on SQLite one that is not there yet is made by the first
process, as the embedded default's GATEWAY_VAR_DIR/secret-key is.

The settings of an environment are `gateway.settings.from_env` of it, in this process; a fresh process only
where the process start is the point (the key made when a process starts, and read by the next)."""

import hashlib
import os
import secrets
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from django.core.exceptions import ImproperlyConfigured

from gateway.ops.process_start import kept_secret_key
from gateway.settings import from_env

ROOT = Path(__file__).resolve().parents[3]
GOOD_KEY = secrets.token_urlsafe(50)
POSTGRES = "postgres://gw:pw@db.example.test:5432/gateway"
# Every variable of the test run that the settings below would read.
SETTINGS_VARS = {"SECRET_KEY", "SECRET_KEY_FILE", "DEBUG", "DATABASE_URL", "REDIS_URL", "CELERY_BROKER_URL",
                 "GATEWAY_VAR_DIR", "DJANGO_SETTINGS_MODULE"}


def settings_of(tmp_path, **env: str) -> dict:
    return from_env({"GATEWAY_VAR_DIR": str(tmp_path / "var"), **env})


def refusal(tmp_path, **env: str) -> str:
    with pytest.raises(ImproperlyConfigured) as refused:
        settings_of(tmp_path, **env)
    return str(refused.value)


def secret_file(tmp_path, name: str, content: str) -> str:
    path = tmp_path / "secrets" / name
    path.parent.mkdir(exist_ok=True)
    path.write_text(content)
    return str(path)


class TestAnySettingByFile:
    def test_database_url_and_redis_url_are_read_from_their_files(self, tmp_path):
        found = settings_of(tmp_path, DEBUG="false", SECRET_KEY=GOOD_KEY,
                            DATABASE_URL_FILE=secret_file(tmp_path, "database-url", POSTGRES + "\n"),
                            REDIS_URL_FILE=secret_file(tmp_path, "redis-url", "redis://:s3cret@cache.example.test:6380/3"))
        database = found["DATABASES"]["default"]
        assert (database["ENGINE"], database["HOST"], database["PORT"], database["NAME"], database["USER"],
                database["PASSWORD"]) == ("django.db.backends.postgresql", "db.example.test", 5432, "gateway", "gw",
                                          "pw")
        assert found["REDIS_URL"] == "redis://:s3cret@cache.example.test:6380/3"
        assert found["CELERY_BROKER_URL"] == "redis://:s3cret@cache.example.test:6380/3"  # the broker follows it

    def test_the_file_wins_over_the_variable_and_keeps_all_but_one_final_line_break(self, tmp_path):
        path = secret_file(tmp_path, "token", "  abc def  \n\n")
        found = settings_of(tmp_path, METRICS_TOKEN="from-the-environment", METRICS_TOKEN_FILE=path)
        assert found["METRICS_TOKEN"] == "  abc def  \n"
        windows = secret_file(tmp_path, "token-crlf", "tok\r\n")
        assert settings_of(tmp_path, METRICS_TOKEN_FILE=windows)["METRICS_TOKEN"] == "tok"

    def test_a_file_that_cannot_be_read_is_refused_by_name(self, tmp_path):
        missing = tmp_path / "secrets" / "nowhere"
        message = refusal(tmp_path, DATABASE_URL_FILE=str(missing))
        assert message == f"DATABASE_URL_FILE names {missing}, which cannot be read (No such file or directory)."

    def test_an_empty_name_file_is_as_unset(self, tmp_path):
        """`.env.example` lists SECRET_KEY_FILE= empty: a copy of it changes nothing."""
        assert settings_of(tmp_path, DATABASE_URL_FILE="", SECRET_KEY_FILE="")["SECRET_KEY_FILE"] == \
            tmp_path / "var" / "secret-key"

    def test_a_value_read_from_a_file_is_cast_as_one_from_the_environment(self, tmp_path):
        found = settings_of(tmp_path, SECURE_HSTS_SECONDS_FILE=secret_file(tmp_path, "hsts", "31536000\n"),
                            TRUSTED_PROXIES_FILE=secret_file(tmp_path, "proxies", "10.0.0.0/8, unix\n"))
        assert (found["SECURE_HSTS_SECONDS"], found["TRUSTED_PROXIES"]) == (31536000, ["10.0.0.0/8", "unix"])


class TestSecretKeyFile:
    def test_an_existing_file_holds_the_key_as_any_setting_file_is_read(self, tmp_path):
        path = secret_file(tmp_path, "secret-key", GOOD_KEY + "\n")
        for database in ({}, {"DATABASE_URL": POSTGRES}):
            found = settings_of(tmp_path, DEBUG="false", SECRET_KEY_FILE=path, **database)
            assert (found["SECRET_KEY"], found["SECRET_KEY_FILE"]) == (GOOD_KEY, None)
        assert not (tmp_path / "var").exists()  # the settings read, and write nothing

    def test_the_key_in_a_file_is_refused_as_one_in_the_environment(self, tmp_path):
        short = secret_file(tmp_path, "short", "short\n")
        assert "SECRET_KEY is 5 characters long, fewer than 50" in refusal(tmp_path, DEBUG="false",
                                                                            SECRET_KEY_FILE=short)
        empty = secret_file(tmp_path, "empty", "\n")
        assert refusal(tmp_path, DEBUG="false", SECRET_KEY_FILE=empty).startswith(
            f"SECRET_KEY_FILE names {empty}, which is empty")

    def test_on_sqlite_a_file_not_there_yet_is_made_by_the_first_process_and_read_by_the_next(self, tmp_path):
        """The settings name it (and write nothing); the process start makes it, random and readable by its
        owner alone; once it is there, the settings read it as any NAME_FILE, the same key."""
        path = tmp_path / "mounted" / "secret-key"
        found = settings_of(tmp_path, DEBUG="false", SECRET_KEY_FILE=str(path))
        assert (found["SECRET_KEY"], found["SECRET_KEY_FILE"]) == ("", path) and not path.exists()
        key = kept_secret_key(path)
        assert len(key) >= 50 and stat.S_IMODE(path.stat().st_mode) == 0o600
        assert not (tmp_path / "var" / "secret-key").exists()  # the file named, not the default one
        again = settings_of(tmp_path, DEBUG="false", SECRET_KEY_FILE=str(path))
        assert (again["SECRET_KEY"], again["SECRET_KEY_FILE"]) == (key, None)

    def test_on_postgresql_a_missing_file_is_refused_not_made_per_host(self, tmp_path):
        path = tmp_path / "mounted" / "secret-key"
        message = refusal(tmp_path, DEBUG="false", DATABASE_URL=POSTGRES, SECRET_KEY_FILE=str(path))
        assert message.startswith(f"SECRET_KEY_FILE names {path}, which does not exist. On PostgreSQL")
        assert not path.exists()

    def test_processes_of_one_install_sign_with_the_key_of_the_file(self, tmp_path):
        """A fresh process each: the first makes the key in the named file, the second reads it from there."""
        path = tmp_path / "mounted" / "secret-key"
        code = ("import hashlib, django; django.setup(); from django.conf import settings; "
                "print(hashlib.sha256(settings.SECRET_KEY.encode()).hexdigest())")
        env = {k: v for k, v in os.environ.items() if k not in SETTINGS_VARS}
        env.update(DJANGO_SETTINGS_MODULE="gateway.settings", GATEWAY_VAR_DIR=str(tmp_path / "var"), DEBUG="false",
                   SECRET_KEY_FILE=str(path))
        first, second = (subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True,
                                        text=True, timeout=120) for _ in range(2))
        assert first.returncode == 0 and second.returncode == 0, first.stderr + second.stderr
        key = path.read_text()
        assert first.stdout.split()[-1] == second.stdout.split()[-1] == hashlib.sha256(key.encode()).hexdigest()
        assert key not in first.stdout + first.stderr + second.stdout + second.stderr
