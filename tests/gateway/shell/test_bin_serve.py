"""bin/serve, as a laptop runs it: in a copy of the repository, on a free PORT, in a session of
its own. It answers; Ctrl-C (SIGINT to its process group, as a terminal sends it) leaves no process
of its session behind within 15 s, Celery's pool and beat included, each stopped by itself (nothing is
killed); a second start, with nothing changed, runs neither pip nor a migration and answers within 10 s;
and started with SIGINT ignored (a background job of a script), it says so and stops on SIGTERM.

The copy's .venv is the test run's environment seen through symlinks, except for `pip`: a stand-in
that only notes that it was called (everything is installed already, and nothing may be)."""

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from tests.servers import free_port

# It promises a shutdown within 15 s and a start from a fresh copy: figures for a machine to itself (tests/parallel.py)
pytestmark = pytest.mark.serial

REPO = Path(__file__).resolve().parents[3]
LEFT_OUT = {".venv", "var", "__pycache__", ".git", ".pytest_cache"}
STOPPED_WITHIN = 15.0  # bin/serve's STOP_SECONDS: the worker finishes its tasks and stops its pool first
# With nothing to install or migrate: a bound against a start that hangs or installs again, not a timing claim
# (the same start took 7 s on a quiet machine and 11-13 s on a slower one, the commit before batches alike).
STARTED_WITHIN = 30.0


def repository_files() -> list[str]:
    """The files a clone has, plus the ones not committed yet (not those .gitignore leaves out)."""
    try:
        listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=REPO,
                                capture_output=True, check=True, timeout=30).stdout.decode().split("\0")
    except (OSError, subprocess.CalledProcessError):  # not a git checkout: every file but the local state
        listed = [str(p.relative_to(REPO)) for p in REPO.rglob("*")
                  if p.is_file() and not LEFT_OUT & set(p.relative_to(REPO).parts)]
    return [name for name in listed if name and (REPO / name).is_file()]


def environment_with_a_pip_that_notes_its_calls(venv: Path) -> Path:
    """`venv` as this run's environment (its own pyvenv.cfg, the rest symlinked), whose bin/pip
    appends its arguments to `venv`/pip-calls instead of installing."""
    real = Path(sys.prefix)
    (venv / "bin").mkdir(parents=True)
    shutil.copy2(real / "pyvenv.cfg", venv / "pyvenv.cfg")
    for entry in real.iterdir():
        if entry.name not in ("bin", "pyvenv.cfg", "requirements.sha256"):
            (venv / entry.name).symlink_to(entry)
    for entry in (real / "bin").iterdir():
        if not entry.name.startswith("pip"):
            (venv / "bin" / entry.name).symlink_to(entry)
    pip = venv / "bin" / "pip"
    pip.write_text(f'#!/bin/sh\necho "$*" >> "{venv / "pip-calls"}"\n')
    pip.chmod(0o755)
    return venv / "pip-calls"


