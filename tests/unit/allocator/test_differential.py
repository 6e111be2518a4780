"""Differential test: our allocator against upstream's, on random inputs.

The oracle (hack/allocator-oracle) runs k8s.io/dynamic-resource-allocation v0.36.3's
structured allocator ("experimental" channel) on the same JSON; both must agree on the outcome
and, when it fits, on every device, request name, config, node selector and consumed capacity
(shareIDs normalised). Failures found here become regression rows in the unit table.

Skipped only when no Go toolchain is installed (the oracle cannot be built).
"""

from __future__ import annotations

import functools
import itertools
import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from operators.allocator import AllocatedState, Allocator, AllocatorError, Features, Status
from operators.api.core import Node
from operators.api.quantity import Quantity
from operators.api.resource import DeviceClass, ResourceClaim, ResourceSlice

from .builders import J
from .engine import engine

ROOT = Path(__file__).resolve().parents[3]
BUILD = ROOT / "hack" / "allocator-oracle" / "build.sh"
DRIVERS = ("a.example.com", "b.example.com")
GATES = tuple(Features.all().gates())


@functools.cache
def oracle() -> str:
    if shutil.which("go") is None:
        pytest.skip("no Go toolchain on PATH: cannot build hack/allocator-oracle")
    done = subprocess.run(
        ["bash", str(BUILD)], capture_output=True, text=True, check=False, timeout=1800
    )
    assert done.returncode == 0, f"building the oracle failed:\n{done.stderr[-4000:]}"
    return done.stdout.strip().splitlines()[-1]


# --- generation --------------------------------------------------------------------------


@st.composite
def device_json(draw: st.DrawFn, name: str, counters: list[str], shareable: bool) -> J:
    d: J = {"name": name}
    attrs: J = {"numa": {"int": draw(st.integers(0, 2))}}
    if draw(st.booleans()):
        attrs["model"] = {"string": draw(st.sampled_from(["x", "y"]))}
    if draw(st.integers(0, 4)) == 0:
        attrs["links"] = {
            "strings": draw(st.lists(st.sampled_from("pqr"), min_size=1, max_size=2, unique=True))
        }
    d["attributes"] = attrs
    use_counters: bool = draw(st.booleans())
    if counters and use_counters:
        d["consumesCounters"] = [
            {
                "counterSet": draw(st.sampled_from(counters)),
                "counters": {"c": {"value": str(draw(st.integers(1, 3)))}},
            }
        ]
    if shareable and draw(st.booleans()):
        d["allowMultipleAllocations"] = True
        cap: J = {"value": str(draw(st.integers(2, 6)))}
        policy = draw(st.sampled_from(["none", "range", "values"]))
        if policy == "range":
            cap["requestPolicy"] = {
                "default": "1",
                "validRange": {"min": "1", "step": "1", "max": "4"},
            }
        elif policy == "values":
            cap["requestPolicy"] = {"default": "1", "validValues": ["1", "2", "4"]}
        d["capacity"] = {"bw": cap}
    if draw(st.integers(0, 5)) == 0:
        d["taints"] = [
            {
                "key": "k",
                "value": "v",
                "effect": draw(st.sampled_from(["NoSchedule", "NoExecute", "None"])),
            }
        ]
    if draw(st.integers(0, 6)) == 0:
        d["bindingConditions"] = ["ready"]
        d["bindingFailureConditions"] = ["failed"]
    return d


@st.composite
def problem(draw: st.DrawFn) -> J:
    features = {g: draw(st.booleans()) if draw(st.integers(0, 11)) == 0 else True for g in GATES}
    slices: list[J] = []
    for p in range(draw(st.integers(1, 3))):
        driver = DRIVERS[p % 2]
        pool_name = f"pool-{p}"
        where = draw(st.sampled_from(["n1", "n1", "all", "n2", "selector"]))
        counters = ["cs"] if draw(st.booleans()) else []
        n_slices = draw(st.integers(1, 2))
        total = n_slices + (1 if counters else 0)
        # Sometimes a slice is missing: an incomplete pool.
        declared = total + (1 if draw(st.integers(0, 8)) == 0 else 0)
        for s in range(n_slices):
            devices = [
                draw(device_json(f"d{s}{k}", counters, shareable=True))
                for k in range(draw(st.integers(0, 3)))
            ]
            spec: J = {
                "driver": driver,
                "pool": {"name": pool_name, "generation": 1, "resourceSliceCount": declared},
                "devices": devices,
            }
            _place(spec, where)
            slices.append({"metadata": {"name": f"{pool_name}-s{s}"}, "spec": spec})
        if counters:
            spec = {
                "driver": driver,
                "pool": {"name": pool_name, "generation": 1, "resourceSliceCount": declared},
                "sharedCounters": [
                    {"name": "cs", "counters": {"c": {"value": str(draw(st.integers(1, 5)))}}}
                ],
            }
            _place(spec, where)
            slices.append({"metadata": {"name": f"{pool_name}-counters"}, "spec": spec})
    classes = [
        {
            "metadata": {"name": f"cls-{i}"},
            "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{d}"'}}]},
        }
        for i, d in enumerate(DRIVERS)
    ]
    claims = [draw(claim_json(f"c{i}")) for i in range(draw(st.integers(1, 2)))]
    history = [draw(claim_json(f"h{i}")) for i in range(draw(st.integers(0, 2)))]
    return {
        "features": features,
        "slices": slices,
        "classes": classes,
        "claims": claims,
        "history": history,
    }


