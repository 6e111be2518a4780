"""The pool validator's decisions: object names, status, conditions, new problems, timing."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from operators.api.ids import PoolID
from operators.api.validation import dns1123_subdomain_errors
from operators.controllers.pool_validator import planning
from operators.controllers.pool_validator.model import PoolStatusStatus, ResourcePoolStatus
from operators.runtime.actions import Create, Delete, ReplaceStatus
from tests.unit.pool_validator.builders import (
    DRIVER,
    POOL,
    claim,
    counter_set,
    device,
    report,
    result,
    slice_,
    uses,
)

CRD = Path(__file__).resolve().parents[3] / "crds" / "resourcepoolstatuses.yaml"
T0, T1 = "2026-01-01T00:00:00Z", "2026-01-01T00:05:00Z"
NOT_YET = planning.Timing()


def plan(r: Any, previous: dict[str, Any] | None = None, **kw: Any) -> planning.PoolPlan:
    before = PoolStatusStatus.load(previous) if previous is not None else None
    timing = kw.pop("timing", NOT_YET)
    return planning.plan_pool(r, before, timing, grace=60, now=kw.pop("now", T0), **kw)


def conditions(status: dict[str, Any]) -> dict[str, tuple[str, str]]:
    return {c["type"]: (c["status"], c["reason"]) for c in status["conditions"]}


VALID = report(
    slice_("counters", counters=[counter_set("gpu-0", memory="40Gi")], count=2),
    slice_("devices", device("p0", uses("gpu-0", memory="10Gi")), count=2),
    claims=(claim("a", result("p0")),),
)
DANGLING = report(
    slice_("counters", counters=[counter_set("gpu-0", memory="40Gi")], count=2),
    slice_("devices", device("p0", uses("gpu-9", memory="10Gi")), count=2),
)
INCOMPLETE = report(slice_("devices", device("p0"), count=2))


# --- names -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "pool",
    [
        PoolID("gpu.example.com", "node-1"),
        PoolID("GPU.Example.com", "Rack/7/Node_1"),
        PoolID("d" * 63, "/".join(["p" * 63] * 4)),
        PoolID("x", "---"),
    ],
    ids=["plain", "slashes-capitals", "longest", "odd"],
)
def test_status_name_is_a_valid_object_name(pool: PoolID) -> None:
    name = planning.status_name(pool)
    assert dns1123_subdomain_errors(name) == []
    assert name == planning.status_name(PoolID(pool.driver, pool.pool))


def test_status_names_differ_for_pools_that_read_the_same() -> None:
    a = planning.status_name(PoolID("gpu.example.com", "a/b"))
    b = planning.status_name(PoolID("gpu.example.com", "a.b"))
    c = planning.status_name(PoolID("gpu.example.com.a", "b"))
    assert len({a, b, c}) == 3
    assert a.startswith("gpu.example.com.a-b-")


def test_status_object_identifies_the_pool() -> None:
    body = planning.status_object(PoolID(DRIVER, "rack/1"))
    parsed = ResourcePoolStatus.load(body)
    assert (body["apiVersion"], body["kind"]) == ("dra.kopf-dra.io/v1alpha1", "ResourcePoolStatus")
    assert (parsed.spec.driver, parsed.spec.pool) == (DRIVER, "rack/1")
    assert body["metadata"]["labels"][planning.MANAGED_BY_LABEL] == planning.MANAGED_BY
    assert "status" not in body


def test_the_status_object_is_created_written_at_its_version_and_deleted_by_uid() -> None:
    pool = PoolID(DRIVER, "rack/1")
    created = planning.creation(pool)
    assert isinstance(created, Create)
    assert created.body == planning.status_object(pool)
    current = {
        **created.body,
        "metadata": {**created.body["metadata"], "uid": "u", "resourceVersion": "5"},
    }
    status = plan(VALID).status
    write = planning.status_write(current, status)
    assert isinstance(write, ReplaceStatus)
    assert (write.body["status"], write.body["metadata"]) == (status, current["metadata"])
    assert planning.status_write({**current, "status": status}, status) is None
    deletion = planning.deletion(current)
    assert isinstance(deletion, Delete)
    assert (deletion.kind, deletion.key, deletion.uid) == (
        "ResourcePoolStatus",
        ("", planning.status_name(pool)),
        "u",
    )


# --- status ------------------------------------------------------------------------------


def test_valid_pool_status() -> None:
    p = plan(VALID)
    s = p.status
    assert conditions(s) == {
        "Complete": ("True", "AllSlicesPublished"),
        "Valid": ("True", "Valid"),
    }
    assert (s["generation"], s["slices"], s["expectedSlices"]) == (1, 2, 2)
    assert s["devices"] == {"total": 1, "allocated": 1}
    assert s["counterSets"] == [
        {
            "name": "gpu-0",
            "slice": "counters",
            "counters": [{"name": "memory", "consumed": "10Gi", "total": "40Gi"}],
        }
    ]
    assert (s["problemCount"], s["problems"]) == (0, [])
    assert p.state == planning.STATE_VALID
    assert p.new_problems == ()
    assert p.requeue_after is None


def test_invalid_pool_status_names_the_first_problem_with_coordinates() -> None:
    p = plan(DANGLING)
    assert conditions(p.status)["Valid"] == ("False", "CounterSetNotFound")
    valid = next(c for c in p.status["conditions"] if c["type"] == "Valid")
    assert valid["message"] == (
        f"pool {DRIVER}/{POOL}, slice devices, device p0: counter set gpu-9 not found"
    )
    assert p.status["problems"] == [
        {
            "code": "CounterSetNotFound",
            "severity": "Error",
            "message": "counter set gpu-9 not found",
            "slice": "devices",
            "device": "p0",
        }
    ]
    assert p.state == planning.STATE_INVALID
    assert [x.code for x in p.new_problems] == ["CounterSetNotFound"]


def test_incomplete_pool_is_unknown_until_complete_and_waits_for_the_grace_period() -> None:
    p = plan(INCOMPLETE, timing=planning.Timing(incomplete_for=10))
    assert conditions(p.status) == {
        "Complete": ("False", "SlicesMissing"),
        "Valid": ("Unknown", "Incomplete"),
    }
    assert p.state == planning.STATE_INCOMPLETE
    assert p.requeue_after == pytest.approx(50)
    assert p.status["problems"] == []


def test_incomplete_for_longer_than_the_grace_period_is_a_warning() -> None:
    p = plan(INCOMPLETE, timing=planning.Timing(incomplete_for=61))
    assert [(e["code"], e["severity"]) for e in p.status["problems"]] == [
        ("IncompleteTooLong", "Warning")
    ]
    assert "only 1 of 2 slices of generation 1" in p.status["problems"][0]["message"]
    assert conditions(p.status)["Valid"] == ("Unknown", "Incomplete")
    assert p.requeue_after is None


def test_stale_slices_are_reported_after_the_grace_period() -> None:
    r = report(slice_("new", device("d0"), generation=2), slice_("old", device("d0")))
    early = plan(r, timing=planning.Timing(stale_for=1))
    assert early.status["staleSlices"] == ["old"]
    assert early.status["problems"] == []
    assert early.requeue_after == pytest.approx(59)
    late = plan(r, timing=planning.Timing(stale_for=60))
    assert [(e["code"], e.get("slice")) for e in late.status["problems"]] == [
        ("StaleGeneration", "old")
    ]
    # A warning leaves the pool valid.
    assert conditions(late.status)["Valid"] == ("True", "Valid")
    assert late.state == planning.STATE_VALID


def test_unchanged_conditions_keep_their_transition_time() -> None:
    first = plan(DANGLING, now=T0).status
    again = plan(DANGLING, first, now=T1).status
    assert again == first
    fixed = plan(VALID, first, now=T1).status
    times = {c["type"]: c["lastTransitionTime"] for c in fixed["conditions"]}
    assert times == {"Complete": T0, "Valid": T1}


def test_only_problems_not_published_before_are_new() -> None:
    first = plan(DANGLING)
    assert len(first.new_problems) == 1
    assert plan(DANGLING, first.status).new_problems == ()
    worse = report(
        slice_("counters", counters=[counter_set("gpu-0", memory="40Gi")], count=2),
        slice_(
            "devices",
            device("p0", uses("gpu-9", memory="10Gi")),
            device("p1", uses("gpu-0", cores="1")),
            count=2,
        ),
    )
    assert [(x.code, x.device) for x in plan(worse, first.status).new_problems] == [
        ("CounterNotFound", "p1")
    ]


def test_problem_list_is_truncated_but_counted() -> None:
    many = report(slice_("s", *(device(f"d{i}", nodeName="node-1") for i in range(10))))
    p = plan(many, max_problems=3)
    assert p.status["problemCount"] == 10
    assert len(p.status["problems"]) == 3
    assert p.codes == ("DeviceNodeSelection",) * 10


# --- the CRD -----------------------------------------------------------------------------


def _schema() -> dict[str, Any]:
    crd = yaml.safe_load(CRD.read_text())
    (version,) = crd["spec"]["versions"]
    schema: dict[str, Any] = version["schema"]["openAPIV3Schema"]
    return schema


def _undeclared(value: Any, schema: dict[str, Any], path: str) -> list[str]:
    """Paths of ``value`` the structural schema would prune (what would make writes loop)."""
    if isinstance(value, dict):
        props = schema.get("properties") or {}
        found = []
        for key, item in value.items():
            if key not in props:
                found.append(f"{path}.{key}")
            else:
                found.extend(_undeclared(item, props[key], f"{path}.{key}"))
        return found
    if isinstance(value, list):
        return [
            x
            for i, item in enumerate(value)
            for x in _undeclared(item, schema["items"], f"{path}[{i}]")
        ]
    return []


@pytest.mark.parametrize("r", [VALID, DANGLING, INCOMPLETE], ids=["valid", "invalid", "incomplete"])
def test_every_status_field_is_declared_in_the_crd(r: Any) -> None:
    body = planning.status_object(r.id)
    body["status"] = plan(r, timing=planning.Timing(incomplete_for=100)).status
    body["metadata"] = {}
    assert _undeclared(body, _schema(), "") == []


def test_printer_columns_point_at_declared_fields() -> None:
    crd = yaml.safe_load(CRD.read_text())
    (version,) = crd["spec"]["versions"]
    names = [c["name"] for c in version["additionalPrinterColumns"]]
    assert names[:7] == ["Driver", "Pool", "Complete", "Valid", "Problems", "Devices", "Allocated"]
    status = _schema()["properties"]["status"]["properties"]
    for column in version["additionalPrinterColumns"]:
        path = column["jsonPath"]
        if path.startswith(".status."):
            assert path.split(".")[2].split("[")[0] in status, path


def test_devices_per_domain_sum_the_pools_local_to_each_domains_nodes() -> None:
    pools = {
        ("gpu", "n1"): ("n1", 2, 1),
        ("gpu", "n2"): ("n2", 2, 0),
        ("gpu", "n3"): ("n3", 4, 4),
        ("net", "fabric"): (None, 8, 2),  # not local to one node: in no domain
        ("gpu", "n4"): ("n4", 1, 0),  # its node has no value of the key
    }
    assert planning.domain_devices(pools, {"n1": "a", "n2": "a", "n3": "b"}) == {
        "a": (4, 1),
        "b": (4, 4),
    }
