"""Input checked as the API server checks it, before any answer is given.

An answer computed from input the API server would refuse is worse than no answer: it looks
authoritative. So every object is checked as the API server of the release simulated checks it:
its kind and apiVersion, unknown fields (as ``kubectl --validate=strict``, for the kinds whose
every field we model; a field the release does not serve is unknown), the API's own validation
(names, one-of rules, limits), and every CEL selector is type-checked and its cost estimated as
the API server does (``check_selector``), also those of alternatives the search would never
reach; so is every derived attribute (1.37), with the claim's budget for their total cost.
Every problem names the file, the document, the object and the field; ``--no-validate`` keeps
only what parsing needs (deliberately partial snapshots).

A file's object is created, not stored yet: a field whose feature gate is off is dropped before
validation, silently, as the API server's strategies drop it (``api.fields.drop_disabled``).
The cluster's objects are already stored and kept as they are.

Objects are also defaulted as the API server stores them where the answer depends on it: a
container's requests default to its limits (``SetDefaults_Pod``), so that a hand-written pod
asking ``limits: {example.com/gpu: 1}`` is counted as the scheduler sees it once created.
"""

from __future__ import annotations

import copy
import functools
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

from pydantic import ValidationError

from operators.api import limits, validation
from operators.api.base import KubeModel
from operators.api.core import Pod
from operators.api.features import DEFAULT_VERSION, KubernetesVersion, Release, resolve
from operators.api.fields import drop_disabled
from operators.api.groups import PodGroup
from operators.api.resource import (
    DeviceClaim,
    DeviceClass,
    DeviceSubRequest,
    DeviceTaintRule,
    ExactDeviceRequest,
    ResourceClaim,
    ResourceClaimTemplate,
    ResourceSlice,
)
from operators.api.strict import unknown_fields
from operators.cel import check_selector
from operators.cel.derived import check_derived_attribute
from operators.simulate.snapshot import KINDS, OUR_GROUPS, Document, Snapshot

Validator = Callable[[Any, Release], list[validation.FieldViolation]]
SEMANTIC: dict[type[KubeModel], Validator] = {
    ResourceSlice: validation.validate_resource_slice,
    DeviceClass: validation.validate_device_class,
    ResourceClaim: validation.validate_resource_claim,
    ResourceClaimTemplate: validation.validate_resource_claim_template,
    DeviceTaintRule: validation.validate_device_taint_rule,
}


def build(
    documents: Iterable[Document],
    *,
    strict: bool = True,
    version: KubernetesVersion = DEFAULT_VERSION,
    gates: Mapping[str, bool] | None = None,
    stored: bool = False,
) -> tuple[Snapshot, list[str]]:
    """The snapshot of every known object, and the problems found (empty: valid), as the API
    server of ``version`` with ``gates`` (default: that version's) would take them; ``stored``:
    objects the cluster already holds (nothing is dropped from them)."""
    gates = gates if gates is not None else resolve({}, version)
    snapshot = Snapshot()
    problems: list[str] = []
    for doc in documents:
        kind = KINDS.get(doc.kind)
        if kind is None:
            problem = _unknown_kind(doc)
            if problem is not None:
                problems.append(f"{doc.source}: {doc.describe()}: {problem}")
            continue
        body = defaulted(doc.kind, doc.body)
        found = list(_problems(doc, strict, version.release, gates, body, stored))
        problems += [f"{doc.source}: {doc.describe()}: {p}" for p in found]
        if not found:
            snapshot.add(doc.kind, body)
    return snapshot, problems


def defaulted(kind: str, body: Mapping[str, Any]) -> dict[str, Any]:
    """The object as the API server would store it: for a pod, every container's requests
    default to its limits (the scheduler reads requests only). A copy; ``body`` is kept."""
    out = copy.deepcopy(dict(body))
    if kind != "Pod":
        return out
    spec = out.get("spec") or {}
    for field in ("initContainers", "containers"):
        for container in spec.get(field) or []:
            resources = container.get("resources") or {}
            limits = resources.get("limits") or {}
            if not limits:
                continue
            requests = resources.setdefault("requests", {}) or {}
            resources["requests"] = {**limits, **requests}
    return out


