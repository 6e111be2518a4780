"""kopf-dra deployed for real (``make e2e-cluster``): its own image, running as pods of the
complete local cluster (``operators/kube/cluster.py``), installed with
``kubectl apply --server-side -k e2e/cluster/overlay`` as users install ``manifests/``.

The session builds the image (``hack/image/build.sh``, cached), starts two real kubelet nodes
with kube-controller-manager, kube-scheduler, kube-proxy and CoreDNS, imports the image into
each node, installs kopf-dra as the README says and waits for every rollout:
``KOPF_DRA_E2E_INSTALL=kustomize`` (the default) applies the overlay and creates the fabric
manager's token Secret; ``KOPF_DRA_E2E_INSTALL=helm`` runs the README's Helm commands with the
values of ``e2e/cluster/helm-values.yaml``, and adds the Helm-only checks (``test_helm_upgrade.py``,
``test_uninstalled.py``:
upgrade, uninstall). Every other check holds for both. The e2e suite's fixtures then see an
in-cluster install (``KOPF_DRA_E2E_IN_CLUSTER=1``, set by the Makefile): no operator runs
outside the cluster.
Where the machine cannot run it the session is skipped with what is missing, except under
``CI=true``, where that is a failure. Teardown checks that the host is as it was.
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from operators.kube import cluster
from operators.kube.files import project_root

CI = os.environ.get("CI", "").lower() == "true"
INSTALL = os.environ.get("KOPF_DRA_E2E_INSTALL", "kustomize")
if INSTALL not in ("kustomize", "helm"):
    raise pytest.UsageError(f"KOPF_DRA_E2E_INSTALL={INSTALL!r}: kustomize or helm")
collect_ignore = [] if INSTALL == "helm" else ["test_helm_upgrade.py", "test_uninstalled.py"]
ROOT = project_root()
OVERLAY = ROOT / "e2e" / "cluster" / "overlay"
HELM_VALUES = ROOT / "e2e" / "cluster" / "helm-values.yaml"
HELM_BUILD = ROOT / "hack" / "helm" / "build.sh"
IMAGE_BUILD = ROOT / "hack" / "image" / "build.sh"
NAMESPACE = "kopf-dra"
#: The fabric manager's token Secret, exactly as the README tells users to create it.
TOKEN_COMMAND = (
    "kubectl -n kopf-dra create secret generic kopf-dra-fabric-tokens \\\n"
    "  --from-file=default=<(openssl rand -hex 32)"
)
#: The README's Helm install, before it the namespace and its Pod Security labels.
HELM_COMMANDS = (
    "kubectl create namespace kopf-dra",
    "kubectl label namespace kopf-dra pod-security.kubernetes.io/enforce=privileged \\\n"
    "  pod-security.kubernetes.io/audit=restricted",
    TOKEN_COMMAND,
    "helm install kopf-dra charts/kopf-dra --namespace kopf-dra",
)


def _missing() -> list[str]:
    missing = cluster.missing_prerequisites()
    if shutil.which("mmdebstrap") is None:
        missing.append("mmdebstrap, to build the image (hack/image/install-deps.sh)")
    return missing


def build_image() -> Path:
    """The project's image archive from this tree (``make image``; cached by its inputs), or
    the archive ``KOPF_DRA_E2E_IMAGE`` names (one built before, as ``make image`` prints)."""
    given = os.environ.get("KOPF_DRA_E2E_IMAGE")
    if given:
        return Path(given)
    proc = subprocess.run(
        ["bash", str(IMAGE_BUILD)], capture_output=True, text=True, check=False, timeout=1200
    )
    if proc.returncode != 0:
        pytest.fail(f"make image failed:\n{proc.stderr[-4000:]}")
    return Path(proc.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="session")
def local_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[cluster.Cluster]:
    missing = _missing()
    if missing:
        message = "the local cluster needs: " + "; ".join(missing)
        if CI:
            pytest.fail(message + " (CI=true: a missing prerequisite is a failure)")
        pytest.skip(message)
    image = build_image()
    with cluster.running(
        tmp_path_factory.mktemp("cluster"), cluster.node_names(2), [image]
    ) as running:
        print(f"\nlocal cluster: {running.timings}")
        yield running


def shell(c: cluster.Cluster, command: str) -> str:
    """A command as a user types it: bash, kubectl on PATH, KUBECONFIG set."""
    env = {
        **os.environ,
        "KUBECONFIG": str(c.kubeconfig),
        "PATH": f"{c.kubectl.parent}:{helm().parent}:{os.environ.get('PATH', '')}",
    }
    proc = subprocess.run(
        ["bash", "-c", command],
        capture_output=True,
        text=True,
        check=False,
        env=env,
        timeout=300,
        cwd=ROOT,
    )
    assert proc.returncode == 0, f"{command}\n{proc.stdout}\n{proc.stderr}"
    return proc.stdout


@functools.cache
def helm() -> Path:
    """The pinned helm (``make helm``), built unless cached."""
    proc = subprocess.run(["bash", str(HELM_BUILD)], capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr[-4000:]
    return Path(proc.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="session")
def installed(local_cluster: cluster.Cluster) -> cluster.Cluster:
    """kopf-dra installed as the README says, every rollout finished."""
    if INSTALL == "helm":
        *prepare, install = HELM_COMMANDS
        for command in prepare:
            shell(local_cluster, command)
        shell(local_cluster, f"{install} -f {HELM_VALUES.relative_to(ROOT)}")
    else:
        shell(local_cluster, f"kubectl apply --server-side -k {OVERLAY}")
        shell(local_cluster, TOKEN_COMMAND)
    for kind in ("deployment", "daemonset"):
        shell(local_cluster, f"kubectl -n {NAMESPACE} rollout status {kind} --timeout=300s")
    return local_cluster


@pytest.fixture(scope="session")
def kubeconfig(installed: cluster.Cluster) -> Path:
    """The e2e suite's fixtures (api, kube, scenario) talk to the installed cluster."""
    return installed.kubeconfig
