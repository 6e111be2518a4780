"""Differential runs of kopf-dra's allocator against upstream's (hack/allocator-oracle).

One oracle per Kubernetes release kopf-dra speaks (hack/allocator-oracle/v0.MINOR.PATCH/, that
release's k8s.io/dynamic-resource-allocation: v0.36.3 for 1.36, v0.37.2 for 1.37), each compared
with kopf-dra's allocator as that release (``Features.kubernetes``). The oracle runs the
structured allocator's "experimental" channel (which kopf-dra follows, whatever the gates) on
the same JSON; both must agree on the outcome and, when it fits, on every device, request
name, config, node selector and consumed capacity (shareIDs normalised). An exception out of
``Allocator.allocate`` other than InvalidInputError (what it may raise for bad claims) is a
finding too: the scheduler's cycle would not survive it.

``python -m tests.unit.allocator.differential --examples 20000`` generates that many random
problems per release (a random seed, printed, unless given; ``--kubernetes 1.37`` for one) and
prints every distinct disagreement (``make allocator-oracle``); ``test_differential.py`` draws
150 per release with ``make test``. The generator draws each release's gates: 1.37's
DRAFractionalCapacityRange, DRADeviceCompatibilityGroups, DRADerivedAttributes and
DRAOptionalNodeOperations on and off, with slices and claims that use their fields either way
and a node that declares DRAOptionalNodeOperations or not; 1.36 knows none of them and ignores
the fields. 1.38's problems (``--kubernetes 1.38`` only) add what its allocator does otherwise:
capacity names with and without the driver's domain (on devices and in requests, now and then
both), version attributes and lists that differ in build metadata with constraints on them, and
devices that held shares before their slice stopped allowing multiple allocations.
"""

from __future__ import annotations

import argparse
import copy
import functools
import itertools
import json
import random
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

from hypothesis import strategies as st

from operators.allocator import AllocatedState, Allocator, Features, InvalidInputError, Status
from operators.api.core import Node
from operators.api.features import DEFAULT_RELEASE, Release
from operators.api.quantity import Quantity
from operators.api.resource import DeviceClass, ResourceClaim, ResourceSlice
from operators.cel.syntax import allow_deep_recursion

from .builders import J
from .engine import engine

ROOT = Path(__file__).resolve().parents[3]
ORACLES = ROOT / "hack" / "allocator-oracle"
BUILD = ORACLES / "build.sh"
DRIVERS = ("a.example.com", "b.example.com")
#: The releases compared, oldest first: one oracle module directory each.
KUBERNETES = ("1.36", "1.37", "1.38")
#: The release of a problem that names none: the project's default.
DEFAULT = str(DEFAULT_RELEASE)
_NEW_IN_1_37 = (
    "DRAFractionalCapacityRange",
    "DRADeviceCompatibilityGroups",
    "DRADerivedAttributes",
    "DRAOptionalNodeOperations",
)
#: Gates a release adds: drawn on and off.
NEW_GATES = {"1.37": _NEW_IN_1_37, "1.38": _NEW_IN_1_37}
#: Gates drawn for every release (mostly on, as a cluster runs them).
GATES = tuple(g for g in Features.all().gates() if g not in NEW_GATES["1.37"])
allow_deep_recursion()  # what CEL's first compile does, before hypothesis notes the limit


class NoToolchainError(RuntimeError):
    """No Go toolchain: the oracle cannot be built."""


def oracle_version(kubernetes: str) -> str:
    """The library version (module directory) of a release's oracle: 1.37 is v0.37.x."""
    _, minor = kubernetes.split(".")
    found = sorted(p.name for p in ORACLES.glob(f"v0.{minor}.*") if (p / "go.mod").is_file())
    if len(found) != 1:
        raise LookupError(f"want one oracle module for Kubernetes {kubernetes}, found {found}")
    return found[0]


