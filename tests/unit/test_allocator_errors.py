"""No allocator error escapes the scheduler's cycle or ``kopf-dra simulate``.

Every AllocatorError type (found by walking the class tree, so a new one is covered when it is
added) is raised from inside the search, on some of the nodes, at its start (where validation
raises) or at one of its steps. The cycle and simulate must answer, never raise, and the answer
must carry the error: the pod's error for bad input, the node's failure for anything else, a
timed-out verdict for a spent budget. An "All" request on a pool being updated once escaped
both (a traceback instead of a PodScheduled reason or JSON).
"""

from __future__ import annotations

import contextlib
import io
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NoReturn
from unittest import mock

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from operators.allocator import AllocatorError, InvalidInputError, OutOfTimeError
from operators.allocator.search import Search
from operators.cel.syntax import allow_deep_recursion
from operators.scheduling.cycle import KnownOutcome, run_cycle, unschedulable_message
from operators.simulate import main
from tests.unit.allocator.builders import (
    CLAIM0,
    CLASS_A,
    DRIVER_A,
    REQ0,
    claim,
    device,
    device_class,
    request,
    slice_,
)
from tests.unit.scheduling.builders import NS, allocator, in_namespace, node, pod

NODES = ("node-1", "node-2", "node-3")
allow_deep_recursion()  # what CEL's first compile does, before hypothesis notes the limit
NODE_ERROR = "node(s) had errors in their resource pools: "


def error_types() -> list[type[AllocatorError]]:
    """AllocatorError and every subclass of it, however deep."""
    found: list[type[AllocatorError]] = [AllocatorError]
    for cls in found:  # grows while it is walked
        found.extend(cls.__subclasses__())
    return found


ERRORS = error_types()


def test_the_walk_finds_the_errors_the_search_raises() -> None:
    names = {cls.__name__ for cls in ERRORS}
    assert {"IncompletePoolError", "InvalidPoolError", "InvalidSelectorError"} <= names
    assert {"OutOfTimeError", "TooManyDevicesError", "ClassNotFoundError"} <= names


@contextlib.contextmanager
def raising(
    error: type[AllocatorError], on: frozenset[str], at_step: int | None
) -> Iterator[list[tuple[str, str]]]:
    """Search.run raises ``error`` on the nodes ``on``: before validating (``at_step`` None)
    or at that step of the search (at its end, if it ends sooner). Yields what was raised:
    (node, message) in order."""
    raised: list[tuple[str, str]] = []
    run, step = Search.run, Search._allocate_one

    def fail(search: Search) -> NoReturn:
        name = search.node.metadata.name or ""
        message = f"{error.__name__} from the search on {name}"
        raised.append((name, message))
        raise error(message)

    def run_raising(search: Search) -> bool:
        if search.node.metadata.name not in on:
            return run(search)
        if at_step is None:
            fail(search)
        run(search)
        fail(search)  # the search ended before that step

    def step_raising(search: Search, *args: Any, **kwargs: Any) -> bool:
        if search.node.metadata.name in on and at_step is not None and search.steps >= at_step:
            fail(search)
        return step(search, *args, **kwargs)

    with (
        mock.patch.object(Search, "run", run_raising),
        mock.patch.object(Search, "_allocate_one", step_raising),
    ):
        yield raised


injections = st.tuples(
    st.sampled_from(ERRORS),
    st.frozensets(st.sampled_from(NODES), min_size=1),
    st.one_of(st.none(), st.integers(1, 4)),
)


def two_gpus_each() -> list[Any]:
    return [
        slice_(f"slice-{n}", n, f"pool-{n}", DRIVER_A, device("gpu-0"), device("gpu-1"))
        for n in NODES
    ]


@settings(max_examples=200, deadline=None)
@given(
    injection=injections,
    count=st.integers(1, 3),
    best_only=st.booleans(),
    warm=st.booleans(),
)
def test_the_cycle_answers_whatever_the_search_raises(
    injection: tuple[type[AllocatorError], frozenset[str], int | None],
    count: int,
    best_only: bool,
    warm: bool,
) -> None:
    """``warm``: an earlier cycle left its verdicts (the scheduler's known-unsatisfiable
    nodes), so a skipped node's outcome is computed again for the explanation."""
    error, on, at_step = injection
    classes, slices = [device_class(CLASS_A, DRIVER_A)], two_gpus_each()
    c = in_namespace(claim(CLAIM0, request(REQ0, CLASS_A, count)))
    nodes = [node(n) for n in NODES]
    known: dict[str, KnownOutcome] = {}
    if warm:
        run_cycle(pod(), [c], nodes, {}, allocator(classes, slices), known_unsatisfiable=known)

    with raising(error, on, at_step) as raised:
        got = run_cycle(
            pod(),
            [c],
            nodes,
            {},
            allocator(classes, slices),
            best_only=best_only,
            known_unsatisfiable=known,
        )
    fitting = {f.node for f in got.fits}
    assert not fitting & {n for n, _ in raised}
    if not raised:  # nothing visited a failing node: the verdict is the search's own
        return
    first = raised[0][1]
    if issubclass(error, InvalidInputError):
        assert got.pod_error == first
        assert not fitting
    elif issubclass(error, OutOfTimeError):
        assert got.timed_out
        assert got.failures[raised[0][0]] == first
    else:
        for name, message in raised:
            assert got.failures[name] == NODE_ERROR + message
    if not fitting:
        assert first in unschedulable_message(len(nodes), got)