def _place(spec: J, where: str) -> None:
    if where in ("n1", "n2"):
        spec["nodeName"] = where
    elif where == "all":
        spec["allNodes"] = True
    else:
        spec["nodeSelector"] = {
            "nodeSelectorTerms": [
                {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["z1"]}]}
            ]
        }


@st.composite
def exact_json(draw: st.DrawFn, name: str, sub: bool) -> J:
    r: J = {"deviceClassName": f"cls-{draw(st.integers(0, 1))}"}
    if draw(st.integers(0, 4)) == 0:
        r["allocationMode"] = "All"
    else:
        r["allocationMode"] = "ExactCount"
        r["count"] = draw(st.integers(1, 2))
    if draw(st.booleans()):
        bound = draw(st.integers(0, 2))
        expression = (
            f'device.attributes["{DRIVERS[0]}"].numa <= {bound} || device.driver == "{DRIVERS[1]}"'
        )
        r["selectors"] = [{"cel": {"expression": expression}}]
    if draw(st.integers(0, 3)) == 0:
        r["tolerations"] = [
            {
                "key": "k",
                "operator": "Exists",
                "effect": draw(st.sampled_from(["NoSchedule", "NoExecute"])),
            }
        ]
    if draw(st.integers(0, 5)) == 0:
        r["capacity"] = {"requests": {"bw": str(draw(st.integers(1, 3)))}}
    if not sub and draw(st.integers(0, 6)) == 0:
        r["adminAccess"] = True
    if sub:
        r["name"] = name
    return r


@st.composite
def claim_json(draw: st.DrawFn, name: str) -> J:
    requests: list[J] = []
    for i in range(draw(st.integers(1, 2))):
        if draw(st.integers(0, 3)) == 0:
            subs = [draw(exact_json(f"s{j}", True)) for j in range(draw(st.integers(1, 3)))]
            requests.append({"name": f"r{i}", "firstAvailable": subs})
        else:
            requests.append({"name": f"r{i}", "exactly": draw(exact_json(f"r{i}", False))})
    devices: J = {"requests": requests}
    kind = draw(st.sampled_from(["none", "none", "match", "distinct", "match-links"]))
    attr = {"match": "numa", "distinct": "numa", "match-links": "links"}.get(kind)
    if attr is not None:
        key = "distinctAttribute" if kind == "distinct" else "matchAttribute"
        devices["constraints"] = [{key: f"{DRIVERS[0]}/{attr}"}]
    if draw(st.integers(0, 3)) == 0:
        devices["config"] = [
            {"requests": ["r0"], "opaque": {"driver": DRIVERS[0], "parameters": {"x": 1}}}
        ]
    return {"metadata": {"name": name, "namespace": "ns"}, "spec": {"devices": devices}}


# --- running both ------------------------------------------------------------------------

NODE = {"metadata": {"name": "n1", "labels": {"zone": "z1"}}}


def features_of(p: J) -> Features:
    return Features.from_gates(p["features"])


def ours(p: J, allocated: list[J]) -> J:
    f = features_of(p)
    ids = itertools.count()
    a = Allocator(
        f,
        AllocatedState.from_claims([ResourceClaim.load(c) for c in allocated], f),
        [DeviceClass.load(c) for c in p["classes"]],
        [ResourceSlice.load(s) for s in p["slices"]],
        engine(),
        share_ids=lambda: f"00000000-0000-0000-0000-{next(ids):012d}",
    )
    try:
        out = a.allocate(Node.load(NODE), [ResourceClaim.load(c) for c in p["claims"]])
    except AllocatorError as e:
        return {"outcome": "error", "error": str(e), "allocations": []}
    if out.status is Status.ERROR:
        return {"outcome": "error", "error": str(out.error), "allocations": []}
    return {"outcome": out.status.value, "allocations": [r.dump() for r in out.results]}


def theirs(p: J, allocated: list[J], claims: list[J] | None = None) -> J:
    payload = {
        "features": p["features"],
        "node": NODE,
        "classes": p["classes"],
        "slices": p["slices"],
        "claims": p["claims"] if claims is None else claims,
        "allocated": allocated,
    }
    done = subprocess.run(
        [oracle()],
        input=json.dumps(payload),
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    result: J = json.loads(done.stdout)
    return result


def history(p: J) -> list[J]:
    """Allocate the history claims one by one with the oracle, as the scheduler would have."""
    done: list[J] = []
    for c in p["history"]:
        out = theirs(p, done, [c])
        if out["outcome"] == "success":
            done.append({**c, "status": {"allocation": out["allocations"][0]}})
    return done


def normal(obj: Any) -> Any:
    if isinstance(obj, dict):
        out: J = {}
        for k, v in obj.items():
            if v in (None, [], {}):
                continue
            if k == "shareID":
                out[k] = "<share>"
            elif k == "consumedCapacity":
                out[k] = {n: Quantity(x).canonical() for n, x in v.items()}
            elif k == "parameters":
                out[k] = v
            else:
                out[k] = normal(v)
        return out
    if isinstance(obj, list):
        return [normal(x) for x in obj]
    return obj


@settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
@given(problem())
def test_same_as_upstream(p: J) -> None:
    oracle()
    allocated = history(p)
    want = theirs(p, allocated)
    got = ours(p, allocated)
    assert got["outcome"] == want["outcome"], (got, want)
    if want["outcome"] == "success":
        assert normal(got["allocations"]) == normal(want["allocations"])
