"""NodePorts: upstream's node_ports_test.go table, then what the table leaves out (the ports'
defaults, the snapshot's pods, the deferred-resize switch)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest

from operators.api.core import Pod
from operators.scheduling.plugins import nodeports
from operators.scheduling.plugins.nodeports import REASON
from operators.scheduling.snapshot import snapshot_of
from tests.unit.scheduling.builders import node

J = dict[str, Any]
NODE = "m1"


def port(spec: str) -> J:
    """ "PROTOCOL/hostIP/hostPort" as upstream's newPod reads it (empty parts stay unset)."""
    protocol, host_ip, host_port = spec.split("/")
    out: J = {"hostPort": int(host_port)}
    if protocol:
        out["protocol"] = protocol
    if host_ip:
        out["hostIP"] = host_ip
    return out


def pod(
    *ports: str,
    name: str = "p",
    init: Sequence[J] = (),
    conditions: Sequence[J] = (),
) -> Pod:
    container: J = {"name": "container", "image": "pause"}
    if ports:
        container["ports"] = [port(p) for p in ports]
    spec: J = {"containers": [container]}
    if init:
        spec["initContainers"] = list(init)
    status: J = {"conditions": list(conditions)} if conditions else {}
    return Pod.load({"metadata": {"name": name, "uid": name}, "spec": spec, "status": status})


def init_container(*ports: str, sidecar: bool) -> J:
    out: J = {"name": "init-container", "image": "pause", "ports": [port(p) for p in ports]}
    if sidecar:
        out["restartPolicy"] = "Always"
    return out


def run(incoming: Pod, placed: Sequence[Pod]) -> str | None:
    """PreFilter then Filter on node m1 holding ``placed``; "skip" for upstream's Skip."""
    state = nodeports.pre_filter(incoming)
    if state is None:
        return "skip"
    snapshot = snapshot_of([node(NODE)], [(NODE, p) for p in placed])
    return nodeports.filter(state, incoming, node(NODE), snapshot)


# (name, incoming pod, pods on the node, want: None fits, "skip", or the reason)
CASES: list[tuple[str, Pod, list[Pod], str | None]] = [
    ("skip filter", Pod.load({"spec": {"containers": [{"name": "c"}]}}), [], "skip"),
    ("other port", pod("UDP/127.0.0.1/8080"), [pod("UDP/127.0.0.1/9090")], None),
    ("same udp port", pod("UDP/127.0.0.1/8080"), [pod("UDP/127.0.0.1/8080")], REASON),
    ("same tcp port", pod("TCP/127.0.0.1/8080"), [pod("TCP/127.0.0.1/8080")], REASON),
    ("different host ip", pod("TCP/127.0.0.1/8080"), [pod("TCP/127.0.0.2/8080")], None),
    ("different protocol", pod("UDP/127.0.0.1/8080"), [pod("TCP/127.0.0.1/8080")], None),
    (
        "second udp port conflict",
        pod("UDP/127.0.0.1/8000", "UDP/127.0.0.1/8080"),
        [pod("UDP/127.0.0.1/8080")],
        REASON,
    ),
    (
        "first tcp port conflict",
        pod("TCP/127.0.0.1/8001", "UDP/127.0.0.1/8080"),
        [pod("TCP/127.0.0.1/8001", "UDP/127.0.0.1/8081")],
        REASON,
    ),
    (
        "first tcp port conflict due to 0.0.0.0 hostIP",
        pod("TCP/0.0.0.0/8001"),
        [pod("TCP/127.0.0.1/8001")],
        REASON,
    ),
    (
        "TCP hostPort conflict due to 0.0.0.0 hostIP",
        pod("TCP/10.0.10.10/8001", "TCP/0.0.0.0/8001"),
        [pod("TCP/127.0.0.1/8001")],
        REASON,
    ),
    (
        "second tcp port conflict to 0.0.0.0 hostIP",
        pod("TCP/127.0.0.1/8001"),
        [pod("TCP/0.0.0.0/8001")],
        REASON,
    ),
    ("second different protocol", pod("UDP/127.0.0.1/8001"), [pod("TCP/0.0.0.0/8001")], None),
    (
        "UDP hostPort conflict due to 0.0.0.0 hostIP",
        pod("UDP/127.0.0.1/8001"),
        [pod("TCP/0.0.0.0/8001", "UDP/0.0.0.0/8001")],
        REASON,
    ),
    (
        "non-sidecar initContainer using hostPort",
        pod(init=[init_container("TCP//8001", sidecar=False)]),
        [pod("TCP/0.0.0.0/8001")],
        "skip",
    ),
    (
        "TCP hostPort conflict from sidecar initContainer",
        pod(init=[init_container("TCP//8001", sidecar=True)]),
        [pod("TCP/0.0.0.0/8001")],
        REASON,
    ),
    # Beyond upstream's table: the defaults and the node's side of init containers.
    ("empty hostIP is 0.0.0.0 (wanted)", pod("TCP//8001"), [pod("TCP/10.1.1.1/8001")], REASON),
    ("empty hostIP is 0.0.0.0 (held)", pod("TCP/10.1.1.1/8001"), [pod("TCP//8001")], REASON),
    ("empty protocol is TCP", pod("/127.0.0.1/8001"), [pod("TCP/127.0.0.1/8001")], REASON),
    ("hostPort 0 takes no port", pod("TCP/127.0.0.1/0"), [pod("TCP/127.0.0.1/0")], "skip"),
    ("empty node", pod("TCP/127.0.0.1/8001"), [], None),
    (
        "a placed pod's sidecar holds its port",
        pod("TCP/127.0.0.1/8001"),
        [pod(init=[init_container("TCP//8001", sidecar=True)])],
        REASON,
    ),
    (
        "a placed pod's plain init container holds nothing",
        pod("TCP/127.0.0.1/8001"),
        [pod(init=[init_container("TCP//8001", sidecar=False)])],
        None,
    ),
    ("IPv6 :: is no wildcard", pod("TCP/::/8001"), [pod("TCP/::1/8001")], None),
    (
        "SCTP is its own protocol",
        pod("SCTP/127.0.0.1/8001"),
        [pod("TCP/127.0.0.1/8001", "UDP/127.0.0.1/8001")],
        None,
    ),
]


