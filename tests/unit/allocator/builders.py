"""Small builders for allocator test cases, shaped like upstream's allocator_testing.go helpers.

Objects are built as JSON dicts (what a user would write) and parsed into the API models, so
the table reads like the upstream one and exercises the same parsing as production.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from operators.allocator import Features
from operators.api.core import Node
from operators.api.ids import DeviceID
from operators.api.quantity import Quantity
from operators.api.resource import DeviceClass, ResourceClaim, ResourceSlice

J = dict[str, Any]

REGION1, REGION2 = "region-1", "region-2"
NODE1, NODE2 = "node-1", "node-2"
CLASS_A, CLASS_B = "class-a", "class-b"
DRIVER_A, DRIVER_B = "driver-a", "driver-b"
POOL1, POOL2, POOL3, POOL4 = "pool-1", "pool-2", "pool-3", "pool-4"
REQ0, REQ1, REQ2, REQ3 = "req-0", "req-1", "req-2", "req-3"
SUBREQ0, SUBREQ1 = "subReq-0", "subReq-1"
CLAIM0, CLAIM1 = "claim-0", "claim-1"
SLICE1, SLICE2, SLICE3, SLICE4 = "slice-1", "slice-2", "slice-3", "slice-4"
DEVICE0, DEVICE1, DEVICE2, DEVICE3, DEVICE4 = (f"device-{i}" for i in range(5))
COUNTER_SET1, COUNTER_SET2 = "counter-set-1", "counter-set-2"
CAPACITY0, CAPACITY1 = "capacity-0", "capacity-1"
FIXED_SHARE_ID = "aaaaaaaa-aaaa-aaaa-aaaa-aaaaaaaaaaaa"
ALL_NODES = "nodeSelectionAll"
PER_DEVICE = "nodeSelectionPerDevice"
FROM_COUNTERS = "fromCounters"

# Upstream's feature sets: only what a case names is on.
NO_FEATURES = Features()
ALL = Features.all()


def features(**gates: bool) -> Features:
    on: dict[str, Any] = dict(gates)  # bool fields only, by name
    return Features(**on)


def node(name: str, region: str, *declared_features: str) -> Node:
    """Upstream's node; with ``declared_features``, its status.declaredFeatures (e.g. upstream's
    nodeWithDRAOptionalNodeOperations)."""
    obj: J = {"metadata": {"name": name, "labels": {"region": region, "planet": "earth"}}}
    if declared_features:
        obj["status"] = {"declaredFeatures": list(declared_features)}
    return Node.load(obj)


def cel(expression: str) -> J:
    return {"cel": {"expression": expression}}


def device_class(name: str, driver: str, *, config_attribute: str | None = None) -> DeviceClass:
    spec: J = {"selectors": [cel(f'device.driver == "{driver}"')]}
    if config_attribute is not None:
        spec["config"] = [device_configuration(driver, config_attribute)]
    return DeviceClass.load({"metadata": {"name": name}, "spec": spec})


def class_with_multi(name: str, driver: str, multi: bool) -> DeviceClass:
    expr = f'device.driver == "{driver}" && device.allowMultipleAllocations == {str(multi).lower()}'
    return DeviceClass.load({"metadata": {"name": name}, "spec": {"selectors": [cel(expr)]}})


def class_with_selectors(name: str, *expressions: str) -> DeviceClass:
    return DeviceClass.load(
        {"metadata": {"name": name}, "spec": {"selectors": [cel(e) for e in expressions]}}
    )


def device_configuration(driver: str, attribute: str) -> J:
    return {"opaque": {"driver": driver, "parameters": {attribute: attribute + "Value"}}}


# --- requests and claims -----------------------------------------------------------------


def request(
    name: str,
    klass: str,
    count: int = 1,
    *selectors: str,
    admin: bool | None = None,
    tolerations: Sequence[J] = (),
    capacity: Quantity | str | None = None,
    mode: str = "ExactCount",
    derived: Sequence[J] = (),
) -> J:
    exactly: J = {"deviceClassName": klass, "allocationMode": mode}
    if mode == "ExactCount":
        exactly["count"] = count
    if selectors:
        exactly["selectors"] = [cel(s) for s in selectors]
    if admin is not None:
        exactly["adminAccess"] = admin
    if tolerations:
        exactly["tolerations"] = list(tolerations)
    if capacity is not None:
        exactly["capacity"] = {"requests": {CAPACITY0: str(capacity)}}
    if derived:
        exactly["derivedAttributes"] = list(derived)
    return {"name": name, "exactly": exactly}


def all_request(name: str, klass: str, *selectors: str, **kw: Any) -> J:
    return request(name, klass, 0, *selectors, mode="All", **kw)


def sub_request(
    name: str,
    klass: str,
    count: int = 1,
    *selectors: str,
    tolerations: Sequence[J] = (),
    mode: str = "ExactCount",
    capacity: Quantity | str | None = None,
    derived: Sequence[J] = (),
) -> J:
    sub: J = {"name": name, "deviceClassName": klass, "allocationMode": mode}
    if mode == "ExactCount":
        sub["count"] = count
    if selectors:
        sub["selectors"] = [cel(s) for s in selectors]
    if tolerations:
        sub["tolerations"] = list(tolerations)
    if capacity is not None:
        sub["capacity"] = {"requests": {CAPACITY0: str(capacity)}}
    if derived:
        sub["derivedAttributes"] = list(derived)
    return sub


def derived_attribute(name: str, expression: str) -> J:
    """A request's derivedAttributes entry (1.37 alpha, DRADerivedAttributes)."""
    return {"name": name, "expression": expression}