@functools.cache
def oracle(kubernetes: str = DEFAULT) -> str:
    """A release's oracle binary, built once per source version (hack/allocator-oracle/build.sh)."""
    if shutil.which("go") is None:
        raise NoToolchainError("no Go toolchain on PATH: cannot build hack/allocator-oracle")
    done = subprocess.run(
        ["bash", str(BUILD), oracle_version(kubernetes)],
        capture_output=True,
        text=True,
        check=False,
        timeout=1800,
    )
    if done.returncode != 0:
        raise RuntimeError(f"building the oracle failed:\n{done.stderr[-4000:]}")
    return done.stdout.strip().splitlines()[-1]


# --- generation --------------------------------------------------------------------------


#: 1.38: version attribute values, some differing in build metadata only.
VERSIONS = ("1.0.0", "1.0.0+b1", "1.0.0+b2", "1.0.0-rc.1+b1", "2.0.0")

#: Capacity request policies: whole units, and (1.37's DRAFractionalCapacityRange) fractions.
POLICIES: dict[str, J] = {
    "range": {"default": "1", "validRange": {"min": "1", "step": "1", "max": "4"}},
    "values": {"default": "1", "validValues": ["1", "2", "4"]},
    "quarters": {"default": "250m", "validRange": {"min": "250m", "step": "250m", "max": "1"}},
    "halves-from-one": {"validRange": {"min": "1", "step": "500m"}},
    "tenths": {"validRange": {"min": "100m", "step": "0.1", "max": "2500m"}},
}


