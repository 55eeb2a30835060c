"""What the deployment manifests' tests share: the Procfile's processes, the commands the image knows
(deploy/container/entrypoint's, as the image's contract gives them), the settings the product reads, and
the Kustomize directories rendered by kubectl."""

import functools
import re
import subprocess
from pathlib import Path

import yaml

from tests.gateway.shell.test_procfile import processes as procfile  # the Procfile's entries, by name

REPO = Path(__file__).resolve().parents[2]
DEPLOY = REPO / "deploy"
KUSTOMIZE = DEPLOY / "kubernetes"
KUSTOMIZE_DIRS = ("base", "overlays/production", "overlays/sentinel", "overlays/pgbouncer")
KUBECTL = "/usr/bin/kubectl"
IMAGE = "model-gateway"
UID = 10001
VAR_DIR = "/var/lib/gateway"

# Besides the settings of docs/configuration.md: Celery's own variable for the worker's --concurrency
# (celery's command line reads CELERY_<COMMAND>_<OPTION>), and, in Kubernetes, the passwords put into
# DATABASE_URL and REDIS_URL by $(NAME).
OTHER_VARIABLES = {"CELERY_WORKER_CONCURRENCY", "OPENBLAS_NUM_THREADS", "DATABASE_PASSWORD", "REDIS_PASSWORD"}


def image_commands() -> set[str]:
    """The first arguments the image's entrypoint takes: a Procfile process (but `release`, which is
    `migrate`), and migrate, applyconfig, createaccount, manage."""
    return (set(procfile()) - {"release"}) | {"migrate", "applyconfig", "createaccount", "manage"}


def known_settings() -> set[str]:
    """Every variable a manifest may give a gateway process: the settings docs/configuration.md lists (first
    column of its tables), each also as NAME_FILE, the Procfile's own variables, and OTHER_VARIABLES."""
    text = (REPO / "docs" / "configuration.md").read_text()
    names = set(re.findall(r"^\| `([A-Z][A-Z0-9_]*)`", text, flags=re.M))
    names |= {f"{name}_FILE" for name in names}
    names |= set(re.findall(r"\$\{([A-Z][A-Z0-9_]*)", (REPO / "Procfile").read_text()))
    return names | OTHER_VARIABLES


def compose() -> dict:
    return yaml.safe_load((DEPLOY / "compose.yaml").read_text())


@functools.cache
def rendered(directory: str) -> tuple[dict, ...]:
    """The objects `kubectl kustomize` makes of deploy/kubernetes/<directory>."""
    done = subprocess.run([KUBECTL, "kustomize", str(KUSTOMIZE / directory)], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stderr
    return tuple(doc for doc in yaml.safe_load_all(done.stdout) if doc)


def kinds(objects, kind: str) -> dict[str, dict]:
    return {o["metadata"]["name"]: o for o in objects if o["kind"] == kind}


def workloads(objects) -> dict[str, dict]:
    """The Deployments and the Job, by name."""
    return {o["metadata"]["name"]: o for o in objects if o["kind"] in ("Deployment", "Job")}


def gateway_container(workload: dict) -> dict:
    (container,) = workload["spec"]["template"]["spec"]["containers"]
    return container


def environment(objects, workload: dict) -> dict[str, str]:
    """The container's variables as the kubelet makes them: the ConfigMaps of envFrom, then env, each
    $(NAME) expanded from what is above it; a Secret's value is `<secret:KEY>`."""
    container = gateway_container(workload)
    maps = kinds(objects, "ConfigMap")
    values = {}
    for source in container.get("envFrom", []):
        values.update(maps[source["configMapRef"]["name"]]["data"])
    for item in container.get("env", []):
        if "valueFrom" in item:
            values[item["name"]] = f"<secret:{item['valueFrom']['secretKeyRef']['key']}>"
        else:
            values[item["name"]] = re.sub(r"\$\(([A-Za-z_][A-Za-z0-9_]*)\)",
                                          lambda m: values.get(m[1], m[0]), item["value"])
    return values