def prioritized(name: str, *subs: J) -> J:
    return {"name": name, "firstAvailable": list(subs)}


def claim(
    name: str,
    *requests: J,
    constraints: Sequence[J] = (),
    config: Sequence[J] = (),
    namespace: str | None = None,
) -> ResourceClaim:
    devices: J = {"requests": list(requests)}
    if constraints:
        devices["constraints"] = list(constraints)
    if config:
        devices["config"] = list(config)
    meta: J = {"name": name}
    if namespace:
        meta["namespace"] = namespace
    return ResourceClaim.load({"metadata": meta, "spec": {"devices": devices}})


def claim_with_request(name: str, req: str, klass: str, *constraints: J) -> ResourceClaim:
    return claim(name, request(req, klass, 1), constraints=constraints)


def with_tolerations(c: ResourceClaim, *tolerations: J) -> ResourceClaim:
    """Upstream's withTolerations: add to every exactly-request."""
    obj = c.dump()
    for r in obj["spec"]["devices"]["requests"]:
        if "exactly" in r:
            r["exactly"].setdefault("tolerations", []).extend(tolerations)
    return ResourceClaim.load(obj)


def match_attribute(attribute: str, *requests: str) -> J:
    out: J = {"matchAttribute": attribute}
    if requests:
        out["requests"] = list(requests)
    return out


def distinct_attribute(attribute: str, *requests: str) -> J:
    out: J = {"distinctAttribute": attribute}
    if requests:
        out["requests"] = list(requests)
    return out


def claim_config(requests: Sequence[str], driver: str, attribute: str) -> J:
    out = device_configuration(driver, attribute)
    if requests:
        out["requests"] = list(requests)
    return out


# --- devices and slices ------------------------------------------------------------------


def q(text: str | int) -> str:
    return str(text)