@st.composite
def device_json(
    draw: st.DrawFn,
    name: str,
    counters: list[str],
    shareable: bool,
    groups: bool,
    focus: bool = False,
    driver: str | None = None,
) -> J:
    """``focus``: a device for 1.37's new features, counted and plain (see ``problem``).
    ``driver`` (1.38's problems): versions, and capacity names qualified with it or not."""
    d: J = {"name": name}
    attrs: J = {"numa": {"int": draw(st.integers(0, 2))}}
    if draw(st.booleans()):
        attrs["model"] = {"string": draw(st.sampled_from(["x", "y"]))}
    if draw(st.integers(0, 4)) == 0:
        attrs["links"] = {
            "strings": draw(st.lists(st.sampled_from("pqr"), min_size=1, max_size=2, unique=True))
        }
    if driver is not None:
        if draw(st.booleans()):
            attrs["ver"] = {"version": draw(st.sampled_from(VERSIONS))}
        if draw(st.integers(0, 3)) == 0:
            versions = st.lists(st.sampled_from(VERSIONS), min_size=1, max_size=2, unique=True)
            attrs["vers"] = {"versions": draw(versions)}
    d["attributes"] = attrs
    use_counters: bool = focus or draw(st.booleans())
    if counters and use_counters:
        use: J = {
            "counterSet": draw(st.sampled_from(counters)),
            "counters": {"c": {"value": str(draw(st.integers(1, 2 if focus else 3)))}},
        }
        if groups and draw(st.integers(0, 4)):  # now and then a device of none
            use["compatibilityGroups"] = draw(
                st.lists(st.sampled_from(["g1", "g2", "g3"]), min_size=1, max_size=2, unique=True)
            )
        d["consumesCounters"] = [use]
    if focus:
        return d
    if shareable and draw(st.booleans()):
        d["allowMultipleAllocations"] = True
        if draw(st.integers(0, 5)) == 0:  # shared, but no capacity to count
            return d
        policy = draw(st.sampled_from(["none", *POLICIES]))
        cap: J = {"value": draw(st.sampled_from(["2", "3", "4", "6", "1", "2500m"]))}
        if policy != "none":
            cap["requestPolicy"] = POLICIES[policy]
        d["capacity"] = {"bw": cap}
        if driver is not None:  # 1.38: the driver's "bw", however it is spelled
            spelling = draw(st.sampled_from(["bare", "qualified", "both"]))
            if spelling == "qualified":
                d["capacity"] = {f"{driver}/bw": cap}
            elif spelling == "both":
                other = {"value": draw(st.sampled_from(["1", "3", "6"]))}
                first, second = draw(st.permutations([("bw", other), (f"{driver}/bw", cap)]))
                d["capacity"] = dict([first, second])
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
def problem(draw: st.DrawFn, kubernetes: str = DEFAULT) -> J:
    """One problem as ``kubernetes``'s scheduler would see it: that release's gates, slices
    and claims that use its new fields too."""
    v138 = kubernetes == "1.38"
    often_on = (*GATES, *NEW_GATES.get(kubernetes, ()))
    features = {g: draw(st.booleans()) if draw(st.integers(0, 11)) == 0 else True for g in GATES}
    for g in NEW_GATES.get(kubernetes, ()):
        features[g] = draw(st.booleans())
    assert set(features) == set(often_on)
    # A third of 1.37's problems focus on its new features: the older gates on, complete pools
    # on the node with shared counters to spare, plain devices and claims, so that most could
    # be allocated and the groups, derived attributes and node operations decide.
    focus = kubernetes != "1.36" and draw(st.integers(0, 2)) == 0
    if focus:
        features.update(dict.fromkeys(GATES, True))
    slices: list[J] = []
    # 1.36's allocator keys counter sets by pool name alone (kubernetes#140434): one pool name
    # for two drivers only where that is fixed.
    shared_names = kubernetes != "1.36" and draw(st.integers(0, 3)) == 0
    for p in range(draw(st.integers(1, 3))):
        driver = DRIVERS[p % 2]
        pool_name = f"pool-{p // 2 if shared_names else p}"
        places = ["n1", "n1", "all"] if focus else ["n1", "n1", "all", "n2", "selector"]
        where = draw(st.sampled_from(places))
        counters = ["cs"] if focus or draw(st.booleans()) else []
        n_slices = draw(st.integers(1, 2))
        total = n_slices + (1 if counters else 0)
        # Sometimes a slice is missing: an incomplete pool.
        declared = total + (1 if not focus and draw(st.integers(0, 8)) == 0 else 0)
        for s in range(n_slices):
            groups = bool(counters) and draw(st.integers(0, 1 if focus else 2)) == 0
            devices = [
                draw(
                    device_json(f"d{s}{k}", counters, True, groups, focus, driver if v138 else None)
                )
                for k in range(draw(st.integers(1 if focus else 0, 3)))
            ]
            spec: J = {
                "driver": driver,
                "pool": {"name": pool_name, "generation": 1, "resourceSliceCount": declared},
                "devices": devices,
            }
            _place(spec, where)
            if draw(st.integers(0, 9)) == 9:  # hypothesis draws 0 far more often than 1 in 10
                spec["skipNodeOperations"] = ["NodePrepareResources"]
            slices.append({"metadata": {"name": f"{driver[0]}{pool_name}-s{s}"}, "spec": spec})
        if counters:
            spec = {
                "driver": driver,
                "pool": {"name": pool_name, "generation": 1, "resourceSliceCount": declared},
                "sharedCounters": [
                    {
                        "name": "cs",
                        "counters": {"c": {"value": str(draw(st.integers(3 if focus else 1, 5)))}},
                    }
                ],
            }
            # The counters' slice sometimes targets another node than the devices'.
            _place(
                spec, where if focus else draw(st.sampled_from([where, where, "n1", "n2", "all"]))
            )
            name = f"{driver[0]}{pool_name}-counters"
            slices.append({"metadata": {"name": name}, "spec": spec})
    classes = [
        {
            "metadata": {"name": f"cls-{i}"},
            "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{d}"'}}]},
        }
        for i, d in enumerate(DRIVERS)
    ]
    claims = [draw(claim_json(f"c{i}", focus, v138)) for i in range(draw(st.integers(1, 2)))]
    node: J = {"metadata": {"name": "n1", "labels": {"zone": "z1"}}}
    if draw(st.booleans()):
        node["status"] = {"declaredFeatures": ["DRAOptionalNodeOperations"]}
    history = [draw(claim_json(f"h{i}", focus, v138)) for i in range(draw(st.integers(0, 2)))]
    out: J = {
        "kubernetes": kubernetes,
        "focus": focus,
        "features": features,
        "slices": slices,
        "classes": classes,
        "node": node,
        "claims": claims,
        "history": history,
    }
    if v138 and history and draw(st.integers(0, 2)) == 0:
        # The history was allocated before some shareable devices stopped allowing multiple
        # allocations: their shares stay (1.38 hands such a device out to nobody else).
        out["history_slices"] = copy.deepcopy(slices)
        for flipped in slices:
            for d in flipped["spec"].get("devices", []):
                if d.get("allowMultipleAllocations") and draw(st.booleans()):
                    del d["allowMultipleAllocations"]
    return out


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


