"""kopf-dra deployed for real (``make e2e-cluster``): its own image, running as pods of the
complete local cluster (``operators/localcluster/cluster.py``), installed with
``kubectl apply --server-side -k e2e/cluster/overlay`` as users install ``manifests/``.

The session builds the image (``hack/image/build.sh``, cached), starts two real kubelet nodes
with kube-controller-manager, kube-scheduler, kube-proxy and CoreDNS, imports the image into
each node, installs kopf-dra as the README says and waits for every rollout:
``KOPF_DRA_E2E_INSTALL=kustomize`` (the default) applies the overlay and creates the fabric
manager's token Secret; ``KOPF_DRA_E2E_INSTALL=helm`` runs the README's Helm commands with the
values of ``hack/cluster/helm-values.yaml``, and adds the Helm-only checks
(``test_helm_upgrade.py``, ``test_uninstalled.py``: upgrade, uninstall; ``test_kueue.py``:
Kueue in front of kopf-dra, its image imported into the nodes at start). Every other check holds
for both. The e2e suite's fixtures then see an in-cluster install (``KOPF_DRA_E2E_IN_CLUSTER=1``,
set by the Makefile): no operator runs outside the cluster. ``KOPF_DRA_E2E_INSTALL=demo`` runs
``make run CLUSTER=1`` instead (``test_demo.py``), which starts a cluster of its own.
``KOPF_DRA_E2E_INSTALL=upgrade`` installs with Helm on a cluster of the minor before and
upgrades it under kopf-dra (``test_upgrade.py``), in a session of its own.
The kubelets run ``KOPF_DRA_NODE_KUBERNETES_VERSION``'s releases, node by node (the Makefile
sets 1.36.3 and 1.37.2 for the kustomize install: nodes a minor behind the control plane).
Where the machine cannot run it the session is skipped with what is missing, except under
``CI=true``, where that is a failure. Teardown checks that the host is as it was.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from operators.localcluster import cluster, controlplane
from operators.localcluster.files import project_root
from tests.requires import unavailable

INSTALL = os.environ.get("KOPF_DRA_E2E_INSTALL", "kustomize")
INSTALLS = ("kustomize", "helm", "demo", "upgrade")
if INSTALL not in INSTALLS:
    raise pytest.UsageError(f"KOPF_DRA_E2E_INSTALL={INSTALL!r}: one of {', '.join(INSTALLS)}")
#: Helm's own checks (and Kueue in front of kopf-dra) run on the Helm install; `make run
#: CLUSTER=1` (test_demo.py) starts a cluster of its own, in a session of its own
#: (KOPF_DRA_E2E_INSTALL=demo); the live upgrade of the control plane (test_upgrade.py) too
#: (KOPF_DRA_E2E_INSTALL=upgrade, Helm on the minor before). Every other file runs on the
#: kustomize and the Helm install.
ONLY = {
    "test_helm_upgrade.py": "helm",
    "test_kueue.py": "helm",
    "test_uninstalled.py": "helm",
    "test_demo.py": "demo",
    "test_upgrade.py": "upgrade",
}
collect_ignore = sorted(
    p.name
    for p in Path(__file__).parent.glob("test_*.py")
    if INSTALL not in ((ONLY[p.name],) if p.name in ONLY else ("kustomize", "helm"))
)
ROOT = project_root()
OVERLAY = ROOT / "e2e" / "cluster" / "overlay"
HELM_VALUES = cluster.HELM_VALUES
NAMESPACE = cluster.NAMESPACE
TOKEN_COMMAND = cluster.TOKEN_COMMAND
HELM_COMMANDS = cluster.HELM_COMMANDS


@pytest.fixture(scope="session")
def prerequisites() -> None:
    """Skip the session naming what the machine lacks (a failure under CI=true)."""
    missing = cluster.missing_prerequisites()
    if shutil.which("mmdebstrap") is None:
        missing.append("mmdebstrap, to build the image (hack/image/install-deps.sh)")
    if missing:
        unavailable("the local cluster needs: " + "; ".join(missing))


def build_image() -> Path:
    """The project's image archive from this tree (``make image``; cached by its inputs), or
    the archive ``KOPF_DRA_E2E_IMAGE`` names (one built before, as ``make image`` prints)."""
    given = os.environ.get("KOPF_DRA_E2E_IMAGE")
    if given:
        return Path(given)
    try:
        return cluster.build_image()
    except cluster.ClusterError as e:
        pytest.fail(f"make image failed: {e}")


def build_kueue() -> Path:
    """Kueue's build (``hack/kueue/build.sh``: binary, image, chart; cached)."""
    try:
        return cluster.build_kueue()
    except cluster.ClusterError as e:
        pytest.fail(f"hack/kueue/build.sh failed: {e}")


@pytest.fixture(scope="session")
def local_cluster(
    prerequisites: None, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[cluster.Cluster]:
    images = [build_image()]
    if INSTALL == "helm":  # Kueue in front of kopf-dra (test_kueue.py): its image, as built
        images.append(build_kueue() / "images" / "kueue.tar")
    with cluster.running(
        tmp_path_factory.mktemp("cluster"), cluster.node_names(2), images
    ) as running:
        print(f"\nlocal cluster: {running.timings}")
        yield running


def shell(c: cluster.Cluster, command: str) -> str:
    """A command as a user types it: bash, kubectl and helm on PATH, KUBECONFIG set."""
    try:
        return c.shell(command)
    except cluster.ClusterError as e:
        raise AssertionError(str(e)) from None


@pytest.fixture(scope="session")
def installed(local_cluster: cluster.Cluster) -> cluster.Cluster:
    """kopf-dra installed as the README says, every rollout finished."""
    if INSTALL == "helm":
        local_cluster.install_with_helm()
    elif INSTALL == "upgrade":
        # The values' gates are the default release's; the cluster starts on the release
        # before, with that release's gates: those it does not have are left out (the chart's
        # schema takes no null to unset one), the others take its values (1.36's
        # DRAWorkloadResourceClaims is off: GenericWorkload, which it needs, is 1.37's here).
        values = yaml.safe_load(HELM_VALUES.read_text())
        known = controlplane.feature_gates(local_cluster.control_plane.version)
        values["featureGates"] = {g: known[g] for g in values["featureGates"] if g in known}
        older = local_cluster.state_dir / "helm-values.yaml"
        older.write_text(yaml.safe_dump(values))
        local_cluster.install_with_helm(values=older)
    else:
        shell(local_cluster, f"kubectl apply --server-side -k {OVERLAY}")
        shell(local_cluster, TOKEN_COMMAND)
        local_cluster.wait_rollouts()
    return local_cluster


@pytest.fixture(scope="session")
def kubeconfig(installed: cluster.Cluster) -> Path:
    """The e2e suite's fixtures (api, kube, scenario) talk to the installed cluster."""
    return installed.kubeconfig
