"""The Helm chart in charts/kopf-dra: rendered by the pinned helm (hack/helm), it is the
kustomize base object for object (so the two cannot drift), its values reach the objects, its
schema refuses bad values, and the API server accepts every object it renders (dryRun=All).

The chart is written by hand, not generated: a chart's templates are what its users read and
patch, and a generator would be one more program to trust. The comparison below is what keeps
it honest: with default values, ``helm template`` gives exactly the objects of ``manifests/``
(without the Namespace, which Helm leaves to ``--create-namespace``), and switching the webhook
on adds exactly ``manifests/pool-validator/webhook``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from operators import __version__
from operators.components import COMPONENTS
from operators.kube.api import KubeAPI
from operators.kube.manifests import render
from operators.settings import env_name
from tests.integration.helpers import (
    create_namespace,
    dry_run_all,
    helm_template,
    missing_fields,
    render_chart,
    run_helm,
)

ROOT = Path(__file__).resolve().parents[2]
MANIFESTS = ROOT / "manifests"
CHART_DIR = ROOT / "charts" / "kopf-dra"
Key = tuple[str, str]

# The chart's value key of each component, and the workload that runs it.
SWITCHES = {
    "scheduler": "scheduler",
    "claimTemplates": "claim-templates",
    "reservations": "reservations",
    "poolValidator": "pool-validator",
    "fabric": "fabric",
    "fabricManagerSim": "fabric-manager-sim",
    "driver": "driver",
}


def _by_key(objects: list[dict[str, Any]]) -> dict[Key, dict[str, Any]]:
    keyed = {(o["kind"], o["metadata"]["name"]): o for o in objects}
    assert len(keyed) == len(objects), "an object is rendered twice"
    return keyed


def _differences(ours: dict[Key, dict[str, Any]], theirs: dict[Key, dict[str, Any]]) -> list[str]:
    found = [f"only in kustomize: {k}" for k in sorted(set(ours) - set(theirs))]
    found += [f"only in the chart: {k}" for k in sorted(set(theirs) - set(ours))]
    for key in sorted(set(ours) & set(theirs)):
        both = missing_fields(ours[key], theirs[key]) + missing_fields(theirs[key], ours[key])
        found += [f"{key}: {p}" for p in sorted(set(both))]
    return found


def _workloads(objects: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Component name (its ``kopf-dra run`` argument) -> its Deployment or DaemonSet."""
    return {
        o["spec"]["template"]["spec"]["containers"][0]["args"][1]: o
        for o in objects
        if o["kind"] in ("Deployment", "DaemonSet")
    }


def _env(workload: dict[str, Any]) -> dict[str, Any]:
    container = workload["spec"]["template"]["spec"]["containers"][0]
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in container.get("env") or []}


def test_helm_lint_finds_nothing() -> None:
    linted = run_helm("lint", "--strict", str(CHART_DIR))
    assert linted.returncode == 0, linted.stdout + linted.stderr
    assert "[WARNING]" not in linted.stdout
    assert "[ERROR]" not in linted.stdout


def test_default_values_render_exactly_the_kustomize_base() -> None:
    base = [o for o in render(MANIFESTS) if o["kind"] != "Namespace"]
    assert _differences(_by_key(base), _by_key(render_chart())) == []


def test_the_webhook_switch_adds_exactly_the_webhook_manifests() -> None:
    expected = _by_key([o for o in render(MANIFESTS) if o["kind"] != "Namespace"])
    expected.update(_by_key(render(MANIFESTS / "pool-validator" / "webhook")))
    validator = expected[("Deployment", "kopf-dra-pool-validator")]
    for entry in validator["spec"]["template"]["spec"]["containers"][0]["env"]:
        if entry["name"] == env_name("webhook"):
            entry["value"] = "true"  # what the webhook's README says to set
    rendered = render_chart({"poolValidator": {"webhook": {"enabled": True}}})
    assert _differences(expected, _by_key(rendered)) == []


@pytest.mark.parametrize("switch", sorted(SWITCHES))
def test_each_component_has_a_switch(switch: str) -> None:
    everything = render_chart()
    without = render_chart({switch: {"enabled": False}})
    component = SWITCHES[switch]
    assert component in _workloads(everything)
    assert set(_workloads(without)) == set(_workloads(everything)) - {component}
    gone = set(_by_key(everything)) - set(_by_key(without))
    assert ("ServiceAccount", f"kopf-dra-{component}") in gone or component == "fabric-manager-sim"
    # Nothing of the component is left behind, nothing of another is taken away.
    for kind, name in _by_key(without):
        labels = _by_key(without)[(kind, name)]["metadata"].get("labels") or {}
        assert labels.get("app.kubernetes.io/name") != f"kopf-dra-{component}", (kind, name)
    for kind, name in gone:
        assert component in name or (kind, component) == ("DeviceClass", "driver"), (kind, name)


