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

import copy
from pathlib import Path
from typing import Any

import pytest

from operators import __version__
from operators.components import COMPONENTS
from operators.kube.api import KubeAPI
from operators.localcluster.manifests import render
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
GROUP_LABEL = "kopf-dra.io/driver-group"
DRIVER = ("DaemonSet", "kopf-dra-driver")

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


def _daemonsets(objects: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {o["metadata"]["name"]: o for o in objects if o["kind"] == "DaemonSet"}


def _with_directories(daemonset: dict[str, Any], kubelet: str, cdi: str) -> dict[str, Any]:
    """The driver's DaemonSet as manifests/driver/host-paths makes it for these directories:
    its two settings, and the hostPath volumes and their mountPaths that follow them."""
    changed = copy.deepcopy(daemonset)
    pod = changed["spec"]["template"]["spec"]
    paths = {
        "plugins-registry": f"{kubelet}/plugins_registry",
        "plugin-dir": f"{kubelet}/plugins/example.kopf-dra.io",
        "cdi": cdi,
    }
    settings = {"KOPF_DRA_KUBELET_DIR": kubelet, "KOPF_DRA_CDI_DIR": cdi}
    for entry in pod["containers"][0]["env"]:
        if entry["name"] in settings:
            entry["value"] = settings.pop(entry["name"])
    assert settings == {}, "a setting is missing from the DaemonSet"
    for mount in pod["containers"][0]["volumeMounts"]:
        mount["mountPath"] = paths.get(mount["name"], mount["mountPath"])
    for volume in pod["volumes"]:
        if volume["name"] in paths:
            volume["hostPath"]["path"] = paths[volume["name"]]
    return changed


def _for_group(
    daemonset: dict[str, Any], group: str, node_selector: dict[str, str]
) -> dict[str, Any]:
    """The driver's DaemonSet as a node group's: its name, its label in metadata, selector and
    pod template, its nodeSelector."""
    changed = copy.deepcopy(daemonset)
    changed["metadata"]["name"] += f"-{group}"
    for labels in (
        changed["metadata"]["labels"],
        changed["spec"]["selector"]["matchLabels"],
        changed["spec"]["template"]["metadata"]["labels"],
    ):
        labels[GROUP_LABEL] = group
    changed["spec"]["template"]["spec"]["nodeSelector"] = node_selector
    return changed


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
        ({"driver": {"kubeletDir": "var/lib/kubelet"}}, "'/driver/kubeletDir'"),
        ({"driver": {"cdiDir": "/var/run/cdi/"}}, "'/driver/cdiDir'"),
        (
            {
                "driver": {
                    "nodeGroups": [{"name": "k3s", "nodeSelector": {"k3s": "yes"}, "cdiDir": "cdi"}]
                }
            },
            "'/driver/nodeGroups/0/cdiDir'",
        ),
        (
            {"driver": {"nodeGroups": [{"name": "K3s", "nodeSelector": {"k3s": "yes"}}]}},
            "/driver/nodeGroups/0/name",
        ),
        (
            {"driver": {"nodeGroups": [{"name": "k3s", "nodeSelector": {"k3s": True}}]}},
            "/driver/nodeGroups/0/nodeSelector/k3s",
        ),
        ({"driver": {"nodeGroups": [{"name": "k3s"}]}}, "'nodeSelector'"),
    ],
)
def test_the_schema_refuses_bad_values(values: dict[str, Any], complaint: str) -> None:
    rendered = helm_template(values)
    assert rendered.returncode != 0
    assert "values don't meet the specifications of the schema" in rendered.stderr
    assert complaint in rendered.stderr


def test_a_group_name_given_twice_is_refused() -> None:
    """JSON Schema cannot say "unique by name": the template refuses it, naming the field."""
    groups = [
        {"name": "k3s", "nodeSelector": {"distribution": "k3s"}},
        {"name": "k0s", "nodeSelector": {"distribution": "k0s"}},
        {"name": "k3s", "nodeSelector": {"distribution": "k3s-edge"}},
    ]
    rendered = helm_template({"driver": {"nodeGroups": groups}})
    assert rendered.returncode != 0
    assert 'driver.nodeGroups[2].name: "k3s" is already the name of driver.nodeGroups[0]' in (
        rendered.stderr
    )
    groups[2]["name"] = "k3s-edge"
    assert len(_daemonsets(render_chart({"driver": {"nodeGroups": groups}}))) == 3


def test_the_driver_directories_follow_their_values() -> None:
    """kubeletDir and cdiDir: the driver's settings, its hostPath volumes and their mountPaths
    (as manifests/driver/host-paths makes them), and nothing else."""
    kubelet, cdi = "/var/lib/rancher/k3s/agent/kubelet", "/var/lib/rancher/k3s/agent/etc/cdi"
    expected = _by_key(render_chart())
    expected[DRIVER] = _with_directories(expected[DRIVER], kubelet, cdi)
    rendered = render_chart({"driver": {"kubeletDir": kubelet, "cdiDir": cdi}})
    assert _differences(expected, _by_key(rendered)) == []
    driver = _daemonsets(rendered)["kopf-dra-driver"]
    assert _env(driver)["KOPF_DRA_KUBELET_DIR"] == kubelet
    assert _env(driver)["KOPF_DRA_CDI_DIR"] == cdi
    pod = driver["spec"]["template"]["spec"]
    host_paths = {v["name"]: v["hostPath"]["path"] for v in pod["volumes"] if "hostPath" in v}
    mounts = {m["name"]: m["mountPath"] for m in pod["containers"][0]["volumeMounts"]}
    assert host_paths == {
        "plugins-registry": f"{kubelet}/plugins_registry",
        "plugin-dir": f"{kubelet}/plugins/example.kopf-dra.io",
        "cdi": cdi,
    }
    assert all(mounts[name] == path for name, path in host_paths.items())
    assert "/var/lib/kubelet" not in repr(driver)
    assert "/var/run/cdi" not in repr(driver)


