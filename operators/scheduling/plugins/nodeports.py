"""NodePorts (``plugins/nodeports``): a pod whose containers ask for host ports goes only to a
node where no placed pod holds one of them.

The ports are upstream's ``util.GetHostPorts``: every container's ports with a hostPort above 0,
and those of the init containers that run all along (sidecars, ``restartPolicy: Always``);
other init containers have exited before the others start. A node's ports in use are the same
ports of its pods, kept as ``HostPortInfo`` (hostIP -> {(protocol, port)}), an empty hostIP
counting as 0.0.0.0 and an empty protocol as TCP. A wanted port conflicts with a held one of the
same protocol and number when either hostIP is 0.0.0.0 or both are the same ("::" is no
wildcard, as upstream).

Nothing is cached: ``filter`` reads the node's pods from the snapshot it is given, so preemption
gets a node's answer with victims gone by handing it a snapshot without them
(``snapshot.without_pods``). The refusal is Unschedulable: evicting the holder frees the port.
Releases: 1.37 added the InPlacePodVerticalScalingSchedulerPreemption gate (alpha, off; absent
in 1.36): with it a pod whose resize is deferred skips the plugin. 1.38 is as 1.37.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from typing import Final

from operators.api.core import ContainerPort, Node, Pod
from operators.scheduling.snapshot import Snapshot

#: ErrReason, the node's status message.
REASON: Final = "node(s) didn't have free ports for the requested pod ports"
#: DefaultBindAllHostIP: the hostIP that binds every address of the node.
BIND_ALL: Final = "0.0.0.0"
_TCP: Final = "TCP"

#: A node's ports in use: hostIP -> {(protocol, port)} (upstream's HostPortInfo).
UsedPorts = Mapping[str, frozenset[tuple[str, int]]]


def host_ports(pod: Pod) -> tuple[ContainerPort, ...]:
    """The pod's ports that take a port of its node: sidecars' first, then the containers'."""
    sidecars = (c for c in pod.spec.init_containers if c.restart_policy == "Always")
    return tuple(
        port
        for containers in (sidecars, pod.spec.containers)
        for container in containers
        for port in container.ports
        if (port.host_port or 0) > 0
    )


def _key(port: ContainerPort) -> tuple[str, str, int]:
    """(hostIP, protocol, port) with upstream's defaults for the empty ones."""
    return port.host_ip or BIND_ALL, port.protocol or _TCP, port.host_port or 0


def used_ports(pods: Iterable[Pod]) -> UsedPorts:
    """The host ports the pods hold, by hostIP."""
    used: dict[str, set[tuple[str, int]]] = {}
    for pod in pods:
        for port in host_ports(pod):
            ip, protocol, number = _key(port)
            used.setdefault(ip, set()).add((protocol, number))
    return {ip: frozenset(held) for ip, held in used.items()}


def conflicts(port: ContainerPort, used: UsedPorts) -> bool:
    """HostPortInfo.CheckConflict: 0.0.0.0 wanted conflicts with any hostIP holding the
    (protocol, port); another hostIP with itself and 0.0.0.0."""
    ip, protocol, number = _key(port)
    if number <= 0:
        return False
    wanted = (protocol, number)
    holders: Iterator[frozenset[tuple[str, int]]]
    if ip == BIND_ALL:
        holders = iter(used.values())
    else:
        holders = (used[key] for key in (BIND_ALL, ip) if key in used)
    return any(wanted in held for held in holders)


def fits_ports(wanted: Iterable[ContainerPort], used: UsedPorts) -> bool:
    return not any(conflicts(port, used) for port in wanted)


def _resize_deferred(pod: Pod) -> bool:
    """component-helpers' IsPodResizeDeferred: the first PodResizePending says Deferred."""
    condition = pod.condition("PodResizePending")
    return condition is not None and condition.reason == "Deferred"


def pre_filter(
    pod: Pod,
    snapshot: Snapshot | None = None,
    *,
    skip_deferred_resize: bool = False,
) -> tuple[ContainerPort, ...] | None:
    """The pod's host ports; None when it has none (Skip). ``skip_deferred_resize``: 1.37's
    InPlacePodVerticalScalingSchedulerPreemption gate (alpha, off), which skips a pod whose
    resize is deferred. The snapshot is not read: the state depends on the pod alone."""
    del snapshot
    if skip_deferred_resize and _resize_deferred(pod):
        return None
    return host_ports(pod) or None


def filter(
    state: tuple[ContainerPort, ...], pod: Pod, node: Node, snapshot: Snapshot
) -> str | None:
    """REASON when a pod on the node holds one of the wanted ports (Unschedulable)."""
    del pod
    if fits_ports(state, used_ports(snapshot.pods_on(node.metadata.name or ""))):
        return None
    return REASON


def fits(pod: Pod, pods_on_node: Iterable[Pod]) -> bool:
    """Fits: the pod's ports against the node's pods (preemption's and the queue's check)."""
    return fits_ports(host_ports(pod), used_ports(pods_on_node))


def resolvable(reason: str) -> bool:
    """Every NodePorts refusal is Unschedulable: evicting the pod holding the port helps."""
    return reason == REASON
