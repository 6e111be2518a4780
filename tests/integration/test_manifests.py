"""The kustomize base in manifests/: what it holds, and that the real API server accepts every
object of its render as written (server-side dry run), dropping no field."""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any

import pytest

from operators.components import COMPONENTS
from operators.kube.api import ConflictError, KubeAPI, resource_of
from operators.kube.manifests import ManifestError, apply_order, render
from operators.settings import env_name

ROOT = Path(__file__).resolve().parents[2]
MANIFESTS = ROOT / "manifests"


@pytest.fixture(scope="module")
def objects() -> list[dict[str, Any]]:
    return render(MANIFESTS)


def _of(objects: list[dict[str, Any]], kind: str) -> dict[str, dict[str, Any]]:
    return {o["metadata"]["name"]: o for o in objects if o["kind"] == kind}


def _component(workload: dict[str, Any]) -> str:
    args = workload["spec"]["template"]["spec"]["containers"][0]["args"]
    assert args[0] == "run", workload["metadata"]["name"]
    return str(args[1])


def missing_fields(ours: Any, theirs: Any, path: str = "") -> list[str]:
    """Paths present in ``ours`` but absent or different in the server's answer."""
    if isinstance(ours, dict):
        if not isinstance(theirs, dict):
            return [path or "."]
        return [
            p
            for key, value in ours.items()
            for p in missing_fields(value, theirs.get(key), f"{path}.{key}")
        ]
    if isinstance(ours, list):
        if not isinstance(theirs, list) or len(theirs) != len(ours):
            return [path]
        return [p for i, v in enumerate(ours) for p in missing_fields(v, theirs[i], f"{path}[{i}]")]
    return [] if ours == theirs else [f"{path}: {ours!r} != {theirs!r}"]


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


def test_replicas_strategy_and_leader_election(objects: list[dict[str, Any]]) -> None:
    for name, deployment in _of(objects, "Deployment").items():
        spec = deployment["spec"]
        args = spec["template"]["spec"]["containers"][0]["args"]
        if _component(deployment) == "scheduler":
            assert spec["replicas"] == 2
            assert "--leader-elect" in args
        else:
            assert spec["replicas"] == 1, name
            assert spec["strategy"]["type"] == "Recreate", name
        labels = spec["template"]["metadata"]["labels"]
        assert spec["selector"]["matchLabels"].items() <= labels.items()


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
            assert binding["roleRef"]["name"] in roles
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
    problems = {}
    namespaces = [o for o in objects if o["kind"] == "Namespace"]
    for namespace in namespaces:
        created = await kube.create(namespace, dry_run=True)
        assert created["metadata"]["name"] == namespace["metadata"]["name"]
    # Namespaced objects need their namespaces to exist, even for a dry run.
    for namespace in [*namespaces, {**namespaces[0], "metadata": {"name": "default"}}]:
        with contextlib.suppress(ConflictError):
            await kube.create(namespace)
    for obj in apply_order(objects):
        if obj["kind"] == "Namespace":
            continue
        try:
            created = await kube.create(obj, dry_run=True)
        except ConflictError:  # installed by an earlier test (the CRD): a dry-run update
            meta = obj["metadata"]
            current = await kube.get(obj["kind"], meta["name"], meta.get("namespace"))
            version = current["metadata"]["resourceVersion"]
            update = {**obj, "metadata": {**meta, "resourceVersion": version}}
            created = await kube.call(
                "PUT",
                resource_of(obj["kind"]).path(meta.get("namespace"), meta["name"]),
                body=update,
                query={"dryRun": "All"},
            )
        missing = missing_fields(obj, created)
        if missing:
            problems[f"{obj['kind']}/{obj['metadata']['name']}"] = missing
    assert not problems