# --- simulate ------------------------------------------------------------------------------


def documents() -> list[dict[str, Any]]:
    """Three nodes with two GPUs each; on node-1 a pod of a lower priority holds gpu-0 (a
    victim for preemption, whose search allocates too); pod ``high-N`` asks for N GPUs."""
    docs: list[dict[str, Any]] = [
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "DeviceClass",
            "metadata": {"name": CLASS_A},
            "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{DRIVER_A}"'}}]},
        }
    ]
    for value, name in ((10, "low"), (1000, "high")):
        docs.append(
            {
                "apiVersion": "scheduling.k8s.io/v1",
                "kind": "PriorityClass",
                "metadata": {"name": name},
                "value": value,
            }
        )
    for n in NODES:
        ready = {"conditions": [{"type": "Ready", "status": "True"}]}
        docs.append({"apiVersion": "v1", "kind": "Node", "metadata": {"name": n}, "status": ready})
    for gpus in two_gpus_each():
        docs.append({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice"} | gpus.dump())
    held = {
        "devices": {
            "results": [
                {"request": REQ0, "driver": DRIVER_A, "pool": "pool-node-1", "device": "gpu-0"}
            ]
        },
        "nodeSelector": {
            "nodeSelectorTerms": [
                {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["node-1"]}]}
            ]
        },
    }
    for count in (1, 2, 3):
        docs.append(
            {
                "apiVersion": "resource.k8s.io/v1",
                "kind": "ResourceClaim",
                "metadata": {"name": f"gpus-{count}", "namespace": NS},
                "spec": claim(CLAIM0, request(REQ0, CLASS_A, count)).dump()["spec"],
            }
        )
        docs.append(pod_doc(f"high-{count}", "high", f"gpus-{count}"))
    docs.append(
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaim",
            "metadata": {"name": "held", "namespace": NS},
            "spec": claim("held", request(REQ0, CLASS_A, 1)).dump()["spec"],
            "status": {
                "allocation": held,
                "reservedFor": [{"resource": "pods", "name": "low", "uid": "low-uid"}],
            },
        }
    )
    docs.append(pod_doc("low", "low", "held", node_name="node-1"))
    return docs


def pod_doc(name: str, priority: str, claim_name: str, node_name: str | None = None) -> Any:
    spec: dict[str, Any] = {
        "priorityClassName": priority,
        "resourceClaims": [{"name": "gpu", "resourceClaimName": claim_name}],
        "containers": [{"name": "c", "image": "busybox"}],
    }
    status: dict[str, Any] = {"phase": "Pending"}
    if node_name is not None:
        spec["nodeName"], status["phase"] = node_name, "Running"
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": NS, "uid": f"{name}-uid"},
        "spec": spec,
        "status": status,
    }


@pytest.fixture(scope="module")
def snapshot(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("errors") / "snapshot.yaml"
    path.write_text(yaml.safe_dump_all(documents()))
    return path


def simulate(*argv: str) -> tuple[int, Any]:
    out = io.StringIO()
    code = main(list(argv), out=out)
    return code, json.loads(out.getvalue())


@settings(max_examples=200, deadline=None)
@given(injection=injections, count=st.integers(1, 3), target=st.sampled_from(NODES))
def test_simulate_answers_whatever_the_search_raises(
    snapshot: Path,
    injection: tuple[type[AllocatorError], frozenset[str], int | None],
    count: int,
    target: str,
) -> None:
    """A pod (with preemption's search after an unsatisfiable cycle), and claims on a node."""
    error, on, at_step = injection
    with raising(error, on, at_step) as raised:
        code, answer = simulate("-f", str(snapshot), "--pod", f"{NS}/high-{count}")
    assert answer["node"] not in {n for n, _ in raised}
    if raised and issubclass(error, InvalidInputError):
        assert (code, answer["outcome"], answer["error"]) == (2, "error", raised[0][1])
    elif raised:
        assert code == (0 if answer["outcome"] == "success" else 1)
        if answer["outcome"] != "success":
            assert raised[0][1] in answer["reasons"][0]
        for name, message in raised:
            said = answer["nodes"][name]
            assert message in said["reason"]
            assert said["outcome"] == ("unsatisfiable" if error is OutOfTimeError else "error")
    with raising(error, on, at_step) as raised:
        code, answer = simulate(
            "-f", str(snapshot), "--node", target, "--claim", f"{NS}/gpus-{count}"
        )
    if target in on:
        assert raised, "the node's search ran"
        assert (code, answer["outcome"], answer["error"]) == (2, "error", raised[0][1])
    else:
        assert not raised
        assert answer["outcome"] in ("success", "unsatisfiable")