#: Derived attribute names, each with the expressions drawn for it: scalars, lists, values
#: that fail at runtime (a missing attribute, a double) and one that shadows a driver attribute.
DERIVED: dict[str, list[str]] = {
    "derived.example.com/numa": [
        f'device.attributes["{DRIVERS[0]}"].numa',
        f'device.attributes["{DRIVERS[0]}"].numa / 2',
        f'device.attributes["{DRIVERS[0]}"].numa > 0',
    ],
    "derived.example.com/model": [
        f'device.attributes["{DRIVERS[0]}"].model',
        f'"model" in device.attributes["{DRIVERS[0]}"] ? device.attributes["{DRIVERS[0]}"].model '
        ': "none"',
        "device.driver",
    ],
    "derived.example.com/links": [
        f'"links" in device.attributes["{DRIVERS[0]}"] ? device.attributes["{DRIVERS[0]}"].links '
        ": []",
        f'[device.attributes["{DRIVERS[0]}"].numa, 7]',
        "dyn(1.5)",
    ],
    f"{DRIVERS[0]}/numa": [f'device.attributes["{DRIVERS[0]}"].numa % 2'],
}


@st.composite
def exact_json(draw: st.DrawFn, name: str, sub: bool, focus: bool = False, v138: bool = False) -> J:
    r: J = {"deviceClassName": f"cls-{draw(st.integers(0, 1))}"}
    if focus:  # plain: one or two devices, derived attributes half of the time
        if draw(st.integers(0, 3)):  # the derived attributes read the first driver's
            r["deviceClassName"] = "cls-0"
        r["allocationMode"] = "ExactCount"
        r["count"] = draw(st.integers(1, 2))
        if draw(st.booleans()):
            r["derivedAttributes"] = [
                {"name": n, "expression": draw(st.sampled_from(DERIVED[n]))}
                for n in draw(
                    st.lists(st.sampled_from(sorted(DERIVED)), min_size=1, max_size=2, unique=True)
                )
            ]
        if sub:
            r["name"] = name
        return r
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
        amount = draw(st.sampled_from(["1", "2", "3", "250m", "0.5", "300m", "1500m", "1.1"]))
        r["capacity"] = {"requests": {"bw": amount}}
        if v138:  # the driver's "bw" spelled with its domain, another driver's, or both ways
            name_ = draw(st.sampled_from(["bw", *(f"{d}/bw" for d in DRIVERS), "both"]))
            if name_ == "both":
                r["capacity"]["requests"][f"{DRIVERS[0]}/bw"] = "1"
            else:
                r["capacity"] = {"requests": {name_: amount}}
    if draw(st.integers(0, 4)) == 4:  # hypothesis draws 0 far more often than 1 in 5
        names = draw(
            st.lists(st.sampled_from(sorted(DERIVED)), min_size=1, max_size=2, unique=True)
        )
        r["derivedAttributes"] = [
            {"name": n, "expression": draw(st.sampled_from(DERIVED[n]))} for n in names
        ]
    if not sub and draw(st.integers(0, 6)) == 0:
        r["adminAccess"] = True
    if sub:
        r["name"] = name
    return r


