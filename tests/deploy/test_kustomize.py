"""deploy/kubernetes: the base and every overlay rendered by `kubectl kustomize` (kubectl's built-in Kustomize),
every object valid against the Kubernetes API's JSON schemas (kubernetes-validate, which carries them: no
cluster, no network), and what the manifests promise: the processes the image knows, beat one and never two,
the migration Job alone first, probes, resources, a non-root read-only container, Secrets referenced and never
defined, and each overlay changing what it says."""

import re
import subprocess
from urllib.parse import urlsplit

import kubernetes_validate
import pytest

from tests.deploy.manifests import (
    IMAGE,
    KUBECTL,
    KUSTOMIZE_DIRS,
    UID,
    VAR_DIR,
    environment,
    gateway_container,
    image_commands,
    kinds,
    known_settings,
    procfile,
    rendered,
    workloads,
)

# the oldest Kubernetes release still maintained when these manifests were written
KUBERNETES = "1.32"
PROCESSES = {"gateway-web": "web", "gateway-worker": "worker", "gateway-batch-worker": "batch-worker",
             "gateway-beat": "beat", "gateway-migrate": "migrate"}


def test_kubectl_has_a_kustomize_that_reads_these_manifests():
    """Debian's kubernetes-client (kubectl 1.20, Kustomize 2) knows neither `labels` nor patches with a target."""
    version = subprocess.run([KUBECTL, "version", "--client"], capture_output=True, text=True, timeout=30).stdout
    found = re.search(r"Kustomize Version: v(\d+)\.", version)
    assert found and int(found[1]) >= 5, version


@pytest.mark.parametrize("directory", KUSTOMIZE_DIRS)
def test_every_object_is_valid_against_the_kubernetes_schemas(directory):
    objects = rendered(directory)
    assert {o["kind"] for o in objects} >= {"ConfigMap", "Service", "Deployment", "Job", "PodDisruptionBudget",
                                           "HorizontalPodAutoscaler", "NetworkPolicy"}
    for item in objects:
        try:
            kubernetes_validate.validate(item, KUBERNETES, strict=True)
        except kubernetes_validate.ValidationError as error:
            pytest.fail(f"{item['kind']} {item['metadata']['name']}: {error.message} at {list(error.path)}")


def test_the_validator_refuses_what_kubernetes_would():
    web = kinds(rendered("base"), "Deployment")["gateway-web"]
    broken = {**web, "spec": {**web["spec"], "replica": 2}}
    with pytest.raises(kubernetes_validate.ValidationError, match="'replica' was unexpected"):
        kubernetes_validate.validate(broken, KUBERNETES, strict=True)


@pytest.mark.parametrize("directory", KUSTOMIZE_DIRS)
def test_each_process_runs_a_command_the_image_knows_from_the_one_image(directory):
    found = workloads(rendered(directory))
    assert set(found) == set(PROCESSES)
    assert set(PROCESSES.values()) == (set(procfile()) - {"release"}) | {"migrate"}
    images = set()
    for name, workload in found.items():
        container = gateway_container(workload)
        assert container["args"] == [PROCESSES[name]] and container["args"][0] in image_commands(), name
        assert "command" not in container, name  # the image's entrypoint runs it
        images.add(container["image"].rsplit(":", 1)[0].rsplit("/", 1)[-1])
    assert images == {IMAGE}
    assert len({gateway_container(w)["image"] for w in found.values()}) == 1


@pytest.mark.parametrize("directory", KUSTOMIZE_DIRS)
def test_beat_is_one_and_never_two(directory):
    beat = kinds(rendered(directory), "Deployment")["gateway-beat"]
    assert beat["spec"]["replicas"] == 1
    assert beat["spec"]["strategy"] == {"type": "Recreate"}
    assert not [h for h in kinds(rendered(directory), "HorizontalPodAutoscaler").values()
                if h["spec"]["scaleTargetRef"]["name"] == "gateway-beat"]