@pytest.fixture(scope="module")
def copy(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("serve") / "gateway"
    for name in repository_files():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(REPO / name, root / name)
    environment_with_a_pip_that_notes_its_calls(root / ".venv")
    return root


def pip_calls(copy: Path) -> list[str]:
    calls = copy / ".venv" / "pip-calls"
    return calls.read_text().splitlines() if calls.exists() else []


def session_processes(sid: int) -> dict[int, str]:
    """The live processes of session `sid` (zombies are dead, only not yet collected)."""
    found = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
            cmdline = Path(f"/proc/{entry}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        state, _ppid, _pgrp, session = stat.rsplit(")", 1)[1].split()[:4]
        if int(session) == sid and state != "Z":
            found[int(entry)] = cmdline
    return found


def _ignore_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # as a shell leaves it in a script's background job


def _default_sigint() -> None:
    """As a terminal starts it, whatever this test run inherited (a run started in the background by a
    script ignores SIGINT, and bin/serve would, rightly, not hear Ctrl-C)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


class Serve:
    def __init__(self, copy: Path, var: Path, *, sigint_ignored: bool = False) -> None:
        self.port = free_port()
        env = {k: v for k, v in os.environ.items() if k not in (
            "DATABASE_URL", "REDIS_URL", "CELERY_BROKER_URL", "SECRET_KEY", "USAGE_SPOOL_DIR",
            "PROMETHEUS_MULTIPROC_DIR")}
        env.update(GATEWAY_VAR_DIR=str(var), PORT=str(self.port))
        env.pop("HOST", None)  # the default: 127.0.0.1
        self.log = var.parent / f"serve-{self.port}.log"
        self.began = time.monotonic()
        with open(self.log, "wb") as out:
            self.process = subprocess.Popen([str(copy / "bin" / "serve")], cwd=copy, env=env, stdin=subprocess.DEVNULL,
                                            stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
                                            preexec_fn=_ignore_sigint if sigint_ignored else _default_sigint)

    @property
    def output(self) -> str:
        return self.log.read_text(errors="replace")

    def wait_until_it_answers(self, within: float) -> float:
        deadline = self.began + within
        while time.monotonic() < deadline:
            assert self.process.poll() is None, self.output
            try:
                if httpx.get(f"http://127.0.0.1:{self.port}/admin/login/", timeout=2).status_code == 200:
                    return time.monotonic() - self.began
            except httpx.HTTPError:
                pass
            time.sleep(0.1)
        pytest.fail(f"bin/serve did not answer within {within} s:\n{self.output}")

    def wait_for_celery(self, within: float = 30) -> None:
        """The worker ready, with its pool of 2 and beat: four Celery processes in the session."""
        deadline = time.monotonic() + within
        while time.monotonic() < deadline:
            celery = [c for c in session_processes(self.process.pid).values() if "celery" in c]
            if "ready." in self.output and len(celery) >= 4:
                return
            time.sleep(0.1)
        pytest.fail(f"the Celery worker did not start:\n{self.output}")

    def interrupt(self, how: signal.Signals = signal.SIGINT) -> tuple[float, dict[int, str]]:
        """Ctrl-C (or `how` to the script alone); how long until no process of the session is left, and
        what is left then."""
        sent = time.monotonic()
        if how == signal.SIGINT:
            os.killpg(self.process.pid, signal.SIGINT)
        else:
            os.kill(self.process.pid, how)
        left = session_processes(self.process.pid)
        while left and time.monotonic() - sent < STOPPED_WITHIN:
            time.sleep(0.1)
            left = session_processes(self.process.pid)
        return time.monotonic() - sent, left

    def clean_up(self) -> None:
        for pid in session_processes(self.process.pid):  # only what this test started
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass


def run_and_stop(copy: Path, var: Path, *, answer_within: float, how: signal.Signals = signal.SIGINT,
                 sigint_ignored: bool = False) -> tuple[Serve, float]:
    serve = Serve(copy, var, sigint_ignored=sigint_ignored)
    try:
        answered = serve.wait_until_it_answers(answer_within)
        serve.wait_for_celery()
        took, left = serve.interrupt(how)
        assert left == {}, f"left after {took:.1f} s: {left}\n{serve.output}"
        assert serve.process.wait(timeout=5) == 128 + how  # stopped by that signal
        assert "killed" not in serve.output, f"a process had to be killed:\n{serve.output}"
    finally:
        serve.clean_up()
    return serve, answered


def test_it_starts_stops_every_process_on_ctrl_c_and_starts_again_without_pip(copy, tmp_path):
    var = tmp_path / "var"
    first, _ = run_and_stop(copy, var, answer_within=60)  # installs (a new .venv) and migrates
    assert pip_calls(copy) == ["install --quiet --disable-pip-version-check -r requirements.txt"]
    assert "Applying accounts.0001_initial... OK" in first.output
    assert f"Gateway listening on http://127.0.0.1:{first.port} " in first.output
    assert "Created the operator account." in first.output and "operator@localhost" in first.output
    assert "`.venv/bin/python manage.py changepassword operator@localhost`" in first.output
    assert "already exists" not in first.output  # the cache table is made by a migration: nothing to say
    assert "SIGINT is ignored" not in first.output

    second, answered = run_and_stop(copy, var, answer_within=60)
    assert len(pip_calls(copy)) == 1  # requirements.txt is the one installed: no pip
    assert "Applying " not in second.output  # no migration to run
    assert "operator@localhost" in second.output  # the login is told again
    assert answered < STARTED_WITHIN, f"the second start took {answered:.1f} s"


def test_started_with_sigint_ignored_it_says_to_use_sigterm_and_stops_on_it(copy, tmp_path):
    var = tmp_path / "var"
    serve, _ = run_and_stop(copy, var, answer_within=60, how=signal.SIGTERM, sigint_ignored=True)
    assert f"SIGINT is ignored here (started in the background by a script): stop it with `kill {serve.process.pid}`" \
        in serve.output