@st.composite
def claim_json(draw: st.DrawFn, name: str, focus: bool = False, v138: bool = False) -> J:
    requests: list[J] = []
    for i in range(draw(st.integers(1, 2))):
        if draw(st.integers(0, 3)) == 0:
            subs = [
                draw(exact_json(f"s{j}", True, focus, v138)) for j in range(draw(st.integers(1, 3)))
            ]
            requests.append({"name": f"r{i}", "firstAvailable": subs})
        else:
            exactly = draw(exact_json(f"r{i}", False, focus, v138))
            requests.append({"name": f"r{i}", "exactly": exactly})
    devices: J = {"requests": requests}
    kinds = [
        "none",
        "none",
        "match",
        "distinct",
        "match-links",
        "match-derived",
        "distinct-derived",
    ]
    if v138:  # versions that may differ in build metadata only
        kinds += ["match-ver", "distinct-ver", "match-vers", "distinct-vers"]
    kind = draw(st.sampled_from(kinds))
    attr = {
        "match": "numa",
        "distinct": "numa",
        "match-links": "links",
        "match-ver": "ver",
        "distinct-ver": "ver",
        "match-vers": "vers",
        "distinct-vers": "vers",
    }.get(kind)
    if attr is not None:
        key = "distinctAttribute" if kind.startswith("distinct") else "matchAttribute"
        devices["constraints"] = [{key: f"{DRIVERS[0]}/{attr}"}]
    elif kind != "none":
        key = "distinctAttribute" if kind == "distinct-derived" else "matchAttribute"
        devices["constraints"] = [{key: draw(st.sampled_from(sorted(DERIVED)))}]
    derived = sorted(
        {a["name"] for r in requests for e in _exacts(r) for a in e.get("derivedAttributes", [])}
    )
    if focus:
        # Mostly a constraint on a derived attribute the requests compute, else none.
        devices.pop("constraints", None)
        if derived and draw(st.integers(0, 3)) > 0:
            key = draw(st.sampled_from(["matchAttribute", "distinctAttribute"]))
            devices["constraints"] = [{key: draw(st.sampled_from(derived))}]
    if draw(st.integers(0, 3)) == 0:
        devices["config"] = [
            {"requests": ["r0"], "opaque": {"driver": DRIVERS[0], "parameters": {"x": 1}}}
        ]
    return {"metadata": {"name": name, "namespace": "ns"}, "spec": {"devices": devices}}


def _exacts(request: J) -> list[J]:
    return [request["exactly"]] if "exactly" in request else request["firstAvailable"]


# --- running both ------------------------------------------------------------------------

NODE = {"metadata": {"name": "n1", "labels": {"zone": "z1"}}}


def features_of(p: J) -> Features:
    return Features.from_gates(p["features"], Release.parse(p["kubernetes"]))


def ours(p: J, allocated: list[J]) -> J:
    f = features_of(p)
    ids = itertools.count()
    a = Allocator(
        f,
        AllocatedState.from_claims([ResourceClaim.load(c) for c in allocated], f),
        [DeviceClass.load(c) for c in p["classes"]],
        [ResourceSlice.load(s) for s in p["slices"]],
        # A pre-release's CEL is compared by the CEL oracle; its allocator here with the CEL of
        # the newest release kopf-dra speaks.
        engine(p["kubernetes"] if p["kubernetes"] in KUBERNETES else DEFAULT),
        share_ids=lambda: f"00000000-0000-0000-0000-{next(ids):012d}",
    )
    try:
        node = Node.load(p.get("node", NODE))
        out = a.allocate(node, [ResourceClaim.load(c) for c in p["claims"]])
    except InvalidInputError as e:  # what allocate may raise; anything else is a finding
        return {"outcome": "error", "error": str(e), "allocations": []}
    if out.status is Status.ERROR:
        return {"outcome": "error", "error": str(out.error), "allocations": []}
    return {"outcome": out.status.value, "allocations": [r.dump() for r in out.results]}


