"""The kustomize base in manifests/ and the alternative manifests/claims (both claim controllers
in one Deployment): what they hold, and that the real API server accepts every object of their
render as written (server-side dry run), dropping no field."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from operators.components import COMPONENTS
from operators.kube.api import KubeAPI, resource_of
from operators.localcluster.manifests import ManifestError, render
from operators.settings import env_name
from tests.integration.helpers import dry_run_all

ROOT = Path(__file__).resolve().parents[2]
MANIFESTS = ROOT / "manifests"


@pytest.fixture(scope="module")
def objects() -> list[dict[str, Any]]:
    return render(MANIFESTS) + render(MANIFESTS / "claims")


def _of(objects: list[dict[str, Any]], kind: str) -> dict[str, dict[str, Any]]:
    return {o["metadata"]["name"]: o for o in objects if o["kind"] == kind}


def _component(workload: dict[str, Any]) -> str:
    args = workload["spec"]["template"]["spec"]["containers"][0]["args"]
    assert args[0] == "run", workload["metadata"]["name"]
    return str(args[1])


def test_the_base_holds_every_component(objects: list[dict[str, Any]]) -> None:
    deployments = _of(objects, "Deployment")
    components = {_component(d) for d in deployments.values()}
    assert {"claim-templates", "reservations", "scheduler", "pool-validator"} <= components
    assert {"fabric", "fabric-manager-sim"} <= components
    assert {_component(d) for d in _of(objects, "DaemonSet").values()} == {"driver"}
    assert "kopf-dra" in _of(objects, "Namespace")
    assert "resourcepoolstatuses.dra.kopf-dra.io" in _of(objects, "CustomResourceDefinition")
    assert "gpu.example.kopf-dra.io" in _of(objects, "DeviceClass")
    # Everything namespaced lives in kopf-dra, except the pool validator's Events Role.
    for obj in objects:
        if resource_of(obj["kind"]).namespaced and obj["kind"] not in ("Role", "RoleBinding"):
            assert obj["metadata"]["namespace"] == "kopf-dra", obj["metadata"]["name"]


def test_replicas_strategy_leader_election_and_disruption_budgets(
    objects: list[dict[str, Any]],
) -> None:
    """Every kopf operator: two replicas campaigning for its Lease, a rolling update that keeps
    one, spread over nodes, and a PodDisruptionBudget. The simulated fabric manager: one
    replica (it stands for one piece of hardware), replaced, never overlapped."""
    budgets = _of(objects, "PodDisruptionBudget")
    covered = set()
    for name, deployment in _of(objects, "Deployment").items():
        spec = deployment["spec"]
        pod = spec["template"]["spec"]
        labels = spec["template"]["metadata"]["labels"]
        assert spec["selector"]["matchLabels"].items() <= labels.items()
        component = _component(deployment)
        if not COMPONENTS[component].controller:
            assert component == "fabric-manager-sim"
            assert spec["replicas"] == 1
            assert spec["strategy"]["type"] == "Recreate"
            continue
        assert spec["replicas"] == 2, name
        assert spec["strategy"] == {
            "type": "RollingUpdate",
            "rollingUpdate": {"maxUnavailable": 1, "maxSurge": 0},
        }, name
        env = {e["name"]: e for e in pod["containers"][0]["env"]}
        assert env[env_name("leader_elect")]["value"] == "true", name
        assert env[env_name("lease_namespace")]["value"] == "kopf-dra", name
        assert env[env_name("identity")]["valueFrom"] == {
            "fieldRef": {"fieldPath": "metadata.name"}
        }, name
        (spread,) = pod["topologySpreadConstraints"]
        assert spread["labelSelector"]["matchLabels"].items() <= labels.items()
        (budget,) = [
            b
            for b in budgets.values()
            if b["spec"]["selector"]["matchLabels"].items() <= labels.items()
        ]
        assert budget["spec"] == {
            "maxUnavailable": 1,
            "selector": spec["selector"],
        }, name
        covered.add(component)
    assert covered == {c.name for c in COMPONENTS.values() if c.controller}
    assert len(budgets) == len(covered)


def test_every_workload_runs_as_its_own_bound_service_account(
    objects: list[dict[str, Any]],
) -> None:
    accounts = set(_of(objects, "ServiceAccount"))
    bound = {
        s["name"]
        for kind in ("ClusterRoleBinding", "RoleBinding")
        for b in _of(objects, kind).values()
        for s in b["subjects"]
    }
    roles = set(_of(objects, "ClusterRole")) | set(_of(objects, "Role"))
    for kind in ("ClusterRoleBinding", "RoleBinding"):
        for binding in _of(objects, kind).values():
            role = binding["roleRef"]["name"]
            assert role in roles or role == "system:auth-delegator", role
    seen = set()
    for kind in ("Deployment", "DaemonSet"):
        for workload in _of(objects, kind).values():
            pod = workload["spec"]["template"]["spec"]
            if _component(workload) == "fabric-manager-sim":
                assert pod["automountServiceAccountToken"] is False
                continue
            account = pod["serviceAccountName"]
            assert account in accounts, account
            assert account in bound, account
            assert account not in seen, f"{account} is shared"
            seen.add(account)


def test_workload_environment_names_are_settings_of_the_component(
    objects: list[dict[str, Any]],
) -> None:
    """A typo in KOPF_DRA_* would silently fall back to a default: every name must exist."""
    for kind in ("Deployment", "DaemonSet"):
        for workload in _of(objects, kind).values():
            component = _component(workload)
            assert component in COMPONENTS
            known = {env_name(f) for f in COMPONENTS[component].settings_class().model_fields}
            container = workload["spec"]["template"]["spec"]["containers"][0]
            names = {e["name"] for e in container.get("env") or []}
            for source in container.get("envFrom") or []:
                names |= set(_config_map(objects, source["configMapRef"]["name"])["data"])
            assert names <= known, (component, names - known)


def _config_map(objects: list[dict[str, Any]], name: str) -> dict[str, Any]:
    return _of(objects, "ConfigMap")[name]


def _workload(objects: list[dict[str, Any]], component: str) -> dict[str, Any]:
    (found,) = [w for w in _of(objects, "Deployment").values() if _component(w) == component]
    return found


def _secret_mounts(pod: dict[str, Any], container: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Mount path -> the secret volume mounted there."""
    volumes = {v["name"]: v for v in pod.get("volumes") or [] if "secret" in v}
    return {
        m["mountPath"]: volumes[m["name"]]["secret"]
        for m in container.get("volumeMounts") or []
        if m["name"] in volumes
    }


