"""``helm uninstall`` leaves exactly what the README says it leaves (section "Deploying")."""

from __future__ import annotations

from typing import Any

from e2e.cluster.conftest import NAMESPACE, shell
from operators.demo.bringup import example_names, example_objects
from operators.kube.api import KubeAPI, NotFoundError, resource_of
from operators.localcluster import cluster
from operators.localcluster.files import project_root
from tests.integration.helpers import eventually

#: Namespaced kinds the chart creates in the release's namespace, or its components make there.
NAMESPACED = (
    "Deployment", "DaemonSet", "Pod", "Service", "ServiceAccount", "ConfigMap",
    "Secret", "Role", "RoleBinding", "PodDisruptionBudget", "NetworkPolicy", "Lease",
)  # fmt: skip
#: Cluster-scoped kinds the chart creates, or its components make.
CLUSTER = (
    "ClusterRole", "ClusterRoleBinding", "DeviceClass", "ValidatingAdmissionPolicy",
    "ValidatingAdmissionPolicyBinding", "ResourceSlice", "ResourcePoolStatus",
    "CustomResourceDefinition",
)  # fmt: skip
#: What stays, on purpose (README, "Deploying"): what the user made before installing (the
#: namespace's token Secret), what Kubernetes makes in every namespace, the Leases the
#: components took (leader election writes them, Helm never owned them), and the CRD (Helm
#: installs a chart's crds/ once and never deletes them). Besides these, the data the
#: components published that no one removes for them: the fabric controller's ResourceSlices
#: (they belong to no node, so no kubelet wipes them) and the pool validator's
#: ResourcePoolStatuses (kept with their CRD).
#: The README's commands that remove that data.
CLEANUP_COMMANDS = (
    "kubectl delete resourceslices --field-selector spec.driver=example.kopf-dra.io",
    "kubectl delete crd resourcepoolstatuses.dra.kopf-dra.io",
)
KEPT = {
    ("Secret", "kopf-dra-fabric-tokens"),
    ("ServiceAccount", "default"),
    ("ConfigMap", "kube-root-ca.crt"),
    ("Lease", "kopf-dra-scheduler"),
    ("Lease", "kopf-dra-claim-templates"),
    ("Lease", "kopf-dra-reservations"),
    ("Lease", "kopf-dra-pool-validator"),
    ("Lease", "kopf-dra-fabric"),
    ("CustomResourceDefinition", "resourcepoolstatuses.dra.kopf-dra.io"),
}
CRD = ("CustomResourceDefinition", "resourcepoolstatuses.dra.kopf-dra.io")


#: Cluster-scoped objects of the example scenarios (a DeviceClass): the user's, not the chart's.
EXAMPLES = {
    (o["kind"], o["metadata"]["name"])
    for name in example_names()
    for o in example_objects(name)
    if o["kind"] != "Namespace" and not resource_of(o["kind"]).namespaced
}


def _ours(kind: str, obj: dict[str, Any]) -> bool:
    """Cluster-scoped objects of kopf-dra's (the cluster's own ClusterRoles and the examples'
    DeviceClasses are not)."""
    meta = obj["metadata"]
    if (kind, meta["name"]) in EXAMPLES:
        return False
    labels = meta.get("labels") or {}
    if kind in ("ResourceSlice", "ResourcePoolStatus"):
        return True
    if kind == "CustomResourceDefinition":
        return str(meta["name"]).endswith(".kopf-dra.io")
    return labels.get("app.kubernetes.io/part-of") == "kopf-dra" or "kopf-dra" in meta["name"]


async def _left(kube: KubeAPI) -> set[tuple[str, str]]:
    left = set()
    for kind in NAMESPACED:
        for obj in (await kube.list(kind, NAMESPACE))["items"]:
            left.add((kind, obj["metadata"]["name"]))
    for kind in CLUSTER:
        try:
            items = (await kube.list(kind))["items"]
        except NotFoundError:  # ResourcePoolStatus, once its CRD is deleted
            continue
        for obj in items:
            if _ours(kind, obj):
                left.add((kind, obj["metadata"]["name"]))
    return left


async def test_helm_uninstall_leaves_only_what_the_readme_says(
    installed: cluster.Cluster, kube: KubeAPI
) -> None:
    shell(installed, "helm uninstall kopf-dra --namespace kopf-dra --wait --timeout 180s")

    async def settled() -> set[tuple[str, str]] | None:
        left = await _left(kube)
        return left if not any(kind == "Pod" for kind, _ in left) else None

    left = await eventually(settled, within=120, what="the release's pods to be gone")
    print(f"\nleft after helm uninstall: {sorted(left)}")

    async def wiped() -> set[tuple[str, str]] | None:
        # Slices first, then the rest: read the other way round, a kubelet could wipe its
        # slices between the two reads and leave them in a stale `left` (CI saw it).
        slices = (await kube.list("ResourceSlice"))["items"]
        if any(s["spec"].get("nodeName") for s in slices):
            return None
        return await _left(kube)

    left = await eventually(wiped, within=120, what="the kubelets to wipe the driver's slices")
    print(f"\nleft once the kubelets wiped the node slices: {sorted(left)}")
    published = {
        (kind, name) for kind, name in left if kind in ("ResourceSlice", "ResourcePoolStatus")
    }
    assert left - published == KEPT
    assert {name for kind, name in published if kind == "ResourceSlice"} == {
        "example.kopf-dra.io-fabric-a100",
        "example.kopf-dra.io-fabric-h100",
    }
    assert any(kind == "ResourcePoolStatus" for kind, _ in published)
    for command in CLEANUP_COMMANDS:
        shell(installed, command)

    async def cleaned() -> set[tuple[str, str]] | None:
        left = await _left(kube)
        return left if left == KEPT - {CRD} else None

    await eventually(cleaned, within=60, what="the published data to be gone")
    assert (await kube.get("Namespace", NAMESPACE))["status"]["phase"] == "Active"


def test_the_readme_says_what_stays_and_how_to_remove_it() -> None:
    readme = (project_root() / "README.md").read_text()
    for command in CLEANUP_COMMANDS:
        assert command in readme, command
