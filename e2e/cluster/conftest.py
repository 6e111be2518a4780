"""kopf-dra deployed for real (``make e2e-cluster``): its own image, running as pods of the
complete local cluster (``operators/kube/cluster.py``), installed with
``kubectl apply --server-side -k e2e/cluster/overlay`` as users install ``manifests/``.

The session builds the image (``hack/image/build.sh``, cached), starts two real kubelet nodes
with kube-controller-manager, kube-scheduler, kube-proxy and CoreDNS, imports the image into
each node, applies the overlay, creates the fabric manager's token Secret with the README's
command and waits for every rollout. The e2e suite's fixtures then see an in-cluster install
(``KOPF_DRA_E2E_IN_CLUSTER=1``, set by the Makefile): no operator runs outside the cluster.
Where the machine cannot run it the session is skipped with what is missing, except under
``CI=true``, where that is a failure. Teardown checks that the host is as it was.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from operators.kube import cluster
from operators.kube.files import project_root

CI = os.environ.get("CI", "").lower() == "true"
ROOT = project_root()
OVERLAY = ROOT / "e2e" / "cluster" / "overlay"
IMAGE_BUILD = ROOT / "hack" / "image" / "build.sh"
NAMESPACE = "kopf-dra"
#: The fabric manager's token Secret, exactly as the README tells users to create it.
TOKEN_COMMAND = (
    "kubectl -n kopf-dra create secret generic kopf-dra-fabric-tokens \\\n"
    "  --from-file=default=<(openssl rand -hex 32)"
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
        "PATH": f"{c.kubectl.parent}:{os.environ.get('PATH', '')}",
    }
    proc = subprocess.run(
        ["bash", "-c", command], capture_output=True, text=True, check=False, env=env, timeout=300
    )
    assert proc.returncode == 0, f"{command}\n{proc.stdout}\n{proc.stderr}"
    return proc.stdout


@pytest.fixture(scope="session")
def installed(local_cluster: cluster.Cluster) -> cluster.Cluster:
    """kopf-dra installed as the README says, every rollout finished."""
    shell(local_cluster, f"kubectl apply --server-side -k {OVERLAY}")
    shell(local_cluster, TOKEN_COMMAND)
    for kind in ("deployment", "daemonset"):
        shell(local_cluster, f"kubectl -n {NAMESPACE} rollout status {kind} --timeout=300s")
    return local_cluster


@pytest.fixture(scope="session")
def kubeconfig(installed: cluster.Cluster) -> Path:
    """The e2e suite's fixtures (api, kube, scenario) talk to the installed cluster."""
    return installed.kubeconfig