def theirs(p: J, allocated: list[J], claims: list[J] | None = None) -> J:
    payload = {
        "features": p["features"],
        "node": p.get("node", NODE),
        "classes": p["classes"],
        "slices": p["slices"],
        "claims": p["claims"] if claims is None else claims,
        "allocated": allocated,
    }
    done = subprocess.run(
        [oracle(p["kubernetes"])],
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
    before = {**p, "slices": p.get("history_slices", p["slices"])}
    for c in p["history"]:
        out = theirs(before, done, [c])
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


def compare(p: J) -> tuple[str | None, J, J]:
    """Run both on ``p`` (its history claims allocated first, by the oracle): (the kind of
    disagreement, "outcome" or "allocations", None when they agree; ours; upstream's)."""
    allocated = history(p)
    want = theirs(p, allocated)
    got = ours(p, allocated)
    if got["outcome"] != want["outcome"]:
        return "outcome", got, want
    if want["outcome"] == "success" and normal(got["allocations"]) != normal(want["allocations"]):
        return "allocations", got, want
    return None, got, want


Finding = tuple[str, J, J, J]  # kind, problem, ours, theirs


def _shape(text: str) -> str:
    """An error message without its names, so that one kind of error is one finding."""
    return " ".join(w for w in text.split()[:12] if not any(c in w for c in "/-0123456789"))


def run_corpus(
    examples: int, seed: int, kubernetes: str = DEFAULT
) -> tuple[Counter[str], list[Finding]]:
    """Generate ``examples`` problems (a seed always generates the same ones); (counts, one
    finding per distinct disagreement). Counts: problems, upstream's outcomes, and the
    problems where upstream refused an "All" request on a pool being updated or invalid."""
    from hypothesis import HealthCheck, given, settings
    from hypothesis import seed as seeded

    found: dict[str, Finding] = {}
    counted: Counter[str] = Counter()

    @settings(
        max_examples=examples,
        deadline=None,
        database=None,
        suppress_health_check=list(HealthCheck),
    )
    @given(problem(kubernetes))
    def run(p: J) -> None:
        if counted["problems"] >= examples:
            return
        counted["problems"] += 1
        if counted["problems"] % 1000 == 0:
            print(f"... {counted['problems']} problems, {len(found)} findings", flush=True)
        try:
            kind, got, want = compare(p)
        except Exception as exc:  # a crash is a finding, not the end of a long run
            key = f"crash:{type(exc).__name__}:{_shape(str(exc))}"
            found.setdefault(key, (f"crash {exc!r}", p, {}, {}))
            counted["crashes"] += 1
            return
        counted[f"upstream {want['outcome']}"] += 1
        if "asks for all devices" in (want.get("error") or ""):
            counted["upstream: all devices of a pool being updated or invalid"] += 1
        if kind is None:
            return
        key = f"{kind}:{got['outcome']}->{want['outcome']}:{_shape(want.get('error') or '')}"
        found.setdefault(key, (kind, p, got, want))
        counted["disagreements"] += 1

    seeded(seed)(run)()
    return counted, list(found.values())


def describe(finding: Finding) -> str:
    kind, p, got, want = finding
    lines = [f"- [{kind}]"]
    if got or want:
        lines.append(f"  ours {got['outcome']} {got.get('error') or ''}")
        lines.append(f"  upstream {want['outcome']} {want.get('error') or ''}")
    lines.append(f"  problem {json.dumps(p)}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--examples", type=int, default=20_000, help="problems to run")
    parser.add_argument("--seed", type=int, default=None, help="default: a random one, printed")
    parser.add_argument("--show", type=int, default=20, help="disagreements to print")
    parser.add_argument(
        "--kubernetes",
        action="append",
        choices=KUBERNETES,
        help="the release to compare (repeatable; default: every one kopf-dra follows)",
    )
    args = parser.parse_args(argv)
    seed = args.seed if args.seed is not None else random.randrange(2**32)
    failed = False
    for kubernetes in args.kubernetes or KUBERNETES:
        print(f"Kubernetes {kubernetes} ({oracle_version(kubernetes)}), seed {seed}", flush=True)
        counted, found = run_corpus(args.examples, seed, kubernetes)
        print(
            f"{counted['problems']} problems, {len(found)} distinct disagreements "
            f"({counted['disagreements']} problems disagreed, {counted['crashes']} crashed)"
        )
        for name, n in sorted(counted.items()):
            if name.startswith("upstream"):
                print(f"  {name}: {n}")
        for finding in found[: args.show]:
            print(describe(finding))
        failed = failed or bool(found)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