# The local cluster's nodes (e2e/cluster/overlay): each keeps its kubelet root and CDI directory
# under /var/lib/kopf-dra-cluster/<node>.
CLUSTER_NODES = ["kopf-dra-worker", "kopf-dra-worker2"]
CLUSTER_GROUPS: list[dict[str, Any]] = [
    {
        "name": node,
        "nodeSelector": {"kubernetes.io/hostname": node},
        "kubeletDir": f"/var/lib/kopf-dra-cluster/{node}/kubelet",
        "cdiDir": f"/var/lib/kopf-dra-cluster/{node}/cdi",
    }
    for node in CLUSTER_NODES
]


def test_node_groups_render_one_daemonset_each() -> None:
    """Two groups as the local cluster's nodes: two DaemonSets, kopf-dra-driver-<name>, each on
    its nodes with its directories and a selector the other's pods do not match; none for every
    node; every other object unchanged."""
    expected = _by_key(render_chart())
    default = expected.pop(DRIVER)
    for group in CLUSTER_GROUPS:
        daemonset = _for_group(default, group["name"], group["nodeSelector"])
        daemonset = _with_directories(daemonset, group["kubeletDir"], group["cdiDir"])
        expected[("DaemonSet", daemonset["metadata"]["name"])] = daemonset
    rendered = render_chart({"driver": {"nodeGroups": CLUSTER_GROUPS}})
    assert _differences(expected, _by_key(rendered)) == []

    daemonsets = _daemonsets(rendered)
    assert sorted(daemonsets) == [f"kopf-dra-driver-{node}" for node in CLUSTER_NODES]
    for node in CLUSTER_NODES:
        daemonset = daemonsets[f"kopf-dra-driver-{node}"]
        selector = daemonset["spec"]["selector"]["matchLabels"]
        assert selector == {"app.kubernetes.io/name": "kopf-dra-driver", GROUP_LABEL: node}
        pod = daemonset["spec"]["template"]
        assert pod["spec"]["nodeSelector"] == {"kubernetes.io/hostname": node}
        assert (
            _env(daemonset)["KOPF_DRA_KUBELET_DIR"] == f"/var/lib/kopf-dra-cluster/{node}/kubelet"
        )
        assert _env(daemonset)["KOPF_DRA_CDI_DIR"] == f"/var/lib/kopf-dra-cluster/{node}/cdi"
        # Its selector matches its own pods and no other group's.
        for other in daemonsets.values():
            labels = other["spec"]["template"]["metadata"]["labels"]
            matches = all(labels.get(k) == v for k, v in selector.items())
            assert matches == (other is daemonset), (node, other["metadata"]["name"])


def test_a_group_without_directories_has_the_drivers() -> None:
    kubelet = "/var/lib/k0s/kubelet"
    groups = [
        {"name": "k0s", "nodeSelector": {"distribution": "k0s"}},
        {"name": "microk8s", "nodeSelector": {"distribution": "microk8s"}, "cdiDir": "/etc/cdi"},
    ]
    daemonsets = _daemonsets(
        render_chart({"driver": {"kubeletDir": kubelet, "nodeGroups": groups}})
    )
    assert _env(daemonsets["kopf-dra-driver-k0s"])["KOPF_DRA_KUBELET_DIR"] == kubelet
    assert _env(daemonsets["kopf-dra-driver-k0s"])["KOPF_DRA_CDI_DIR"] == "/var/run/cdi"
    assert _env(daemonsets["kopf-dra-driver-microk8s"])["KOPF_DRA_KUBELET_DIR"] == kubelet
    assert _env(daemonsets["kopf-dra-driver-microk8s"])["KOPF_DRA_CDI_DIR"] == "/etc/cdi"


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


async def test_the_node_groups_daemonsets_pass_a_server_side_dry_run(
    kube: KubeAPI, api: Any
) -> None:
    """The DaemonSets of node groups with directories of their own, and of one inheriting
    driver.kubeletDir and driver.cdiDir: accepted with dryRun=All, no field dropped."""
    namespace = await create_namespace(api)
    values = {
        "driver": {
            "kubeletDir": "/var/lib/rancher/k3s/agent/kubelet",
            "cdiDir": "/var/lib/rancher/k3s/agent/etc/cdi",
            "nodeGroups": [*CLUSTER_GROUPS, {"name": "k3s", "nodeSelector": {"k3s": "true"}}],
        }
    }
    daemonsets = [o for o in render_chart(values, namespace=namespace) if o["kind"] == "DaemonSet"]
    assert len(daemonsets) == 3
    assert await dry_run_all(kube, daemonsets) == {}
