"""The Procfile's processes: `release` brings a fresh database up to date before `web`, `worker`
and `beat` start on it (docs/deploying.md)."""

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]


def processes() -> dict[str, str]:
    entries = {}
    for line in (REPO / "Procfile").read_text().splitlines():
        if line.strip() and not line.lstrip().startswith("#"):
            name, _, command = line.partition(":")
            entries[name.strip()] = command.strip()
    return entries


def test_it_has_a_release_web_worker_batch_worker_and_beat():
    entries = processes()
    assert set(entries) == {"release", "web", "worker", "batch-worker", "beat"}
    assert entries["batch-worker"].startswith("celery -A gateway worker -Q batches ")  # its own queue only
    assert "-Q" not in entries["worker"]  # the live work's queue, never a batch's
    assert entries["release"] == "python manage.py migrate --noinput"
    assert entries["beat"].startswith("celery -A gateway beat")


def test_release_migrates_a_fresh_database_and_changes_nothing_the_second_time(tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "REDIS_URL", "CELERY_BROKER_URL")}
    env.update(GATEWAY_VAR_DIR=str(tmp_path), PATH=f"{Path(sys.executable).parent}{os.pathsep}{env['PATH']}")

    def release() -> subprocess.CompletedProcess:
        return subprocess.run(["sh", "-c", "exec " + processes()["release"]], cwd=REPO, env=env,
                              capture_output=True, text=True, timeout=120)

    first = release()
    assert first.returncode == 0, first.stderr
    assert "Applying accounts.0001_initial... OK" in first.stdout
    check = subprocess.run([sys.executable, "manage.py", "migrate", "--check"], cwd=REPO, env=env,
                           capture_output=True, text=True, timeout=120)
    assert check.returncode == 0, check.stdout + check.stderr  # nothing left unapplied
    second = release()
    assert second.returncode == 0, second.stderr
    assert "No migrations to apply." in second.stdout
