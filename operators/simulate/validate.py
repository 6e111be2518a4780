"""Input checked as the API server checks it, before any answer is given.

An answer computed from input the API server would refuse is worse than no answer: it looks
authoritative. So every object is checked for its kind and apiVersion, unknown fields (as
``kubectl --validate=strict``, for the kinds whose every field we model), the API's own
validation (names, one-of rules, limits), and every CEL selector is type-checked and its cost
estimated as the API server does (``check_selector``), also those of alternatives the search
would never reach. Every problem names the file, the document, the object and the field;
``--no-validate`` keeps only what parsing needs (deliberately partial snapshots).

Objects are also defaulted as the API server stores them where the answer depends on it: a
container's requests default to its limits (``SetDefaults_Pod``), so that a hand-written pod
asking ``limits: {example.com/gpu: 1}`` is counted as the scheduler sees it once created.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

from pydantic import ValidationError

from operators.api import validation
from operators.api.base import KubeModel
from operators.api.core import Pod
from operators.api.features import DEFAULT_VERSION, KubernetesVersion
from operators.api.resource import (
    DeviceClaim,
    DeviceClass,
    DeviceTaintRule,
    ResourceClaim,
    ResourceClaimTemplate,
    ResourceSlice,
)
from operators.api.strict import unknown_fields
from operators.cel import check_selector
from operators.simulate.snapshot import KINDS, OUR_GROUPS, Document, Snapshot

Validator = Callable[[Any], list[validation.FieldViolation]]
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
) -> tuple[Snapshot, list[str]]:
    """The snapshot of every known object, and the problems found (empty: valid), as the API
    server of ``version`` checks them."""
    snapshot = Snapshot()
    problems: list[str] = []
    for doc in documents:
        kind = KINDS.get(doc.kind)
        if kind is None:
            problem = _unknown_kind(doc)
            if problem is not None:
                problems.append(f"{doc.source}: {doc.describe()}: {problem}")
            continue
        found = list(_problems(doc, strict, version))
        problems += [f"{doc.source}: {doc.describe()}: {p}" for p in found]
        if not found:
            snapshot.add(doc.kind, defaulted(doc.kind, doc.body))
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


def _problems(doc: Document, strict: bool, version: KubernetesVersion) -> Iterator[str]:
    kind = KINDS[doc.kind]
    body = doc.body
    api_version = body.get("apiVersion")
    if strict and api_version not in kind.api_versions:
        served = " or ".join(kind.api_versions)
        yield f"field apiVersion: {api_version!r} is not served for {doc.kind} (use {served})"
    if strict and kind.complete:
        for path in unknown_fields(kind.model, body):
            yield f"field {path}: unknown field"
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
    if check is not None:
        for violation in check(obj):
            yield f"field {violation.path}: {violation.message}"
    for path, expression in _selectors(obj):
        refused = check_selector(expression, kubernetes=str(version.release))
        if refused is not None:
            yield f"field {path}: Invalid value: compilation failed: {refused}"
    if isinstance(obj, Pod):
        yield from _pod_problems(obj)


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