def _unknown_kind(doc: Document) -> str | None:
    """A typo'd kind of ours is an error; kinds of other groups (a Service in a
    ``kubectl get all`` snapshot) are not ours to judge and are skipped."""
    group = str(doc.body.get("apiVersion") or "").partition("/")[0]
    name = doc.kind.lower().removesuffix("s")
    near = [k for k in KINDS if k.lower() == name]
    if near:
        return f"kind {doc.kind!r} is not a kind (did you mean {near[0]}?)"
    if group in OUR_GROUPS:
        return f"kind {doc.kind!r} of {doc.body.get('apiVersion')} is not known"
    if not doc.kind:
        return "field kind: Required value"
    return None


def _problems(
    doc: Document,
    strict: bool,
    release: Release,
    gates: Mapping[str, bool],
    body: dict[str, Any],
    stored: bool,
) -> Iterator[str]:
    """What ``release``'s API server refuses of ``doc``; ``body`` (its defaulted copy) loses
    what the server would drop on create first (a gated field with its gate off)."""
    kind = KINDS[doc.kind]
    api_version = body.get("apiVersion")
    served = kind.served(release)
    if strict and api_version not in served:
        use = (
            f"use {' or '.join(served)}"
            if served
            else f"no version is; {' or '.join(kind.api_versions)} from {kind.since} on"
        )
        yield (
            f"field apiVersion: {api_version!r} is not served for {doc.kind} by Kubernetes "
            f"{release} ({use})"
        )
    if strict and kind.complete:
        for path in unknown_fields(kind.model, body, release=release):
            yield f"field {path}: unknown field"
    if not stored:
        drop_disabled(kind.model, body, gates, release)
    try:
        obj = kind.model.load(body)
    except ValidationError as e:
        for err in e.errors():
            where = ".".join(str(p) for p in err["loc"])
            yield f"field {where}: {err['msg']}"
        return
    if not (body.get("metadata") or {}).get("name"):
        yield "field metadata.name: Required value"
    if not strict:
        return
    check = SEMANTIC.get(kind.model)
    if isinstance(obj, ResourceSlice):
        # Capacity policies in the arithmetic of the release and its fractional-range gate.
        check = functools.partial(
            validation.validate_resource_slice,
            fractional_capacity_range=gates.get("DRAFractionalCapacityRange", False),
        )
    if check is not None:
        for violation in check(obj, release):
            yield f"field {violation.path}: {violation.message}"
    for path, expression in _selectors(obj):
        refused = check_selector(expression, kubernetes=str(release))
        if refused is not None:
            yield f"field {path}: Invalid value: compilation failed: {refused}"
    yield from _derived_problems(obj, gates.get("DRAListTypeAttributes", False))
    if isinstance(obj, Pod):
        yield from _pod_problems(obj)
    if isinstance(obj, PodGroup):
        yield from _pod_group_problems(obj)


def _derived_problems(obj: KubeModel, list_types: bool) -> Iterator[str]:
    """1.37's derived attributes of a claim or template: each expression compiled as one (a
    scalar or, with list-typed attributes, a list of scalars), their estimated costs within the
    claim's budget together."""
    if isinstance(obj, ResourceClaim):
        devices, path = obj.spec.devices, "spec.devices"
    elif isinstance(obj, ResourceClaimTemplate):
        devices, path = obj.spec.spec.devices, "spec.spec.devices"
    else:
        return
    total = 0
    for where, expression in _derived(devices, path):
        verdict = check_derived_attribute(expression, list_types=list_types)
        total += verdict.cost
        if verdict.error is not None:
            yield f"field {where}: Invalid value: compilation failed: {verdict.error}"
    if total > limits.DeviceClaimDerivedAttributeCELMaxCost:
        yield (
            f"field {path}: Forbidden: too complex, total cost of derived attribute CEL "
            "expressions in the claim exceeds cost limit"
        )