@pytest.mark.parametrize("directory", KUSTOMIZE_DIRS)
def test_the_migration_job_and_what_it_needs_are_applied_alone_first(directory):
    """`kubectl apply -k DIR -l model-gateway/phase=migrate` takes the settings, the external services, the
    network policy and the Job, and no process: the web and the workers roll only after it."""
    objects = rendered(directory)
    first = {(o["kind"], o["metadata"]["name"]) for o in objects
             if o["metadata"].get("labels", {}).get("model-gateway/phase") == "migrate"}
    settings = next(name for kind, name in first if kind == "ConfigMap")
    assert settings.startswith("gateway-settings-")  # the generator's name, changed with its content
    assert {kind for kind, _ in first} <= {"ConfigMap", "Service", "NetworkPolicy", "Job"}
    assert ("Job", "gateway-migrate") in first and ("NetworkPolicy", "gateway-egress") in first
    job = kinds(objects, "Job")["gateway-migrate"]
    assert gateway_container(job)["args"] == ["migrate"]
    assert job["spec"]["template"]["spec"]["restartPolicy"] == "Never"
    url = urlsplit(environment(objects, job)["DATABASE_URL"])
    assert ("Service", url.hostname) in first


@pytest.mark.parametrize("directory", KUSTOMIZE_DIRS)
def test_the_web_is_probed_scaled_on_cpu_and_kept_available(directory):
    objects = rendered(directory)
    web = kinds(objects, "Deployment")["gateway-web"]
    container = gateway_container(web)
    assert container["ports"] == [{"name": "http", "containerPort": 8000}]
    assert container["livenessProbe"]["httpGet"] == {"path": "/livez", "port": "http"}
    assert container["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "http"}
    assert container["startupProbe"]["httpGet"] == {"path": "/livez", "port": "http"}
    assert "replicas" not in web["spec"]  # the autoscaler's; an apply would reset them
    assert web["spec"]["strategy"]["rollingUpdate"] == {"maxSurge": 1, "maxUnavailable": 0}
    (hpa,) = kinds(objects, "HorizontalPodAutoscaler").values()
    assert hpa["apiVersion"] == "autoscaling/v2"
    assert hpa["spec"]["scaleTargetRef"] == {"apiVersion": "apps/v1", "kind": "Deployment", "name": "gateway-web"}
    assert hpa["spec"]["minReplicas"] == 2
    assert hpa["spec"]["metrics"] == [{"type": "Resource", "resource": {
        "name": "cpu", "target": {"type": "Utilization", "averageUtilization": 70}}}]
    (budget,) = kinds(objects, "PodDisruptionBudget").values()
    assert budget["spec"]["selector"] == web["spec"]["selector"] and budget["spec"]["minAvailable"] == 1
    (service,) = [s for s in kinds(objects, "Service").values() if s["spec"].get("type") != "ExternalName"]
    assert service["spec"]["selector"] == web["spec"]["selector"]["matchLabels"]
    assert service["spec"]["ports"] == [{"name": "http", "port": 8000, "targetPort": "http"}]
    # the workers open no port, so nothing probes them
    for name in ("gateway-worker", "gateway-batch-worker", "gateway-beat", "gateway-migrate"):
        container = gateway_container(workloads(objects)[name])
        assert not {"ports", "livenessProbe", "readinessProbe", "startupProbe"} & set(container), name


@pytest.mark.parametrize("directory", KUSTOMIZE_DIRS)
def test_every_container_has_resources_and_runs_as_uid_10001_on_a_read_only_root(directory):
    for name, workload in workloads(rendered(directory)).items():
        pod = workload["spec"]["template"]["spec"]
        assert pod["securityContext"]["runAsNonRoot"] is True and pod["securityContext"]["runAsUser"] == UID
        assert pod["automountServiceAccountToken"] is False
        if workload["kind"] == "Deployment":
            pod_labels = workload["spec"]["template"]["metadata"]["labels"]
            assert workload["spec"]["selector"]["matchLabels"].items() <= pod_labels.items(), name
        for container in pod["containers"] + pod.get("initContainers", []):
            resources = container["resources"]
            assert set(resources["requests"]) == set(resources["limits"]) == {"cpu", "memory"}, name
            context = container["securityContext"]
            assert context["runAsNonRoot"] is True and context["runAsUser"] == UID, name
            assert context["readOnlyRootFilesystem"] is True and context["allowPrivilegeEscalation"] is False
            assert context["capabilities"] == {"drop": ["ALL"]}
            mounts = {m["mountPath"]: m["name"] for m in container["volumeMounts"]}
            volumes = {v["name"]: v for v in pod["volumes"]}
            assert "emptyDir" in volumes[mounts[VAR_DIR]] and "emptyDir" in volumes[mounts["/tmp"]], name


@pytest.mark.parametrize("directory", KUSTOMIZE_DIRS)
def test_secrets_are_referenced_by_name_and_never_defined(directory):
    objects = rendered(directory)
    assert not kinds(objects, "Secret")
    settings = known_settings()
    for config in kinds(objects, "ConfigMap").values():
        assert set(config["data"]) <= settings, set(config["data"]) - settings
        assert not {"SECRET_KEY", "DATABASE_URL", "REDIS_URL"} & set(config["data"])
        assert not [v for v in config["data"].values() if re.search(r"\w+://[^/\s:]*:[^@\s/]+@", v)]
    for name, workload in workloads(objects).items():
        pod = workload["spec"]["template"]["spec"]
        container = gateway_container(workload)
        assert {v["name"]: v["secret"]["secretName"] for v in pod["volumes"] if "secret" in v} == {
            "secrets": "gateway-secrets"}
        assert {"name": "secrets", "mountPath": "/run/secrets/gateway", "readOnly": True} in container["volumeMounts"]
        for item in container["env"]:
            assert item["name"] in settings, (name, item["name"])
            if "valueFrom" in item:
                assert item["valueFrom"]["secretKeyRef"]["name"] == "gateway-secrets"
            else:
                assert not re.search(r"://[^/\s:]*:(?!\$\()[^@\s/]+@", item["value"]), (name, item)
        env = environment(objects, workload)
        assert env["SECRET_KEY_FILE"] == "/run/secrets/gateway/secret-key"
        assert urlsplit(env["DATABASE_URL"]).password == "<secret:database-password>", name
        assert urlsplit(env["REDIS_URL"]).password == "<secret:redis-password>", name
        # every $(NAME) names a variable above it, or Kubernetes leaves it as it is
        assert "$(" not in "".join(env.values()), (name, env)


@pytest.mark.parametrize("directory", KUSTOMIZE_DIRS)
def test_the_network_policies(directory):
    objects = rendered(directory)
    policies = kinds(objects, "NetworkPolicy")
    egress = policies["gateway-egress"]["spec"]
    assert egress["podSelector"] == {"matchLabels": {"app.kubernetes.io/name": "model-gateway"}}
    assert egress["policyTypes"] == ["Ingress", "Egress"] and "ingress" not in egress  # nothing comes in...
    ports = {(p["protocol"], p["port"]) for rule in egress["egress"] for p in rule["ports"]}
    assert {("UDP", 53), ("TCP", 53), ("TCP", 5432), ("TCP", 6379), ("TCP", 443), ("TCP", 80)} <= ports
    web = policies["gateway-web-ingress"]["spec"]  # ...but to the web's port
    assert web["podSelector"] == kinds(objects, "Deployment")["gateway-web"]["spec"]["selector"]
    assert web["ingress"] == [{"ports": [{"protocol": "TCP", "port": 8000}]}]
    for name, workload in workloads(objects).items():
        labels = workload["spec"]["template"]["metadata"]["labels"]
        assert labels["app.kubernetes.io/name"] == "model-gateway", name


def environments(directory: str) -> dict[str, dict[str, str]]:
    objects = rendered(directory)
    return {name: environment(objects, workload) for name, workload in workloads(objects).items()}


def test_production_reaches_postgresql_and_redis_by_their_external_services():
    objects = rendered("overlays/production")
    services = kinds(objects, "Service")
    assert services["postgres"]["spec"]["type"] == services["redis"]["spec"]["type"] == "ExternalName"
    assert {o["metadata"]["namespace"] for o in objects} == {"model-gateway"}
    for name, env in environments("overlays/production").items():
        database, redis = urlsplit(env["DATABASE_URL"]), urlsplit(env["REDIS_URL"])
        assert (database.hostname, database.port, database.username) == ("postgres", 5432, "gateway"), name
        assert (redis.hostname, redis.port, redis.path) == ("redis", 6379, "/0"), name
        assert "REDIS_SENTINELS" not in env and env.get("DATABASE_POOLER", "none") == "none"


def test_the_sentinel_overlay_gives_the_sentinels_and_the_services_name():
    objects = rendered("overlays/sentinel")
    assert {o["metadata"]["namespace"] for o in objects} == {"model-gateway"}
    assert "redis" not in kinds(objects, "Service")
    for name, env in environments("overlays/sentinel").items():
        sentinels = env["REDIS_SENTINELS"].split(",")
        assert len(sentinels) == 3 and all(s.endswith(":26379") for s in sentinels), name
        redis = urlsplit(env["REDIS_URL"])
        assert (redis.scheme, redis.hostname, redis.port, redis.path) == ("redis", "mymaster", None, "/0"), name
        assert redis.hostname == env["REDIS_SENTINEL_SERVICE"]
        assert redis.password == "<secret:redis-password>"
        assert env["REDIS_SENTINEL_PASSWORD"] == "<secret:redis-sentinel-password>"
    optional = [item for workload in workloads(objects).values() for item in gateway_container(workload)["env"]
                if item["name"] == "REDIS_SENTINEL_PASSWORD"]
    assert len(optional) == 5 and all(i["valueFrom"]["secretKeyRef"]["optional"] is True for i in optional)
    ports = {p["port"] for rule in kinds(objects, "NetworkPolicy")["gateway-egress"]["spec"]["egress"]
             for p in rule["ports"]}
    assert 26379 in ports


def test_the_pgbouncer_overlay_puts_the_processes_on_the_pooler_and_the_migration_on_postgresql():
    objects = rendered("overlays/pgbouncer")
    assert {o["metadata"]["namespace"] for o in objects} == {"model-gateway"}
    assert kinds(objects, "Service")["pgbouncer"]["spec"]["type"] == "ExternalName"
    found = environments("overlays/pgbouncer")
    for name in ("gateway-web", "gateway-worker", "gateway-batch-worker", "gateway-beat"):
        database = urlsplit(found[name]["DATABASE_URL"])
        assert (database.hostname, database.port, database.path) == ("pgbouncer", 6432, "/gateway"), name
        assert found[name]["DATABASE_POOLER"] == "transaction", name
    migrate = found["gateway-migrate"]
    assert urlsplit(migrate["DATABASE_URL"])[1:3] == urlsplit(found["gateway-web"]["DATABASE_URL"].replace(
        "@pgbouncer:6432/", "@postgres:5432/"))[1:3]
    assert (urlsplit(migrate["DATABASE_URL"]).hostname, migrate["DATABASE_POOLER"]) == ("postgres", "none")
    ports = {p["port"] for rule in kinds(objects, "NetworkPolicy")["gateway-egress"]["spec"]["egress"]
             for p in rule["ports"]}
    assert 6432 in ports


def test_the_overlays_change_nothing_else_of_the_processes():
    """Besides what each says it changes, an overlay's processes have the production overlay's settings."""
    production = environments("overlays/production")
    changed = {"overlays/sentinel": {"REDIS_URL", "REDIS_SENTINELS", "REDIS_SENTINEL_SERVICE",
                                     "REDIS_SENTINEL_PASSWORD"},
               "overlays/pgbouncer": {"DATABASE_URL", "DATABASE_POOLER"}}
    for directory, names in changed.items():
        for name, env in environments(directory).items():
            assert {k: v for k, v in env.items() if k not in names} == {
                k: v for k, v in production[name].items() if k not in names}, (directory, name)