def test_values_reach_every_workload() -> None:
    objects = render_chart(
        {
            "image": {"repository": "registry.example/kopf-dra", "tag": "9.9.9"},
            "featureGates": {"DRAPartitionableDevices": True, "DRAAdminAccess": False},
            "leaderElection": {"leaseDuration": 30, "renewDeadline": 20, "retryPeriod": 4},
            "schedulerName": "dra",
            "scheduler": {"replicas": 3, "resources": {"requests": {"cpu": "1"}}},
            "reservations": {"replicas": 1},
            "securityContext": {"runAsUser": 1000},  # merged into the defaults
        }
    )
    workloads = _workloads(objects)
    budgets = {o["metadata"]["name"] for o in objects if o["kind"] == "PodDisruptionBudget"}
    for component, workload in workloads.items():
        container = workload["spec"]["template"]["spec"]["containers"][0]
        assert container["image"] == "registry.example/kopf-dra:9.9.9", component
        env = _env(workload)
        if component == "fabric-manager-sim":
            assert env_name("feature_gates") not in env
            continue
        # Kubernetes' spelling, sorted; parsed by the components' --feature-gates.
        assert env["KOPF_DRA_FEATURE_GATES"] == "DRAAdminAccess=false,DRAPartitionableDevices=true"
        if not COMPONENTS[component].controller:
            continue
        assert env[env_name("lease_duration")] == "30", component
        assert env[env_name("renew_deadline")] == "20", component
        assert env[env_name("retry_period")] == "4", component
        assert container["securityContext"]["runAsUser"] == 1000, component
        assert container["securityContext"]["capabilities"] == {"drop": ["ALL"]}, component
        replicas = workload["spec"]["replicas"]
        assert (f"kopf-dra-{component}" in budgets) == (replicas > 1), component
    scheduler = workloads["scheduler"]
    assert scheduler["spec"]["replicas"] == 3
    assert scheduler["spec"]["template"]["spec"]["containers"][0]["resources"] == {
        "requests": {"cpu": "1", "memory": "256Mi"},  # helm merges maps with the defaults
        "limits": {"memory": "1Gi"},
    }
    assert _env(scheduler)[env_name("scheduler_name")] == "dra"
    assert _env(workloads["claim-templates"])[env_name("scheduler_names")] == "dra"


def test_the_image_tag_defaults_to_the_app_version() -> None:
    images = {
        c["image"]
        for w in _workloads(render_chart()).values()
        for c in w["spec"]["template"]["spec"]["containers"]
    }
    assert images == {f"kopf-dra:{__version__}"}


@pytest.mark.parametrize(
    ("values", "complaint"),
    [
        ({"scheduler": {"replicas": 0}}, "minimum"),
        ({"featureGates": {"DRAAdminAccess": "yes"}}, "boolean"),
        ({"poolValidator": {"webhook": {"failurePolicy": "Sometimes"}}}, "failurePolicy"),
        ({"schedular": {}}, "schedular"),
        ({"driver": {"enabled": True, "replicas": 2}}, "replicas"),
    ],
)
def test_the_schema_refuses_bad_values(values: dict[str, Any], complaint: str) -> None:
    rendered = helm_template(values)
    assert rendered.returncode != 0
    assert "values don't meet the specifications of the schema" in rendered.stderr
    assert complaint in rendered.stderr


async def test_every_object_is_accepted_by_a_server_side_dry_run(kube: KubeAPI, api: Any) -> None:
    """Everything the chart can render (the webhook on, feature gates set), created with
    dryRun=All in a namespace of its own: every admission step runs, nothing is stored."""
    namespace = await create_namespace(api)
    objects = render_chart(
        {
            "poolValidator": {"webhook": {"enabled": True, "caBundle": "Y2E="}},
            "featureGates": {"DRAAdminAccess": True},
        },
        namespace=namespace,
    )
    kinds = {o["kind"] for o in objects}
    assert {"CustomResourceDefinition", "ValidatingWebhookConfiguration", "DaemonSet"} <= kinds
    assert await dry_run_all(kube, objects) == {}