def test_the_fabric_manager_and_controller_share_one_token_secret(
    objects: list[dict[str, Any]],
) -> None:
    manager = _workload(objects, "fabric-manager-sim")["spec"]["template"]["spec"]
    (manager_container,) = manager["containers"]
    args = dict(a.split("=", 1) for a in manager_container["args"] if a.startswith("--"))
    assert "--enable-faults" not in args
    manager_secrets = _secret_mounts(manager, manager_container)
    tokens_secret = manager_secrets[args["--tokens-dir"]]
    assert "items" not in tokens_secret  # every cluster's key

    controller = _workload(objects, "fabric")["spec"]["template"]["spec"]
    (container,) = controller["containers"]
    env = dict(_config_map(objects, "kopf-dra-fabric")["data"])
    token_file = Path(env["KOPF_DRA_MANAGER_TOKEN_FILE"])
    controller_secret = _secret_mounts(controller, container)[str(token_file.parent)]
    assert controller_secret["secretName"] == tokens_secret["secretName"]
    # Its own key only, as the file the setting names.
    assert [i["path"] for i in controller_secret["items"]] == [token_file.name]
    for pod, secret in ((manager, tokens_secret), (controller, controller_secret)):
        assert secret["defaultMode"] & 0o007 == 0  # not world-readable
        assert pod["securityContext"]["fsGroup"] == 65532  # the non-root uid's group reads it


def test_only_the_fabric_controller_may_reach_the_managers_api(
    objects: list[dict[str, Any]],
) -> None:
    manager = _workload(objects, "fabric-manager-sim")
    controller = _workload(objects, "fabric")
    (policy,) = [
        p
        for p in _of(objects, "NetworkPolicy").values()
        if "matchLabels" in p["spec"]["podSelector"]
        and p["spec"]["podSelector"]["matchLabels"].items()
        <= manager["spec"]["template"]["metadata"]["labels"].items()
    ]
    assert policy["spec"]["policyTypes"] == ["Ingress"]
    api_port = next(
        p["containerPort"]
        for p in manager["spec"]["template"]["spec"]["containers"][0]["ports"]
        if p["name"] == "http"
    )
    rules = [r for r in policy["spec"]["ingress"] if api_port in {p["port"] for p in r["ports"]}]
    (rule,) = rules
    (peer,) = rule["from"]
    assert set(peer) == {"podSelector"}  # pods of this namespace, no namespace or IP block
    selector = peer["podSelector"]["matchLabels"]
    assert selector.items() <= controller["spec"]["template"]["metadata"]["labels"].items()
    for other in list(_of(objects, "Deployment").values()) + list(
        _of(objects, "DaemonSet").values()
    ):
        if other is not controller:
            labels = other["spec"]["template"]["metadata"]["labels"]
            assert not selector.items() <= labels.items(), other["metadata"]["name"]


