"""NodeDeclaredFeatures: the features a pod's spec needs, per release's registry, against the
node's status.declaredFeatures (component-helpers' nodedeclaredfeatures/features)."""

from __future__ import annotations

from typing import Any

import pytest

from operators.allocator.features import V1_37, V1_38
from operators.api.core import Pod
from operators.api.features import Release
from operators.scheduling.plugins import nodedeclaredfeatures
from tests.unit.scheduling.builders import node

V1_36 = Release(1, 36)


def _pod(spec: dict[str, Any]) -> Pod:
    spec = {"containers": [{"name": "c", "image": "busybox"}], **spec}
    return Pod.load({"metadata": {"name": "p", "namespace": "ns"}, "spec": spec})


RESTART_ALL = {
    "containers": [
        {
            "name": "c",
            "restartPolicyRules": [
                {"action": "RestartAllContainers", "exitCodes": {"operator": "In", "values": [42]}}
            ],
        }
    ]
}
HOST_NETWORK_USERNS = {"hostNetwork": True, "hostUsers": False}
BIND_MOUNT = {
    "initContainers": [
        {"name": "i", "volumeMounts": [{"name": "v", "mountPath": "/v", "bindMountOptions": ["x"]}]}
    ]
}
MLDSA = {
    "volumes": [
        {
            "name": "cert",
            "projected": {
                "sources": [{"podCertificate": {"signerName": "a/b", "keyType": "MLDSA65"}}]
            },
        }
    ]
}
OCI = {"securityContext": {"seccompProfile": {"type": "OCI"}}}


@pytest.mark.parametrize(
    ("spec", "release", "needed"),
    [
        ({}, V1_37, None),
        (RESTART_ALL, V1_36, {"RestartAllContainersOnContainerExits"}),
        (HOST_NETWORK_USERNS, V1_37, {"UserNamespacesHostNetworkSupport"}),
        ({"hostNetwork": True}, V1_37, None),  # host users: the default, no user namespace
        (BIND_MOUNT, V1_36, None),  # not in 1.36's registry
        (BIND_MOUNT, V1_37, {"VolumeBindMountOptions"}),
        (MLDSA, V1_37, None),
        (MLDSA, V1_38, {"PodCertificateMLDSA"}),
        (OCI, V1_37, None),
        (OCI, V1_38, {"SecurityProfileOCI"}),
        (
            {**RESTART_ALL, **OCI},
            V1_38,
            {"RestartAllContainersOnContainerExits", "SecurityProfileOCI"},
        ),
    ],
)
def test_what_a_pod_needs_follows_its_releases_registry(
    spec: dict[str, Any], release: Release, needed: set[str] | None
) -> None:
    got = nodedeclaredfeatures.pre_filter(_pod(spec), release=release)
    assert got == (frozenset(needed) if needed is not None else None)


def test_the_gate_off_checks_nothing() -> None:
    assert nodedeclaredfeatures.pre_filter(_pod(RESTART_ALL), release=V1_37, enabled=False) is None


def test_a_node_must_declare_every_feature_the_pod_needs() -> None:
    needed = frozenset({"RestartAllContainersOnContainerExits", "SecurityProfileOCI"})
    some = node("n", declared_features=["RestartAllContainersOnContainerExits"])
    every = node("n", declared_features=[*needed, "Other"])
    assert nodedeclaredfeatures.filter(needed, some) == nodedeclaredfeatures.REASON
    assert nodedeclaredfeatures.filter(needed, every) is None
    assert nodedeclaredfeatures.REASON == "node(s) didn't match Pod's required features"