def device(
    name: str,
    capacity: Mapping[str, str | int] | str | None = None,
    attributes: Mapping[str, J] | None = None,
    *,
    taints: Sequence[J] = (),
    consumes: Sequence[J] = (),
    node_selection: Any = None,
    binding: tuple[Sequence[str], Sequence[str]] | None = None,
    binds_to_node: bool | None = None,
    multi: bool = False,
    capacity_policies: Mapping[str, J] | None = None,
) -> J:
    d: J = {"name": name}
    if isinstance(capacity, Mapping):
        d["capacity"] = {k: {"value": q(v)} for k, v in capacity.items()}
    elif capacity == FROM_COUNTERS:
        d["capacity"] = {
            n: {"value": q(v["value"])} for use in consumes for n, v in use["counters"].items()
        }
    if attributes:
        d["attributes"] = dict(attributes)
    if taints:
        d["taints"] = list(taints)
    if consumes:
        d["consumesCounters"] = list(consumes)
    if node_selection is not None:
        if isinstance(node_selection, dict):
            d["nodeSelector"] = node_selection
        elif node_selection == ALL_NODES:
            d["allNodes"] = True
        else:
            d["nodeName"] = node_selection
    if binding is not None:
        if binding[0]:
            d["bindingConditions"] = list(binding[0])
        if binding[1]:
            d["bindingFailureConditions"] = list(binding[1])
    if binds_to_node is not None:
        d["bindsToNode"] = binds_to_node
    if multi:
        d["allowMultipleAllocations"] = True
    if capacity_policies:
        d.setdefault("capacity", {})
        for n, policy in capacity_policies.items():
            d["capacity"][n] = policy
    return d


def policy_range(value: str | int, default: int = 2, lo: int = 2, step: int = 2, hi: int = 4) -> J:
    """Upstream's withCapacityRequestPolicyRange: default 2, min 2, step 2, max 4."""
    return {
        "value": q(value),
        "requestPolicy": {
            "default": q(default),
            "validRange": {"min": q(lo), "step": q(step), "max": q(hi)},
        },
    }


def policy_values(value: str | int, default: str | int, *extra: str | int) -> J:
    return {
        "value": q(value),
        "requestPolicy": {"default": q(default), "validValues": [q(default), *map(q, extra)]},
    }


def consumes(counter_set: str, counters: Mapping[str, str | int], *groups: str) -> J:
    """Upstream's deviceCounterConsumption; with ``groups``, deviceCounterConsumptionWithGroups
    (1.37 alpha, DRADeviceCompatibilityGroups)."""
    out: J = {
        "counterSet": counter_set,
        "counters": {k: {"value": q(v)} for k, v in counters.items()},
    }
    if groups:
        out["compatibilityGroups"] = list(groups)
    return out


def counter_set(name: str, counters: Mapping[str, str | int]) -> J:
    return {"name": name, "counters": {k: {"value": q(v)} for k, v in counters.items()}}


def pool(name: str, count: int = 1, generation: int = 1) -> J:
    return {"name": name, "resourceSliceCount": count, "generation": generation}


def slice_(
    name: str,
    node_selection: Any,
    pool_: str | J,
    driver: str,
    *devices: J,
    counter_sets: Sequence[J] = (),
) -> ResourceSlice:
    spec: J = {"driver": driver, "pool": pool(pool_) if isinstance(pool_, str) else pool_}
    if isinstance(node_selection, dict):
        spec["nodeSelector"] = node_selection
    elif node_selection == ALL_NODES:
        spec["allNodes"] = True
    elif node_selection == PER_DEVICE:
        spec["perDeviceNodeSelection"] = True
    else:
        spec["nodeName"] = node_selection
    if devices:
        spec["devices"] = list(devices)
    if counter_sets:
        spec["sharedCounters"] = list(counter_sets)
    return ResourceSlice.load({"metadata": {"name": name}, "spec": spec})


def with_skip_node_operations(s: ResourceSlice, *operations: str) -> ResourceSlice:
    """Upstream's withSkipNodeOperations: the slice with spec.skipNodeOperations set."""
    obj = s.dump()
    obj["spec"]["skipNodeOperations"] = list(operations)
    return ResourceSlice.load(obj)


def slice_one(name: str, node_selection: Any, pool_: str | J, driver: str) -> ResourceSlice:
    return slice_(name, node_selection, pool_, driver, device(DEVICE1))


def slice_many(
    name: str, node_selection: Any, pool_: str | J, driver: str, count: int
) -> ResourceSlice:
    return slice_(
        name, node_selection, pool_, driver, *(device(f"device-{i}") for i in range(count))
    )


def attr_s(v: str) -> J:
    return {"string": v}


def attr_i(v: int) -> J:
    return {"int": v}


def attr_b(v: bool) -> J:
    return {"bool": v}


