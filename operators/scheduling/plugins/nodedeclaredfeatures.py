"""NodeDeclaredFeatures (``plugins/nodedeclaredfeatures``; the features from component-helpers'
``nodedeclaredfeatures/features``): a pod that uses a feature some kubelets lack goes only to a
node that declares it in ``status.declaredFeatures``.

Upstream infers the features a pod needs from its spec, feature by feature of the release's
registry; only those whose inference can say yes at scheduling time are here (the resize
features, ExtendWebSocketsToKubelet and the DRA ones infer nothing for scheduling; the DRA
part of node operations is DynamicResources' own check in ``cycle``). The registry grew:
1.37 added VolumeBindMountOptions, 1.38 PodCertificateMLDSA and SecurityProfileOCI.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from operators.allocator.features import V1_37, V1_38
from operators.api.core import Container, Node, Pod
from operators.api.features import Release

REASON = "node(s) didn't match Pod's required features"

_MLDSA_KEY_TYPES = frozenset({"MLDSA44", "MLDSA65", "MLDSA87"})


def _extra(model: Any, name: str) -> Any:
    return (model.model_extra or {}).get(name)


def _containers(pod: Pod, ephemeral: bool) -> Iterable[Container | dict[str, Any]]:
    yield from pod.spec.containers
    yield from pod.spec.init_containers
    if ephemeral:
        yield from _extra(pod.spec, "ephemeralContainers") or ()


def _field(container: Container | dict[str, Any], name: str) -> Any:
    if isinstance(container, dict):
        return container.get(name)
    return _extra(container, name)


def _restart_all_containers(pod: Pod) -> bool:
    """A container restart rule whose action restarts every container of the pod."""
    return any(
        (rule or {}).get("action") == "RestartAllContainers"
        for c in _containers(pod, ephemeral=False)
        for rule in _field(c, "restartPolicyRules") or ()
    )


def _host_network_user_namespace(pod: Pod) -> bool:
    spec = pod.spec.model_extra or {}
    return bool(spec.get("hostNetwork")) and spec.get("hostUsers") is False


def _bind_mount_options(pod: Pod) -> bool:
    return any(
        (mount or {}).get("bindMountOptions")
        for c in _containers(pod, ephemeral=True)
        for mount in _field(c, "volumeMounts") or ()
    )


def _mldsa_certificate(pod: Pod) -> bool:
    for volume in pod.spec.volumes:
        for source in (volume.source("projected") or {}).get("sources") or ():
            certificate = (source or {}).get("podCertificate")
            if certificate and certificate.get("keyType") in _MLDSA_KEY_TYPES:
                return True
    return False


def _oci_profile(security_context: Any) -> bool:
    profile = (security_context or {}).get("seccompProfile") or {}
    return profile.get("type") == "OCI"


def _seccomp_oci(pod: Pod) -> bool:
    if _oci_profile(_extra(pod.spec, "securityContext")):
        return True
    return any(_oci_profile(_field(c, "securityContext")) for c in _containers(pod, True))


# (feature name, first release with it, its inference), in the registry's order.
_FEATURES: tuple[tuple[str, Release | None, Callable[[Pod], bool]], ...] = (
    ("RestartAllContainersOnContainerExits", None, _restart_all_containers),
    ("UserNamespacesHostNetworkSupport", None, _host_network_user_namespace),
    ("VolumeBindMountOptions", V1_37, _bind_mount_options),
    ("PodCertificateMLDSA", V1_38, _mldsa_certificate),
    ("SecurityProfileOCI", V1_38, _seccomp_oci),
)


def pre_filter(pod: Pod, *, release: Release, enabled: bool = True) -> frozenset[str] | None:
    """The features the pod needs of its node (None: none, or the gate is off: Skip)."""
    if not enabled:
        return None
    needed = frozenset(
        name
        for name, since, infer in _FEATURES
        if (since is None or release >= since) and infer(pod)
    )
    return needed or None


def filter(needed: frozenset[str], node: Node) -> str | None:
    """The node declares every feature the pod needs (Unschedulable and unresolvable)."""
    if needed <= set(node.status.declared_features):
        return None
    return REASON