def _derived(devices: DeviceClaim, path: str) -> Iterator[tuple[str, str]]:
    """(field path, expression) of every derived attribute of a claim's requests."""
    for r, request in enumerate(devices.requests):
        where = f"{path}.requests[{r}]"
        bodies: list[tuple[str, ExactDeviceRequest | DeviceSubRequest]] = []
        if request.exactly is not None:
            bodies.append((f"{where}.exactly", request.exactly))
        bodies += [
            (f"{where}.firstAvailable[{a}]", s) for a, s in enumerate(request.first_available)
        ]
        for body_path, body in bodies:
            for i, attribute in enumerate(body.derived_attributes):
                if attribute.expression:
                    yield f"{body_path}.derivedAttributes[{i}].expression", attribute.expression


def _selectors(obj: KubeModel) -> Iterator[tuple[str, str]]:
    """(field path, expression) of every CEL selector of a class, claim or template."""
    if isinstance(obj, DeviceClass):
        for i, s in enumerate(obj.spec.selectors):
            if s.cel is not None and s.cel.expression:
                yield f"spec.selectors[{i}].cel.expression", s.cel.expression
    elif isinstance(obj, ResourceClaim):
        yield from _claim_selectors(obj.spec.devices, "spec.devices")
    elif isinstance(obj, ResourceClaimTemplate):
        yield from _claim_selectors(obj.spec.spec.devices, "spec.spec.devices")


def _claim_selectors(devices: DeviceClaim, path: str) -> Iterator[tuple[str, str]]:
    for r, request in enumerate(devices.requests):
        where = f"{path}.requests[{r}]"
        if request.exactly is not None:
            for i, s in enumerate(request.exactly.selectors):
                if s.cel is not None and s.cel.expression:
                    yield f"{where}.exactly.selectors[{i}].cel.expression", s.cel.expression
        for a, sub in enumerate(request.first_available):
            for i, s in enumerate(sub.selectors):
                if s.cel is not None and s.cel.expression:
                    yield (
                        f"{where}.firstAvailable[{a}].selectors[{i}].cel.expression",
                        s.cel.expression,
                    )


def _pod_problems(pod: Pod) -> Iterator[str]:
    for i, entry in enumerate(pod.spec.resource_claims):
        named = [entry.resource_claim_name, entry.resource_claim_template_name]
        if sum(bool(n) for n in named) != 1:
            yield (
                f"field spec.resourceClaims[{i}]: Invalid value: exactly one of "
                "resourceClaimName and resourceClaimTemplateName is required"
            )


def _pod_group_problems(group: PodGroup) -> Iterator[str]:
    """The one-of rules of a PodGroup the scheduler's answer depends on: its policy (and the
    gang's minCount), and each shared claim's name and source."""
    policy = group.spec.scheduling_policy
    if (policy.basic is None) == (policy.gang is None):
        yield (
            "field spec.schedulingPolicy: Invalid value: exactly one of basic and gang is required"
        )
    if policy.gang is not None:
        where = "field spec.schedulingPolicy.gang.minCount"
        if policy.gang.min_count is None:
            yield f"{where}: Required value"
        elif policy.gang.min_count < 1:
            yield f"{where}: Invalid value: {policy.gang.min_count}: must be greater than zero"
    seen: set[str] = set()
    for i, entry in enumerate(group.spec.resource_claims):
        where = f"field spec.resourceClaims[{i}]"
        if not entry.name:
            yield f"{where}.name: Required value"
        elif entry.name in seen:
            yield f"{where}.name: Duplicate value: {entry.name!r}"
        seen.add(entry.name or "")
        named = [entry.resource_claim_name, entry.resource_claim_template_name]
        if sum(bool(n) for n in named) != 1:
            yield (
                f"{where}: Invalid value: exactly one of resourceClaimName and "
                "resourceClaimTemplateName is required"
            )