def test_metrics_services_select_pods_with_a_metrics_port(objects: list[dict[str, Any]]) -> None:
    workloads = list(_of(objects, "Deployment").values()) + list(_of(objects, "DaemonSet").values())
    for service in _of(objects, "Service").values():
        if not service["metadata"]["name"].endswith("-metrics"):
            continue
        selector = service["spec"]["selector"]
        matched = [
            w
            for w in workloads
            if selector.items() <= w["spec"]["template"]["metadata"]["labels"].items()
        ]
        assert matched, service["metadata"]["name"]
        for workload in matched:
            ports = workload["spec"]["template"]["spec"]["containers"][0]["ports"]
            assert any(p["name"] == "metrics" for p in ports)
            (port,) = service["spec"]["ports"]
            assert {p["containerPort"] for p in ports if p["name"] == "metrics"} == {port["port"]}


def _selects(policy: dict[str, Any], labels: dict[str, str]) -> bool:
    """Whether a NetworkPolicy's podSelector (matchLabels, ``In`` expressions) selects labels."""
    selector = policy["spec"]["podSelector"]
    if not (selector.get("matchLabels", {}).items() <= labels.items()):
        return False
    return all(
        e["operator"] == "In" and labels.get(e["key"]) in e["values"]
        for e in selector.get("matchExpressions", [])
    )


def test_metrics_are_secure_probed_and_reachable_only_by_labelled_scrapers(
    objects: list[dict[str, Any]],
) -> None:
    """Every component but the simulator: HTTPS metrics with delegated auth (its account bound
    to system:auth-delegator), both probes on the metrics port, and ingress to that port only
    from namespaces labelled kopf-dra.io/metrics-scraper=true."""
    delegators = {
        s["name"]
        for b in _of(objects, "ClusterRoleBinding").values()
        if b["roleRef"]["name"] == "system:auth-delegator"
        for s in b["subjects"]
    }
    reader = _of(objects, "ClusterRole")["kopf-dra-metrics-reader"]
    assert reader["rules"] == [{"nonResourceURLs": ["/metrics"], "verbs": ["get"]}]
    policies = list(_of(objects, "NetworkPolicy").values())
    workloads = list(_of(objects, "Deployment").values()) + list(_of(objects, "DaemonSet").values())
    checked = set()
    for workload in workloads:
        component = _component(workload)
        pod = workload["spec"]["template"]["spec"]
        container = pod["containers"][0]
        if component == "fabric-manager-sim":
            assert container["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "http"}
            continue
        env = {e["name"]: e.get("value") for e in container["env"]}
        assert env[env_name("metrics_secure")] == "true", component
        assert env[env_name("metrics_bind_address")].startswith(":"), component
        assert container["livenessProbe"]["httpGet"] == {
            "path": "/healthz",
            "port": "metrics",
            "scheme": "HTTPS",
        }, component
        assert container["readinessProbe"]["httpGet"]["path"] == "/readyz", component
        assert pod["serviceAccountName"] in delegators, component
        labels = workload["spec"]["template"]["metadata"]["labels"]
        selecting = [p for p in policies if _selects(p, labels)]
        assert selecting, f"{component}: no NetworkPolicy"
        rules = [r for p in selecting for r in p["spec"]["ingress"]]
        to_metrics = [r for r in rules if {"protocol": "TCP", "port": "metrics"} in r["ports"]]
        assert to_metrics, component
        for rule in to_metrics:
            assert rule["from"] == [
                {"namespaceSelector": {"matchLabels": {"kopf-dra.io/metrics-scraper": "true"}}}
            ], component
        checked.add(component)
    assert checked == {c for c in COMPONENTS if c != "fabric-manager-sim"}


def test_the_renderer_refuses_what_it_cannot_reproduce(tmp_path: Path) -> None:
    (tmp_path / "kustomization.yaml").write_text("resources: [a.yaml]\nnamePrefix: x-\n")
    with pytest.raises(ManifestError, match="namePrefix"):
        render(tmp_path)
    (tmp_path / "kustomization.yaml").write_text("resources: [missing.yaml]\n")
    with pytest.raises(ManifestError, match="does not exist"):
        render(tmp_path)


async def test_every_object_is_accepted_by_a_server_side_dry_run(
    kube: KubeAPI, objects: list[dict[str, Any]]
) -> None:
    assert await dry_run_all(kube, objects) == {}