def attr_v(v: str) -> J:
    return {"version": v}


def node_label_selector(key: str, *values: str) -> J:
    return {
        "nodeSelectorTerms": [
            {"matchExpressions": [{"key": key, "operator": "In", "values": list(values)}]}
        ]
    }


def local_node_selector(name: str) -> J:
    return {
        "nodeSelectorTerms": [
            {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [name]}]}
        ]
    }


# --- expectations ------------------------------------------------------------------------


def result(
    request_: str,
    driver: str,
    pool_: str,
    device_: str,
    admin: bool = False,
    *tolerations: J,
    binding: tuple[Sequence[str], Sequence[str]] | None = None,
    share: bool = False,
    consumed: Mapping[str, str | int] | None = None,
    skip_node_operations: Sequence[str] = (),
) -> J:
    r: J = {"request": request_, "driver": driver, "pool": pool_, "device": device_}
    if admin:
        r["adminAccess"] = True
    if tolerations:
        r["tolerations"] = list(tolerations)
    if binding is not None:
        if binding[0]:
            r["bindingConditions"] = list(binding[0])
        if binding[1]:
            r["bindingFailureConditions"] = list(binding[1])
    if share:
        r["shareID"] = FIXED_SHARE_ID
    if consumed:
        r["consumedCapacity"] = {k: q(v) for k, v in consumed.items()}
    if skip_node_operations:
        r["skipNodeOperations"] = list(skip_node_operations)
    return r


def results_many(request_: str, driver: str, pool_: str, count: int, start: int = 0) -> list[J]:
    return [result(request_, driver, pool_, f"device-{i}") for i in range(start, start + count)]


def allocation(selector: J | None, *results: J, config: Sequence[J] = ()) -> J:
    out: J = {"devices": {"results": list(results)}}
    if config:
        out["devices"]["config"] = list(config)
    if selector is not None:
        out["nodeSelector"] = selector
    return out


def config_result(source: str, requests: Sequence[str], driver: str, attribute: str) -> J:
    out: J = {"source": source}
    if requests:
        out["requests"] = list(requests)
    out.update(device_configuration(driver, attribute))
    return out


def dev_id(driver: str, pool_: str, device_: str) -> DeviceID:
    return DeviceID(driver, pool_, device_)


@dataclass
class Case:
    """One row of the table; ``expect`` None means "no results" (as upstream's nil)."""

    name: str
    claims: Sequence[ResourceClaim] = ()
    classes: Sequence[DeviceClass] = ()
    slices: Sequence[ResourceSlice] = ()
    node: Node | None = None
    features: Features = field(default_factory=Features)
    allocated: Sequence[DeviceID] = ()
    allocated_shared: Sequence[tuple[DeviceID, str]] = ()
    allocated_capacity: Mapping[DeviceID, Mapping[str, str | int]] = field(default_factory=dict)
    expect: Sequence[J] | None = None
    error: str | None = None
    #: Upstream's expectNumAllocateOneInvocations (experimental channel), when it checks one.
    steps: int | None = None

    @property
    def raises(self) -> bool:
        """Upstream errors that are invalid input raise; node failures (invalid pools, an
        "All" request on a pool being updated or invalid) are outcomes."""
        error = self.error or ""
        return not any(s in error for s in ("invalid resource pools", "asks for all devices"))

    marks: Sequence[Any] = ()


def canonical(obj: Any) -> Any:
    """Order-insensitive form of an allocation, as upstream's gomega matchers compare."""
    if isinstance(obj, dict):
        out: dict[str, Any] = {}
        for k, v in obj.items():
            if k == "consumedCapacity":
                out[k] = {n: Quantity(x).canonical() for n, x in v.items()}
            elif k in ("results", "matchExpressions", "matchFields", "nodeSelectorTerms", "values"):
                out[k] = sorted(
                    (canonical(x) for x in v), key=lambda x: json.dumps(x, sort_keys=True)
                )
            else:
                out[k] = canonical(v)
        return out
    if isinstance(obj, list):
        return [canonical(x) for x in obj]
    return obj


CaseBuilder = Callable[[], list[Case]]