@pytest.mark.parametrize(
    ("incoming", "placed", "want"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_node_ports(incoming: Pod, placed: list[Pod], want: str | None) -> None:
    assert run(incoming, placed) == want


def test_state_is_the_pods_host_ports_sidecars_first() -> None:
    incoming = pod(
        "TCP/127.0.0.1/8080",
        "UDP//0",
        init=[
            init_container("TCP//9000", sidecar=False),
            init_container("UDP/10.0.0.1/9001", sidecar=True),
        ],
    )
    state = nodeports.pre_filter(incoming)
    assert state is not None
    assert [(p.protocol, p.host_ip, p.host_port) for p in state] == [
        ("UDP", "10.0.0.1", 9001),
        ("TCP", "127.0.0.1", 8080),
    ]


def test_deferred_resize_skips_with_the_gate() -> None:
    deferred = [{"type": "PodResizePending", "status": "True", "reason": "Deferred"}]
    incoming = pod("TCP/127.0.0.1/8080", conditions=deferred)
    assert nodeports.pre_filter(incoming, skip_deferred_resize=True) is None
    assert nodeports.pre_filter(incoming) is not None  # 1.37's default: gate off
    infeasible = [{"type": "PodResizePending", "status": "True", "reason": "Infeasible"}]
    assert nodeports.pre_filter(pod("TCP//1", conditions=infeasible), skip_deferred_resize=True)


def test_victims_gone_free_their_ports() -> None:
    """Preemption: the same state against a snapshot without the victim fits."""
    incoming = pod("TCP/127.0.0.1/8080")
    holder = pod("TCP/0.0.0.0/8080", name="holder")
    state = nodeports.pre_filter(incoming)
    assert state is not None
    full = snapshot_of([node(NODE)], [(NODE, holder)])
    assert nodeports.filter(state, incoming, node(NODE), full) == REASON
    empty = snapshot_of([node(NODE)], [])
    assert nodeports.filter(state, incoming, node(NODE), empty) is None
    assert nodeports.resolvable(REASON)


def test_fits_and_used_ports() -> None:
    placed = [pod("TCP/127.0.0.1/80", "UDP//53"), pod("/10.0.0.1/443")]
    assert nodeports.used_ports(placed) == {
        "127.0.0.1": frozenset({("TCP", 80)}),
        "0.0.0.0": frozenset({("UDP", 53)}),
        "10.0.0.1": frozenset({("TCP", 443)}),
    }
    assert nodeports.fits(pod("TCP/127.0.0.2/80"), placed)
    assert not nodeports.fits(pod("UDP/127.0.0.2/53"), placed)
    assert not nodeports.fits(pod("TCP//443"), placed)
    assert nodeports.fits(pod(), placed)
