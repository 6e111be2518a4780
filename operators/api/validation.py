"""Per-object validation of resource.k8s.io objects, as the API server does it.

Mirrors k8s.io/kubernetes/pkg/apis/resource/validation (and the declarative rules of the API's
tags) of the release given (``release``: 1.36 or 1.37) with the DRA feature gates of the local
control plane enabled: names, lengths, counts against ``limits``, one-of rules, enum values,
request references and capacity policies. The fields a release does not serve are not checked
(they are unknown there; ``api.fields`` says which): 1.37's partitionTypeAttribute,
skipNodeOperations, compatibilityGroups, derivedAttributes and nodeAllocatableResources, 1.36's
nodeAllocatableResourceMappings. Each function returns *every* violation with its field path
(``spec.devices[3].attributes[model]``), never raises, and looks at one object only: checks
across slices of a pool belong to the pool validator, CEL compilation (selectors, derived
attributes and their claim-wide cost) to ``cel``.

Capacity request policies are checked in the arithmetic of the release the cluster runs: 1.36
steps and de-duplicates in whole units (``Quantity.Value()``), 1.37 adds bounds on those
integers and, with DRAFractionalCapacityRange, steps a range with a fraction in milli-units and
tells values apart exactly.

1.38 caps a request's capacity requests at ``limits.MaxCapacityRequirements``.

Objects are validated as submitted, before the API server's defaulting: an unset
``allocationMode`` means ExactCount, an unset ``count`` means one, an unset toleration operator
means Equal.
"""

from __future__ import annotations

import decimal
import json
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from operators.api import limits
from operators.api.base import KubeModel
from operators.api.core import NodeSelector
from operators.api.features import DEFAULT_RELEASE, Release
from operators.api.meta import Condition, ObjectMeta
from operators.api.quantity import Quantity
from operators.api.resource import (
    ALLOCATION_CONFIG_SOURCES,
    ALLOCATION_MODE_ALL,
    ALLOCATION_MODE_EXACT_COUNT,
    ALLOCATION_MODES,
    DEVICE_TAINT_EFFECTS,
    TOLERATION_OPERATOR_EQUAL,
    TOLERATION_OPERATOR_EXISTS,
    TOLERATION_OPERATORS,
    AllocationResult,
    CapacityRequestPolicy,
    CapacityRequirements,
    CounterSet,
    Device,
    DeviceAttribute,
    DeviceCapacity,
    DeviceClaim,
    DeviceClass,
    DeviceConstraint,
    DeviceCounterConsumption,
    DeviceDerivedAttribute,
    DeviceSelector,
    DeviceTaint,
    DeviceTaintRule,
    DeviceToleration,
    OpaqueDeviceConfiguration,
    ResourceClaim,
    ResourceClaimStatus,
    ResourceClaimTemplate,
    ResourceSlice,
)


@dataclass(frozen=True, slots=True)
class FieldViolation:
    """One problem with one field: ``path`` as the API server prints it, and why."""

    path: str
    message: str

    def __str__(self) -> str:
        return f"{self.path}: {self.message}"


# --- name formats (k8s.io/apimachinery/pkg/util/validation) --------------------------------

_DNS1123_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_DNS1123_SUBDOMAIN = re.compile(
    r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"
)
_C_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_QUALIFIED_NAME_PART = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
_CONDITION_REASON = re.compile(r"^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$")
_UID = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")
_NUM = r"(0|[1-9]\d*)"
_PRE = r"(0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*)"
_BUILD = r"[0-9a-zA-Z-]+"
_SEMVER = re.compile(rf"^{_NUM}\.{_NUM}\.{_NUM}(-{_PRE}(\.{_PRE})*)?(\+{_BUILD}(\.{_BUILD})*)?$")
_CONDITION_STATUSES = ("True", "False", "Unknown")
#: 1.37's SkipNodeOperation values.
SKIP_NODE_PREPARE = "NodePrepareResources"
SKIP_NODE_UNPREPARE = "NodeUnprepareResources"
SKIP_NODE_ALL = "*"
SKIP_NODE_OPERATIONS = (SKIP_NODE_PREPARE, SKIP_NODE_UNPREPARE, SKIP_NODE_ALL)
_R137 = Release(1, 37)
_R138 = Release(1, 38)
_NODE_SELECTOR_OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt")


def dns1123_label_errors(value: str) -> list[str]:
    """Messages for a value that is not a DNS-1123 label (device, request, counter names)."""
    errors = []
    if len(value) > limits.DNS1123LabelMaxLength:
        errors.append(f"must be no more than {limits.DNS1123LabelMaxLength} characters")
    if not _DNS1123_LABEL.match(value):
        errors.append(
            "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or "
            "'-', and must start and end with an alphanumeric character"
        )
    return errors


def dns1123_subdomain_errors(value: str) -> list[str]:
    """Messages for a value that is not a DNS-1123 subdomain (object, class and node names)."""
    errors = []
    if len(value) > limits.DNS1123SubdomainMaxLength:
        errors.append(f"must be no more than {limits.DNS1123SubdomainMaxLength} characters")
    if not _DNS1123_SUBDOMAIN.match(value):
        errors.append(
            "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, "
            "'-' or '.', and must start and end with an alphanumeric character"
        )
    return errors


def driver_name_errors(value: str) -> list[str]:
    """A driver name is a DNS subdomain (case-insensitive) of at most 63 characters."""
    if not value:
        return ["required"]
    errors = []
    if len(value) > limits.DriverNameMaxLength:
        errors.append(f"must be no more than {limits.DriverNameMaxLength} characters")
    if not _DNS1123_SUBDOMAIN.match(value.lower()):
        errors.append(
            "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, "
            "'-' or '.', and must start and end with an alphanumeric character"
        )
    return errors


def pool_name_errors(value: str) -> list[str]:
    """A pool name: at most 253 characters of DNS subdomains separated by slashes."""
    if not value:
        return ["required"]
    errors = []
    if len(value) > limits.PoolNameMaxLength:
        errors.append(f"must be no more than {limits.PoolNameMaxLength} characters")
    for part in value.split("/"):
        errors.extend(dns1123_subdomain_errors(part))
    return errors


def c_identifier_errors(value: str) -> list[str]:
    errors = []
    if len(value) > limits.DeviceMaxIDLength:
        errors.append(f"must be no more than {limits.DeviceMaxIDLength} characters")
    if not _C_IDENTIFIER.match(value):
        errors.append(
            "a valid C identifier must start with alphabetic character or '_', followed by a "
            "string of alphanumeric characters or '_'"
        )
    return errors


def qualified_name_errors(value: str, *, fully: bool = False) -> list[str]:
    """Attribute and capacity names: ``<id>`` or ``<domain>/<id>`` (``fully``: domain required)."""
    parts = value.split("/")
    errors: list[str] = []
    if len(parts) == 1:
        errors.extend(c_identifier_errors(parts[0]))
        if fully:
            errors.append("a fully qualified name must be a domain and a name separated by a slash")
        return errors
    domain, ident = parts[0], "/".join(parts[1:])
    if len(parts) > 2:
        errors.append("must contain at most one '/'")
    if not domain:
        errors.append("the domain must not be empty")
    else:
        errors.extend(driver_name_errors(domain))
    if not ident:
        errors.append("the name must not be empty")
    else:
        errors.extend(c_identifier_errors(ident))
    return errors


def label_name_errors(value: str) -> list[str]:
    """A label key / taint key / condition type: ``[prefix/]name``."""
    if not value:
        return ["name part must be non-empty"]
    prefix, sep, name = value.rpartition("/")
    errors = []
    if sep:
        if not prefix:
            errors.append("prefix part must be non-empty")
        else:
            errors.extend(f"prefix part {m}" for m in dns1123_subdomain_errors(prefix))
    if not name:
        errors.append("name part must be non-empty")
    elif len(name) > limits.QualifiedNameMaxLength:
        errors.append(f"name part must be no more than {limits.QualifiedNameMaxLength} characters")
    if name and not _QUALIFIED_NAME_PART.match(name):
        errors.append(
            "name part must consist of alphanumeric characters, '-', '_' or '.', and must start "
            "and end with an alphanumeric character"
        )
    return errors


def label_value_errors(value: str) -> list[str]:
    errors = []
    if len(value) > limits.LabelValueMaxLength:
        errors.append(f"must be no more than {limits.LabelValueMaxLength} characters")
    if not _LABEL_VALUE.match(value):
        errors.append(
            "a valid label must be an empty string or consist of alphanumeric characters, "
            "'-', '_' or '.', and must start and end with an alphanumeric character"
        )
    return errors


def semver_errors(value: str) -> list[str]:
    errors = []
    if not _SEMVER.match(value):
        errors.append("must be a string compatible with semver.org spec 2.0.0")
    if len(value) > limits.DeviceAttributeMaxValueLength:
        errors.append(f"must be no more than {limits.DeviceAttributeMaxValueLength} characters")
    return errors


def uid_errors(value: str) -> list[str]:
    if _UID.match(value):
        return []
    return [
        "uid must be in RFC 4122 normalized form, `xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx` with "
        "lowercase hexadecimal characters"
    ]


# --- the collector -------------------------------------------------------------------------


class _Errors:
    """Collects violations; helpers mirror field.Required / Invalid / TooMany / Duplicate. It
    carries the release whose rules apply, so that every check can ask without a parameter."""

    def __init__(
        self, release: Release = DEFAULT_RELEASE, *, fractional_capacity_range: bool = False
    ) -> None:
        self.items: list[FieldViolation] = []
        self.release = release
        #: DRAFractionalCapacityRange, which only 1.37 has: capacity ranges in milli-units.
        self.fractional = fractional_capacity_range and release >= _R137

    @property
    def v137(self) -> bool:
        """The 1.37 API: its new fields are served (and checked)."""
        return self.release >= _R137

    @property
    def v138(self) -> bool:
        """The 1.38 API: its new rules apply too."""
        return self.release >= _R138

    def add(self, path: str, message: str) -> None:
        self.items.append(FieldViolation(path, message))

    def required(self, path: str, detail: str = "") -> None:
        self.add(path, f"Required value{': ' + detail if detail else ''}")

    def invalid(self, path: str, value: object, detail: str) -> None:
        self.add(path, f"Invalid value: {value!r}: {detail}")

    def not_supported(self, path: str, value: object, supported: Iterable[str]) -> None:
        listed = ", ".join(f'"{s}"' for s in supported)
        self.add(path, f"Unsupported value: {value!r}: supported values: {listed}")

    def too_many(self, path: str, actual: int, maximum: int) -> None:
        self.add(path, f"Too many: {actual}: must have at most {maximum} items")

    def too_long(self, path: str, maximum: int) -> None:
        self.add(path, f"Too long: may not be more than {maximum} bytes")

    def forbidden(self, path: str, detail: str) -> None:
        self.add(path, f"Forbidden: {detail}")

    def duplicate(self, path: str, value: object) -> None:
        self.add(path, f"Duplicate value: {value!r}")

    def messages(self, path: str, value: str, messages: Iterable[str]) -> None:
        for message in messages:
            if message == "required":
                self.required(path)
            else:
                self.invalid(path, value, message)

    def name(
        self,
        path: str,
        value: str | None,
        check: Callable[[str], list[str]],
        *,
        required: bool = True,
    ) -> None:
        if not value:
            if required:
                self.required(path)
            return
        self.messages(path, value, check(value))

    def items_within(self, path: str, items: Sequence[Any], maximum: int) -> bool:
        """False (and one TooMany) when over the limit: like upstream, skip the items then."""
        if len(items) > maximum:
            self.too_many(path, len(items), maximum)
            return False
        return True

    def unique(self, path: str, keys: Sequence[object]) -> None:
        seen: set[object] = set()
        for i, key in enumerate(keys):
            if key in seen:
                self.duplicate(f"{path}[{i}]", key)
            seen.add(key)


def _key(path: str, key: str) -> str:
    return f"{path}[{key}]"


# --- shared parts --------------------------------------------------------------------------


def _validate_metadata(
    meta: ObjectMeta, path: str, errs: _Errors, *, namespaced: bool, has_name: bool = True
) -> None:
    if has_name:
        if not meta.name and not meta.generate_name:
            errs.required(f"{path}.name", "name or generateName is required")
        if meta.name:
            errs.messages(f"{path}.name", meta.name, dns1123_subdomain_errors(meta.name))
    if meta.namespace is not None:
        if not namespaced:
            errs.forbidden(f"{path}.namespace", "not allowed on this type")
        else:
            errs.messages(f"{path}.namespace", meta.namespace, dns1123_label_errors(meta.namespace))
    _validate_labels(meta, path, errs)


def _validate_labels(meta: ObjectMeta, path: str, errs: _Errors) -> None:
    for key, value in meta.labels.items():
        errs.messages(f"{path}.labels", key, label_name_errors(key))
        errs.messages(_key(f"{path}.labels", key), value, label_value_errors(value))
    for key in meta.annotations:
        errs.messages(f"{path}.annotations", key, label_name_errors(key.lower()))


def validate_node_selector(
    selector: NodeSelector, path: str, errs: _Errors | None = None
) -> list[FieldViolation]:
    """core/v1 ValidateNodeSelector (without allowing an empty selector)."""
    errs = errs if errs is not None else _Errors()
    terms_path = f"{path}.nodeSelectorTerms"
    if not selector.node_selector_terms:
        errs.required(terms_path, "must have at least one node selector term")
    for i, term in enumerate(selector.node_selector_terms):
        term_path = f"{terms_path}[{i}]"
        for j, req in enumerate(term.match_expressions):
            req_path = f"{term_path}.matchExpressions[{j}]"
            _validate_node_selector_requirement(req.key, req.operator, req.values, req_path, errs)
            if req.key:
                errs.messages(f"{req_path}.key", req.key, label_name_errors(req.key))
        for j, req in enumerate(term.match_fields):
            req_path = f"{term_path}.matchFields[{j}]"
            if req.key != "metadata.name":
                errs.invalid(f"{req_path}.key", req.key, "not a valid field selector key")
            if req.operator not in ("In", "NotIn"):
                errs.not_supported(f"{req_path}.operator", req.operator, ("In", "NotIn"))
            elif len(req.values) != 1:
                errs.required(f"{req_path}.values", "must be only one value when `operator` is ")
    return errs.items


def _validate_node_selector_requirement(
    key: str | None, operator: str | None, values: list[str], path: str, errs: _Errors
) -> None:
    if not key:
        errs.required(f"{path}.key")
    if operator in ("In", "NotIn"):
        if not values:
            errs.required(f"{path}.values", "must be specified when `operator` is 'In' or 'NotIn'")
    elif operator in ("Exists", "DoesNotExist"):
        if values:
            errs.forbidden(
                f"{path}.values",
                "may not be specified when `operator` is 'Exists' or 'DoesNotExist'",
            )
    elif operator in ("Gt", "Lt"):
        if len(values) != 1 or not re.fullmatch(r"-?[0-9]+", values[0]):
            errs.required(f"{path}.values", "must be specified single integer value")
    else:
        errs.not_supported(f"{path}.operator", operator, _NODE_SELECTOR_OPERATORS)


def _validate_selectors(selectors: list[DeviceSelector], path: str, errs: _Errors) -> None:
    if not errs.items_within(path, selectors, limits.DeviceSelectorsMaxSize):
        return
    for i, selector in enumerate(selectors):
        cel_path = f"{path}[{i}].cel"
        if selector.cel is None:
            errs.required(cel_path)
            continue
        expression = selector.cel.expression
        if not expression:
            errs.required(f"{cel_path}.expression", "compilation failed: empty expression")
        elif len(expression) > limits.CELSelectorExpressionMaxLength:
            errs.too_long(f"{cel_path}.expression", limits.CELSelectorExpressionMaxLength)


def _validate_opaque(opaque: OpaqueDeviceConfiguration | None, path: str, errs: _Errors) -> None:
    if opaque is None:
        errs.required(f"{path}.opaque")
        return
    errs.name(f"{path}.opaque.driver", opaque.driver, driver_name_errors)
    _validate_raw(
        opaque.parameters, f"{path}.opaque.parameters", limits.OpaqueParametersMaxLength, errs
    )


def _validate_raw(data: Any, path: str, maximum: int, errs: _Errors) -> None:
    if data is None:
        errs.required(path)
    elif not isinstance(data, dict):
        errs.invalid(path, "<value omitted>", "must be a valid JSON object")
    elif len(json.dumps(data, separators=(",", ":"))) > maximum:
        errs.too_long(path, maximum)


def _validate_taint(taint: DeviceTaint, path: str, errs: _Errors) -> None:
    errs.messages(f"{path}.key", taint.key or "", label_name_errors(taint.key or ""))
    if taint.value:
        errs.messages(f"{path}.value", taint.value, label_value_errors(taint.value))
    if not taint.effect:
        errs.required(f"{path}.effect")
    elif taint.effect not in DEVICE_TAINT_EFFECTS:
        errs.not_supported(f"{path}.effect", taint.effect, DEVICE_TAINT_EFFECTS)


def _validate_tolerations(tolerations: list[DeviceToleration], path: str, errs: _Errors) -> None:
    if not errs.items_within(path, tolerations, limits.DeviceTolerationsMaxLength):
        return
    for i, tol in enumerate(tolerations):
        tol_path = f"{path}[{i}]"
        if tol.key:
            errs.messages(f"{tol_path}.key", tol.key, label_name_errors(tol.key))
        operator = tol.operator or TOLERATION_OPERATOR_EQUAL
        if operator == TOLERATION_OPERATOR_EXISTS:
            if tol.value:
                errs.invalid(f"{tol_path}.value", tol.value, "must be empty for operator `Exists`")
        elif operator == TOLERATION_OPERATOR_EQUAL:
            errs.messages(f"{tol_path}.value", tol.value or "", label_value_errors(tol.value or ""))
        else:
            errs.not_supported(f"{tol_path}.operator", tol.operator, TOLERATION_OPERATORS)
        if tol.effect and tol.effect not in DEVICE_TAINT_EFFECTS:
            errs.not_supported(f"{tol_path}.effect", tol.effect, DEVICE_TAINT_EFFECTS)


def _validate_binding_conditions(
    conditions: list[str], failures: list[str], path: str, errs: _Errors
) -> None:
    c_path, f_path = f"{path}.bindingConditions", f"{path}.bindingFailureConditions"
    if errs.items_within(c_path, conditions, limits.BindingConditionsMaxSize):
        for i, cond in enumerate(conditions):
            errs.messages(f"{c_path}[{i}]", cond, label_name_errors(cond))
    if errs.items_within(f_path, failures, limits.BindingFailureConditionsMaxSize):
        for i, cond in enumerate(failures):
            errs.messages(f"{f_path}[{i}]", cond, label_name_errors(cond))
    errs.unique(c_path, conditions)
    errs.unique(f_path, failures)
    for i, cond in enumerate(failures):
        if cond in conditions:
            errs.invalid(
                f"{f_path}[{i}]",
                cond,
                "bindingFailureConditions must not overlap with bindingConditions",
            )
    if not conditions and failures:
        errs.invalid(
            c_path, conditions, "bindingConditions are required to use bindingFailureConditions"
        )
    if not failures and conditions:
        errs.invalid(
            f_path, failures, "bindingFailureConditions are required to use bindingConditions"
        )


def _validate_conditions(conditions: list[Condition], path: str, errs: _Errors) -> None:
    """metav1 ValidateConditions: type, status, reason, lastTransitionTime; unique types."""
    errs.unique(f"{path}", [c.type for c in conditions])
    for i, cond in enumerate(conditions):
        c_path = f"{path}[{i}]"
        errs.name(f"{c_path}.type", cond.type, label_name_errors)
        if not cond.status:
            errs.required(f"{c_path}.status")
        elif cond.status not in _CONDITION_STATUSES:
            errs.not_supported(f"{c_path}.status", cond.status, _CONDITION_STATUSES)
        if cond.observed_generation is not None and cond.observed_generation < 0:
            errs.invalid(f"{c_path}.observedGeneration", cond.observed_generation, "must be >= 0")
        if not cond.last_transition_time:
            errs.required(f"{c_path}.lastTransitionTime", "must be set")
        if not cond.reason:
            errs.required(f"{c_path}.reason")
        elif len(cond.reason) > 1024 or not _CONDITION_REASON.match(cond.reason):
            errs.invalid(
                f"{c_path}.reason",
                cond.reason,
                "a condition reason must start with alphabetic character, optionally followed by "
                "a string of alphanumeric characters or '_,:', and must end with an alphanumeric "
                "character or '_' (at most 1024 characters)",
            )
        if cond.message is not None and len(cond.message) > 32768:
            errs.too_long(f"{c_path}.message", 32768)


# --- ResourceSlice -------------------------------------------------------------------------


def validate_resource_slice(
    slice_: ResourceSlice,
    release: Release = DEFAULT_RELEASE,
    *,
    fractional_capacity_range: bool = False,
) -> list[FieldViolation]:
    """ValidateResourceSlice: metadata, driver, pool, node selection, devices, counters;
    capacity policies in the arithmetic of ``release`` with or without its
    DRAFractionalCapacityRange (1.37; 1.36 has no such gate)."""
    errs = _Errors(release, fractional_capacity_range=fractional_capacity_range)
    _validate_metadata(slice_.metadata, "metadata", errs, namespaced=False)
    spec, path = slice_.spec, "spec"
    errs.name(f"{path}.driver", spec.driver, driver_name_errors)
    errs.name(f"{path}.pool.name", spec.pool.name, pool_name_errors)
    if spec.pool.resource_slice_count is None or spec.pool.resource_slice_count <= 0:
        errs.invalid(
            f"{path}.pool.resourceSliceCount",
            spec.pool.resource_slice_count,
            "must be greater than zero",
        )
    if spec.pool.generation is None:
        errs.required(f"{path}.pool.generation")
    elif spec.pool.generation < 0:
        errs.invalid(
            f"{path}.pool.generation", spec.pool.generation, "must be greater than or equal to zero"
        )

    selection: list[str] = []
    if spec.node_name is not None:
        if spec.node_name:
            selection.append("`nodeName`")
            errs.messages(
                f"{path}.nodeName", spec.node_name, dns1123_subdomain_errors(spec.node_name)
            )
        else:
            errs.invalid(
                f"{path}.nodeName", "", "must be either unset or set to a non-empty string"
            )
    if spec.node_selector is not None:
        selection.append("`nodeSelector`")
        validate_node_selector(spec.node_selector, f"{path}.nodeSelector", errs)
        if len(spec.node_selector.node_selector_terms) != 1:
            errs.invalid(
                f"{path}.nodeSelector.nodeSelectorTerms",
                len(spec.node_selector.node_selector_terms),
                "must have exactly one node selector term",
            )
    for name, value in (
        ("allNodes", spec.all_nodes),
        ("perDeviceNodeSelection", spec.per_device_node_selection),
    ):
        if value is True:
            selection.append(f"`{name}`")
        elif value is False:
            errs.invalid(f"{path}.{name}", False, "must be either unset or set to true")
    one_of = (
        "exactly one of `nodeName`, `nodeSelector`, `allNodes`, `perDeviceNodeSelection` "
        "is required"
    )
    if not selection:
        errs.required(path, one_of)
    elif len(selection) > 1:
        errs.invalid(
            path, "{" + ", ".join(selection) + "}", one_of + ", but multiple fields are set"
        )

    if spec.shared_counters and spec.devices:
        errs.invalid(path, "", "only one of `sharedCounters` or `devices` is allowed")

    advanced = any(
        d.taints or d.consumes_counters or any(a.is_list for a in d.attributes.values())
        for d in spec.devices
    )
    max_devices = (
        limits.ResourceSliceMaxDevicesWithAdvancedFeatures
        if advanced
        else limits.ResourceSliceMaxDevices
    )
    devices_path = f"{path}.devices"
    if errs.items_within(devices_path, spec.devices, max_devices):
        per_device = spec.per_device_node_selection is True
        for i, device in enumerate(spec.devices):
            _validate_device(device, f"{devices_path}[{i}]", per_device, errs)
        errs.unique(devices_path, [d.name for d in spec.devices])

    sets_path = f"{path}.sharedCounters"
    if errs.items_within(sets_path, spec.shared_counters, limits.ResourceSliceMaxCounterSets):
        for i, counter_set in enumerate(spec.shared_counters):
            _validate_counter_set(counter_set, f"{sets_path}[{i}]", errs)
        errs.unique(sets_path, [s.name for s in spec.shared_counters])
    if errs.v137:
        if spec.partition_type_attribute is not None:
            _validate_partition_type_attribute(slice_, errs)
        _validate_skip_node_operations(
            spec.skip_node_operations, f"{path}.skipNodeOperations", errs
        )
    return errs.items


def _validate_partition_type_attribute(slice_: ResourceSlice, errs: _Errors) -> None:
    """1.37: the named attribute is a string on every device that consumes counters (a name in
    the driver's own domain may be set bare on the device), and only such slices may name one."""
    spec = slice_.spec
    name = spec.partition_type_attribute or ""
    path = "spec.partitionTypeAttribute"
    malformed = qualified_name_errors(name, fully=True)
    errs.messages(path, name, malformed)
    if not any(d.consumes_counters for d in spec.devices):
        errs.invalid(
            path, name, "may only be set on a slice which declares devices that consume counters"
        )
        return
    if malformed:
        return
    bare = name.removeprefix(f"{spec.driver}/") if name.startswith(f"{spec.driver}/") else ""
    for i, device in enumerate(spec.devices):
        if not device.consumes_counters:
            continue
        attr_path = _key(f"spec.devices[{i}].attributes", name)
        attribute = device.attributes.get(name)
        if attribute is None and bare:
            attribute = device.attributes.get(bare)
        if attribute is None:
            errs.required(
                attr_path,
                "device consumes counters and `partitionTypeAttribute` names this attribute, "
                "so it must be set",
            )
        elif attribute.string is None:
            errs.invalid(
                attr_path,
                attribute.typed_value(),
                "must be a string value because `partitionTypeAttribute` names this attribute",
            )


def _validate_skip_node_operations(operations: list[str], path: str, errs: _Errors) -> None:
    """1.37: a set of known operations; preparing may be skipped only with unpreparing."""
    errs.unique(path, operations)
    for i, operation in enumerate(operations):
        if operation not in SKIP_NODE_OPERATIONS:
            errs.not_supported(f"{path}[{i}]", operation, SKIP_NODE_OPERATIONS)
    skipped = set(operations)
    if SKIP_NODE_PREPARE in skipped and not skipped & {SKIP_NODE_UNPREPARE, SKIP_NODE_ALL}:
        errs.invalid(
            path,
            operations,
            "NodePrepareResources cannot be skipped unless NodeUnprepareResources is also skipped",
        )


def _validate_counter_set(counter_set: CounterSet, path: str, errs: _Errors) -> None:
    errs.name(f"{path}.name", counter_set.name, dns1123_label_errors)
    _validate_counters(
        counter_set.counters, f"{path}.counters", limits.ResourceSliceMaxCountersPerCounterSet, errs
    )


def _validate_counters(counters: dict[str, Any], path: str, maximum: int, errs: _Errors) -> None:
    if not counters:
        errs.required(path)
        return
    if len(counters) > maximum:
        errs.too_many(path, len(counters), maximum)
        return
    for name, counter in counters.items():
        errs.messages(_key(path, name), name, dns1123_label_errors(name))
        if counter.value is None:
            errs.required(f"{_key(path, name)}.value")


def _validate_device(device: Device, path: str, per_device: bool, errs: _Errors) -> None:
    errs.name(f"{path}.name", device.name, dns1123_label_errors)
    total = len(device.attributes) + len(device.capacity)
    if total > limits.ResourceSliceMaxAttributesAndCapacitiesPerDevice:
        errs.invalid(
            path,
            total,
            "the total number of attributes and capacities must not exceed "
            f"{limits.ResourceSliceMaxAttributesAndCapacitiesPerDevice}",
        )
    values = 0
    for name, attribute in device.attributes.items():
        attr_path = _key(f"{path}.attributes", name)
        errs.messages(attr_path, name, qualified_name_errors(name))
        values += _validate_attribute(attribute, attr_path, errs)
    if values > limits.ResourceSliceMaxAttributeValuesPerDevice:
        errs.invalid(
            f"{path}.attributes",
            values,
            "the total number of attribute values must not exceed "
            f"{limits.ResourceSliceMaxAttributeValuesPerDevice}",
        )
    multi = device.allow_multiple_allocations is True
    for name, capacity in device.capacity.items():
        cap_path = _key(f"{path}.capacity", name)
        errs.messages(cap_path, name, qualified_name_errors(name))
        _validate_capacity(capacity, cap_path, multi, errs)

    taints_path = f"{path}.taints"
    if errs.items_within(taints_path, device.taints, limits.DeviceTaintsMaxLength):
        for i, taint in enumerate(device.taints):
            _validate_taint(taint, f"{taints_path}[{i}]", errs)

    consumes_path = f"{path}.consumesCounters"
    if errs.items_within(
        consumes_path,
        device.consumes_counters,
        limits.ResourceSliceMaxDeviceCounterConsumptionsPerDevice,
    ):
        for i, consumption in enumerate(device.consumes_counters):
            _validate_consumption(consumption, f"{consumes_path}[{i}]", errs)
        errs.unique(consumes_path, [c.counter_set for c in device.consumes_counters])

    _validate_device_node_selection(device, path, per_device, errs)
    _validate_binding_conditions(
        device.binding_conditions, device.binding_failure_conditions, path, errs
    )
    if errs.v137:
        _validate_node_allocatable_resources(device, f"{path}.nodeAllocatableResources", errs)
    else:
        _validate_node_allocatable_mappings(device, f"{path}.nodeAllocatableResourceMappings", errs)


def _validate_node_allocatable_mappings(device: Device, path: str, errs: _Errors) -> None:
    """1.36's mappings of a device's capacity to native node resources."""
    for resource_name, mapping in device.node_allocatable_resource_mappings.items():
        key_path = _key(path, resource_name)
        if "/" in resource_name and "kubernetes.io/" not in resource_name:
            errs.invalid(key_path, resource_name, "must be a node allocatable resource name")
        if mapping.allocation_multiplier is None and mapping.capacity_key is None:
            errs.invalid(
                key_path, "", "at least one of allocationMultiplier or capacityKey must be set"
            )
            continue
        multiplier = mapping.allocation_multiplier
        if multiplier is not None and multiplier.sign() <= 0:
            errs.invalid(f"{key_path}.allocationMultiplier", str(multiplier), "must be positive")
        _validate_capacity_key(mapping.capacity_key, device, f"{key_path}.capacityKey", errs)


def _validate_capacity_key(key: str | None, device: Device, path: str, errs: _Errors) -> None:
    if key is None:
        return
    if key == "":
        errs.invalid(path, "", "capacityKey must not be an empty string")
    elif key not in device.capacity:
        errs.add(path, f"Not found: {key!r}")


def _validate_node_allocatable_resources(device: Device, path: str, errs: _Errors) -> None:
    """1.37's node resources a device takes: cpu, memory or hugepages-*, each by a mapping of
    its capacity (or a count per device) and/or an overhead per pod and container."""
    for resource_name, resource in device.node_allocatable_resources.items():
        key_path = _key(path, resource_name)
        if resource_name not in ("cpu", "memory") and not resource_name.startswith("hugepages-"):
            errs.invalid(key_path, resource_name, "must be a node allocatable resource name")
        if resource.mapping is None and resource.overhead is None:
            errs.required(key_path, "at least one of mapping or overhead must be set")
        mapping = resource.mapping
        if mapping is not None:
            m_path = f"{key_path}.mapping"
            _validate_capacity_key(mapping.capacity_key, device, f"{m_path}.capacityKey", errs)
            multiplier = mapping.capacity_multiplier
            if mapping.capacity_key is not None:
                if multiplier is None:
                    errs.required(
                        f"{m_path}.capacityMultiplier",
                        "capacityMultiplier is required when capacityKey is set",
                    )
                elif multiplier.sign() <= 0:
                    errs.invalid(
                        f"{m_path}.capacityMultiplier", str(multiplier), "must be positive"
                    )
            elif multiplier is not None:
                errs.required(
                    f"{m_path}.capacityKey",
                    "capacityKey is required when capacityMultiplier is set",
                )
            per_device = mapping.device_multiplier
            if per_device is not None and per_device.sign() <= 0:
                errs.invalid(f"{m_path}.deviceMultiplier", str(per_device), "must be positive")
            chosen = [
                n
                for n, v in (
                    ("capacityKey", mapping.capacity_key),
                    ("deviceMultiplier", per_device),
                )
                if v is not None
            ]
            if not chosen:
                errs.invalid(m_path, "", "must specify one of: capacityKey, deviceMultiplier")
            elif len(chosen) > 1:
                errs.invalid(
                    m_path,
                    "{" + ", ".join(chosen) + "}",
                    "must specify exactly one of: capacityKey, deviceMultiplier",
                )
        overhead = resource.overhead
        if overhead is not None:
            o_path = f"{key_path}.overhead"
            if overhead.per_pod is None and overhead.per_container is None:
                errs.invalid(o_path, "", "at least one of perPod or perContainer must be set")
                continue
            for name, value in (
                ("perPod", overhead.per_pod),
                ("perContainer", overhead.per_container),
            ):
                if value is not None and value.sign() < 0:
                    errs.invalid(f"{o_path}.{name}", str(value), "must be non-negative")


def _validate_device_node_selection(
    device: Device, path: str, per_device: bool, errs: _Errors
) -> None:
    has_any = (
        device.node_name is not None
        or device.node_selector is not None
        or device.all_nodes is not None
    )
    if not per_device:
        if has_any:
            errs.invalid(
                path,
                None,
                "`nodeName`, `nodeSelector` and `allNodes` can only be set if "
                "`perDeviceNodeSelection` is set to true in the ResourceSlice spec",
            )
        return
    selection: list[str] = []
    if device.node_name is not None:
        if device.node_name:
            selection.append("`nodeName`")
            errs.messages(
                f"{path}.nodeName", device.node_name, dns1123_subdomain_errors(device.node_name)
            )
        else:
            errs.invalid(f"{path}.nodeName", "", "must not be empty")
    if device.node_selector is not None:
        selection.append("`nodeSelector`")
        validate_node_selector(device.node_selector, f"{path}.nodeSelector", errs)
    if device.all_nodes is True:
        selection.append("`allNodes`")
    elif device.all_nodes is False:
        errs.invalid(f"{path}.allNodes", False, "must be either unset or set to true")
    one_of = (
        "exactly one of `nodeName`, `nodeSelector`, or `allNodes` is required when "
        "`perDeviceNodeSelection` is set to true in the ResourceSlice spec"
    )
    if not selection:
        errs.required(path, one_of)
    elif len(selection) > 1:
        errs.invalid(path, "{" + ", ".join(selection) + "}", one_of)


def _validate_attribute(attribute: DeviceAttribute, path: str, errs: _Errors) -> int:
    """Checks one attribute; returns how many values it holds (lists count each element)."""
    kinds = attribute.kinds()
    if len(kinds) != 1:
        errs.invalid(path, kinds, "exactly one value must be specified")
    if (
        attribute.string is not None
        and len(attribute.string) > limits.DeviceAttributeMaxValueLength
    ):
        errs.too_long(f"{path}.string", limits.DeviceAttributeMaxValueLength)
    if attribute.version is not None:
        errs.messages(f"{path}.version", attribute.version, semver_errors(attribute.version))
    for kind in ("ints", "bools", "strings", "versions"):
        values = getattr(attribute, kind)
        if values is not None and not values:
            errs.required(f"{path}.{kind}", "must not be empty")
    for i, value in enumerate(attribute.strings or []):
        if len(value) > limits.DeviceAttributeMaxValueLength:
            errs.too_long(f"{path}.strings[{i}]", limits.DeviceAttributeMaxValueLength)
    for i, value in enumerate(attribute.versions or []):
        errs.messages(f"{path}.versions[{i}]", value, semver_errors(value))
    return len(attribute.values())


def _validate_capacity(capacity: DeviceCapacity, path: str, multi: bool, errs: _Errors) -> None:
    if capacity.value is None:
        errs.required(f"{path}.value")
    policy = capacity.request_policy
    if policy is None:
        return
    if not multi:
        errs.forbidden(f"{path}.requestPolicy", "allowMultipleAllocations must be true")
        return
    if capacity.value is not None:
        _validate_request_policy(capacity.value, policy, f"{path}.requestPolicy", errs)


def _validate_request_policy(
    capacity: Quantity,
    policy: CapacityRequestPolicy,
    path: str,
    errs: _Errors,
) -> None:
    if policy.valid_values and policy.valid_range is not None:
        errs.forbidden(
            path,
            'exactly one policy can be specified, cannot specify "validValues" and "validRange" '
            "at the same time",
        )
        return
    default = policy.default
    if policy.valid_values:
        if default is None:
            errs.required(f"{path}.default", "required when validValues is defined")
            return
        values_path = f"{path}.validValues"
        values = policy.valid_values
        for i in range(len(values) - 1):
            if values[i] > values[i + 1]:
                errs.invalid(
                    f"{values_path}[{i + 1}]",
                    str(values[i + 1]),
                    "values must be sorted in ascending order",
                )
        if not errs.items_within(
            values_path, values, limits.CapacityRequestPolicyDiscreteMaxOptions
        ):
            return
        for i, option in enumerate(values):
            if option > capacity:
                errs.invalid(
                    f"{values_path}[{i}]",
                    str(option),
                    f"option is larger than capacity value: {capacity}",
                )
        # Told apart in whole units, except in 1.37 with fractional ranges.
        errs.unique(values_path, [v.value if errs.fractional else _whole(v) for v in values])
        if default not in values:
            errs.invalid(
                values_path,
                str(default),
                "default value is not valid according to the requestPolicy",
            )
    elif policy.valid_range is not None:
        if default is None:
            errs.required(f"{path}.default", "required when validRange is defined")
            return
        rng, rng_path = policy.valid_range, f"{path}.validRange"
        if rng.min is None:
            errs.required(f"{rng_path}.min", "required when validRange is defined")
            return
        if rng.min > capacity:
            errs.invalid(
                f"{rng_path}.min", str(rng.min), f"min is larger than capacity value: {capacity}"
            )
        # 1.37 reports the default at its own path.
        default_path = f"{rng_path}.default" if errs.v137 else None
        if default < rng.min:
            errs.invalid(
                default_path or f"{rng_path}.min",
                str(default),
                f"default is less than min: {rng.min}",
            )
        if rng.max is not None:
            if rng.min > rng.max:
                errs.invalid(f"{rng_path}.max", str(rng.min), f"min is larger than max: {rng.max}")
            if rng.max > capacity:
                errs.invalid(
                    f"{rng_path}.max",
                    str(rng.max),
                    f"max is larger than capacity value: {capacity}",
                )
            if default > rng.max:
                errs.invalid(
                    default_path or f"{rng_path}.max",
                    str(default),
                    f"default is more than max: {rng.max}",
                )
        bounds = {"default": default, "min": rng.min, "max": rng.max, "step": rng.step}
        milli = errs.fractional and any(
            q is not None and not q.is_integer() for q in (default, rng.min, rng.max, rng.step)
        )
        if milli:
            unsafe = [n for n, q in bounds.items() if q is not None and _milli(q) is None]
            for name in unsafe:
                q = bounds[name]
                errs.invalid(
                    f"{rng_path}.{name}", str(q), "value cannot be represented as a milli value"
                )
            if unsafe:
                return
        if rng.step is not None:
            if rng.step.value <= 0:
                errs.invalid(f"{rng_path}.step", str(rng.step), "must be greater than zero")
                return
            one_step = rng.min + rng.step
            if one_step > capacity:
                errs.invalid(
                    f"{rng_path}.step",
                    str(rng.step),
                    f"one step {one_step} is larger than capacity value: {capacity}",
                )
            if errs.v137 and not milli and _beyond_int64(bounds, rng_path, errs):
                return
            unit = _milli if milli else _whole
            for value in (default, rng.max):
                if value is None:
                    continue
                have, low, step = unit(value), unit(rng.min), unit(rng.step)
                if have is None or low is None or not step or (have - low) % step:
                    errs.invalid(
                        f"{rng_path}.step",
                        str(value),
                        f"value is not a multiple of a given step ({rng.step}) from ({rng.min})",
                    )


_MAX_INT64 = 2**63 - 1


def _whole(q: Quantity) -> int:
    """resource.Quantity.Value(): whole units, rounded up (what the integer checks use)."""
    return int(q.value.to_integral_value(rounding=decimal.ROUND_CEILING))


def _milli(q: Quantity) -> int | None:
    """The value in milli-units when that is exact and fits an int64."""
    milli = q.value * 1000
    if milli != milli.to_integral_value() or not -_MAX_INT64 - 1 <= milli <= _MAX_INT64:
        return None
    return int(milli)


def _beyond_int64(bounds: dict[str, Quantity | None], path: str, errs: _Errors) -> bool:
    """1.37: a bound the integer arithmetic cannot read (negative, or past 2^63-1)."""
    unsafe = False
    for name, q in bounds.items():
        if q is None:
            continue
        if q.sign() < 0:
            errs.invalid(f"{path}.{name}", str(q), "must be greater than or equal to 0")
            unsafe = True
        elif q.value > _MAX_INT64:
            errs.invalid(f"{path}.{name}", str(q), "must not be larger than 9223372036854775807")
            unsafe = True
    return unsafe


def _validate_consumption(consumption: DeviceCounterConsumption, path: str, errs: _Errors) -> None:
    errs.name(f"{path}.counterSet", consumption.counter_set, dns1123_label_errors)
    _validate_counters(
        consumption.counters,
        f"{path}.counters",
        limits.ResourceSliceMaxCountersPerDeviceCounterConsumption,
        errs,
    )
    groups, g_path = consumption.compatibility_groups, f"{path}.compatibilityGroups"
    if errs.v137 and errs.items_within(g_path, groups, limits.DeviceCompatibilityGroupsMaxSize):
        for i, group in enumerate(groups):
            errs.messages(f"{g_path}[{i}]", group, dns1123_label_errors(group))
        errs.unique(g_path, groups)


# --- DeviceClass ---------------------------------------------------------------------------


def validate_device_class(
    cls: DeviceClass, release: Release = DEFAULT_RELEASE
) -> list[FieldViolation]:
    errs = _Errors(release)
    _validate_metadata(cls.metadata, "metadata", errs, namespaced=False)
    spec = cls.spec
    _validate_selectors(spec.selectors, "spec.selectors", errs)
    if errs.items_within("spec.config", spec.config, limits.DeviceConfigMaxSize):
        for i, config in enumerate(spec.config):
            _validate_opaque(config.opaque, f"spec.config[{i}]", errs)
    name = spec.extended_resource_name
    if name is not None and not _is_extended_resource_name(name):
        errs.invalid("spec.extendedResourceName", name, "must be a valid extended resource name")
    return errs.items


def _is_extended_resource_name(name: str) -> bool:
    if "/" not in name or "kubernetes.io/" in name or name.startswith("requests."):
        return False
    return not label_name_errors(name)


# --- ResourceClaim and ResourceClaimTemplate -----------------------------------------------


def validate_resource_claim(
    claim: ResourceClaim, release: Release = DEFAULT_RELEASE
) -> list[FieldViolation]:
    """ValidateResourceClaim for the spec, plus the status rules when a status is set."""
    errs = _Errors(release)
    _validate_metadata(claim.metadata, "metadata", errs, namespaced=True)
    _validate_device_claim(claim.spec.devices, "spec.devices", errs)
    _validate_claim_status(claim.status, claim.spec.devices, "status", errs)
    return errs.items


def validate_resource_claim_template(
    template: ResourceClaimTemplate, release: Release = DEFAULT_RELEASE
) -> list[FieldViolation]:
    errs = _Errors(release)
    _validate_metadata(template.metadata, "metadata", errs, namespaced=True)
    inner = template.spec.metadata
    allowed = {"labels", "annotations"}
    for name in sorted(inner.model_fields_set - allowed):
        if getattr(inner, name) not in (None, [], {}):
            alias = ObjectMeta.model_fields[name].alias or name
            errs.forbidden(f"spec.metadata.{alias}", "only labels and annotations are allowed")
    for name in sorted(inner.model_extra or {}):
        errs.forbidden(f"spec.metadata.{name}", "only labels and annotations are allowed")
    _validate_labels(inner, "spec.metadata", errs)
    _validate_device_claim(template.spec.spec.devices, "spec.spec.devices", errs)
    return errs.items


def _request_names(claim: DeviceClaim) -> dict[str, set[str]]:
    return {r.name or "": {s.name or "" for s in r.first_available} for r in claim.requests}


def _validate_request_ref(name: str, path: str, names: dict[str, set[str]], errs: _Errors) -> None:
    what = (
        "must be the name of a request in the claim or the name of a request and a subrequest "
        "separated by '/'"
    )
    segments = name.split("/")
    if len(segments) > 2:
        errs.invalid(path, name, what)
        return
    for segment in segments:
        errs.name(path, segment, dns1123_label_errors)
    top = segments[0]
    if top not in names or (len(segments) == 2 and segments[1] not in names[top]):
        errs.invalid(path, name, what)


def _validate_request_refs(
    refs: list[str], path: str, names: dict[str, set[str]], errs: _Errors
) -> None:
    if not errs.items_within(path, refs, limits.DeviceRequestsMaxSize):
        return
    for i, ref in enumerate(refs):
        _validate_request_ref(ref, f"{path}[{i}]", names, errs)
    errs.unique(path, refs)


def _constraint_attributes(claim: DeviceClaim) -> dict[str, set[str]]:
    """The attributes constraints compare, by the request they target ("" for all requests)."""
    attributes: dict[str, set[str]] = {}
    for constraint in claim.constraints:
        name = constraint.match_attribute or constraint.distinct_attribute
        if name is None:
            continue
        for request in constraint.requests or [""]:
            attributes.setdefault(request, set()).add(name)
    return attributes


def _constrained(name: str, request: str, attributes: dict[str, set[str]]) -> bool:
    """A constraint on all requests, on this (sub)request, or on a subrequest's parent uses it."""
    parent = request.split("/", 1)[0]
    return any(name in attributes.get(key, ()) for key in {"", request, parent})


def _validate_derived_attributes(
    derived: list[DeviceDerivedAttribute],
    path: str,
    request: str,
    attributes: dict[str, set[str]],
    errs: _Errors,
) -> None:
    """1.37: named by a fully qualified name that a constraint on the request compares, with an
    expression (compiled by ``cel``); at most 32, names unique."""
    if not errs.v137 or not errs.items_within(path, derived, limits.DeviceDerivedAttributesMaxSize):
        return
    for i, attribute in enumerate(derived):
        a_path = f"{path}[{i}]"
        if not attribute.name:
            errs.required(f"{a_path}.name")
        else:
            if not _constrained(attribute.name, request, attributes):
                errs.invalid(
                    f"{a_path}.name",
                    attribute.name,
                    "must be referenced by at least one matchAttribute or distinctAttribute "
                    "constraint targeting this request",
                )
            errs.messages(
                f"{a_path}.name", attribute.name, qualified_name_errors(attribute.name, fully=True)
            )
        if not attribute.expression:
            errs.required(f"{a_path}.expression")
    errs.unique(path, [a.name or "" for a in derived])


def _validate_device_claim(claim: DeviceClaim, path: str, errs: _Errors) -> None:
    names = _request_names(claim)
    attributes = _constraint_attributes(claim)
    requests_path = f"{path}.requests"
    if errs.items_within(requests_path, claim.requests, limits.DeviceRequestsMaxSize):
        for i, request in enumerate(claim.requests):
            req_path = f"{requests_path}[{i}]"
            errs.name(f"{req_path}.name", request.name, dns1123_label_errors)
            has_exactly, has_first = request.exactly is not None, bool(request.first_available)
            if not has_exactly and not has_first:
                errs.required(req_path, "exactly one of `exactly` or `firstAvailable` is required")
            elif has_exactly and has_first:
                errs.invalid(
                    req_path,
                    None,
                    "exactly one of `exactly` or `firstAvailable` is required, "
                    "but multiple fields are set",
                )
            elif request.exactly is not None:
                ex, ex_path = request.exactly, f"{req_path}.exactly"
                _validate_request_body(
                    ex.device_class_name,
                    ex.selectors,
                    ex.allocation_mode,
                    ex.count,
                    ex.tolerations,
                    ex.capacity,
                    ex_path,
                    errs,
                )
                _validate_derived_attributes(
                    ex.derived_attributes,
                    f"{ex_path}.derivedAttributes",
                    request.name or "",
                    attributes,
                    errs,
                )
            else:
                fa_path = f"{req_path}.firstAvailable"
                subs = request.first_available
                if errs.items_within(fa_path, subs, limits.FirstAvailableDeviceRequestMaxSize):
                    for j, sub in enumerate(subs):
                        sub_path = f"{fa_path}[{j}]"
                        errs.name(f"{sub_path}.name", sub.name, dns1123_label_errors)
                        _validate_request_body(
                            sub.device_class_name,
                            sub.selectors,
                            sub.allocation_mode,
                            sub.count,
                            sub.tolerations,
                            sub.capacity,
                            sub_path,
                            errs,
                        )
                        _validate_derived_attributes(
                            sub.derived_attributes,
                            f"{sub_path}.derivedAttributes",
                            f"{request.name or ''}/{sub.name or ''}",
                            attributes,
                            errs,
                        )
                    errs.unique(fa_path, [s.name for s in subs])
        errs.unique(requests_path, [r.name for r in claim.requests])

    constraints_path = f"{path}.constraints"
    if errs.items_within(constraints_path, claim.constraints, limits.DeviceConstraintsMaxSize):
        for i, constraint in enumerate(claim.constraints):
            _validate_constraint(constraint, f"{constraints_path}[{i}]", names, errs)

    config_path = f"{path}.config"
    if errs.items_within(config_path, claim.config, limits.DeviceConfigMaxSize):
        for i, config in enumerate(claim.config):
            c_path = f"{config_path}[{i}]"
            _validate_request_refs(config.requests, f"{c_path}.requests", names, errs)
            _validate_opaque(config.opaque, c_path, errs)


def _validate_request_body(
    device_class_name: str | None,
    selectors: list[DeviceSelector],
    allocation_mode: str | None,
    count: int | None,
    tolerations: list[DeviceToleration],
    capacity: CapacityRequirements | None,
    path: str,
    errs: _Errors,
) -> None:
    errs.name(f"{path}.deviceClassName", device_class_name, dns1123_subdomain_errors)
    _validate_selectors(selectors, f"{path}.selectors", errs)
    mode = allocation_mode or ALLOCATION_MODE_EXACT_COUNT
    if mode == ALLOCATION_MODE_ALL:
        if count:
            errs.invalid(
                f"{path}.count", count, "must not be specified when allocationMode is 'All'"
            )
    elif mode == ALLOCATION_MODE_EXACT_COUNT:
        if count is not None and count <= 0:
            errs.invalid(f"{path}.count", count, "must be greater than zero")
    else:
        errs.not_supported(f"{path}.allocationMode", allocation_mode, ALLOCATION_MODES)
    _validate_tolerations(tolerations, f"{path}.tolerations", errs)
    if capacity is not None:
        # 1.38 caps the entries (MaxCapacityRequirements); 1.36 and 1.37 take any number.
        if errs.v138 and len(capacity.requests) > limits.MaxCapacityRequirements:
            errs.too_many(
                f"{path}.capacity.requests",
                len(capacity.requests),
                limits.MaxCapacityRequirements,
            )
        for name, quantity in capacity.requests.items():
            req_path = _key(f"{path}.capacity.requests", name)
            errs.messages(req_path, name, qualified_name_errors(name))
            if quantity.sign() < 0:
                errs.invalid(req_path, str(quantity), "must be greater than or equal to zero")


def _validate_constraint(
    constraint: DeviceConstraint, path: str, names: dict[str, set[str]], errs: _Errors
) -> None:
    _validate_request_refs(constraint.requests, f"{path}.requests", names, errs)
    match, distinct = constraint.match_attribute, constraint.distinct_attribute
    if match is not None and distinct is not None:
        errs.invalid(
            path,
            None,
            'exactly one of "matchAttribute" or "distinctAttribute" is required, '
            "but multiple fields are set",
        )
    elif match is not None:
        errs.messages(f"{path}.matchAttribute", match, qualified_name_errors(match, fully=True))
    elif distinct is not None:
        errs.messages(
            f"{path}.distinctAttribute", distinct, qualified_name_errors(distinct, fully=True)
        )
    else:
        errs.required(path, 'exactly one of "matchAttribute" or "distinctAttribute" is required')


def _validate_claim_status(
    status: ResourceClaimStatus, claim: DeviceClaim, path: str, errs: _Errors
) -> None:
    names = _request_names(claim)
    reserved_path = f"{path}.reservedFor"
    if errs.items_within(
        reserved_path, status.reserved_for, limits.ResourceClaimReservedForMaxSize
    ):
        for i, ref in enumerate(status.reserved_for):
            for field in ("resource", "name", "uid"):
                if not getattr(ref, field):
                    errs.required(f"{reserved_path}[{i}].{field}")
        errs.unique(reserved_path, [r.uid for r in status.reserved_for])
    if status.reserved_for and status.allocation is None:
        errs.forbidden(reserved_path, "may not be specified when `allocated` is not set")
    allocated: set[tuple[str | None, str | None, str | None, str | None]] = set()
    if status.allocation is not None:
        _validate_allocation(status.allocation, f"{path}.allocation", names, errs)
        allocated = {
            (r.driver, r.pool, r.device, r.share_id) for r in status.allocation.devices.results
        }
    devices_path = f"{path}.devices"
    keys = [(d.driver, d.pool, d.device, d.share_id) for d in status.devices]
    for i, device in enumerate(status.devices):
        d_path = f"{devices_path}[{i}]"
        errs.name(f"{d_path}.driver", device.driver, driver_name_errors)
        errs.name(f"{d_path}.pool", device.pool, pool_name_errors)
        errs.name(f"{d_path}.device", device.device, dns1123_label_errors)
        if device.share_id is not None:
            errs.messages(f"{d_path}.shareID", device.share_id, uid_errors(device.share_id))
        if keys[i] not in allocated:
            errs.invalid(
                d_path,
                "/".join(k or "" for k in keys[i] if k is not None),
                "must be an allocated device in the claim",
            )
        cond_path = f"{d_path}.conditions"
        if len(device.conditions) > limits.AllocatedDeviceStatusMaxConditions:
            errs.too_many(
                cond_path, len(device.conditions), limits.AllocatedDeviceStatusMaxConditions
            )
        _validate_conditions(device.conditions, cond_path, errs)
        if device.data is not None:
            _validate_raw(
                device.data, f"{d_path}.data", limits.AllocatedDeviceStatusDataMaxLength, errs
            )
        net = device.network_data
        if net is not None:
            n_path = f"{d_path}.networkData"
            if (
                net.interface_name
                and len(net.interface_name) > limits.NetworkDeviceDataInterfaceNameMaxLength
            ):
                errs.too_long(
                    f"{n_path}.interfaceName", limits.NetworkDeviceDataInterfaceNameMaxLength
                )
            if (
                net.hardware_address
                and len(net.hardware_address) > limits.NetworkDeviceDataHardwareAddressMaxLength
            ):
                errs.too_long(
                    f"{n_path}.hardwareAddress", limits.NetworkDeviceDataHardwareAddressMaxLength
                )
            if errs.items_within(f"{n_path}.ips", net.ips, limits.NetworkDeviceDataMaxIPs):
                for j, ip in enumerate(net.ips):
                    if not _is_interface_address(ip):
                        errs.invalid(f"{n_path}.ips[{j}]", ip, "must be an IP address in CIDR form")
                errs.unique(f"{n_path}.ips", net.ips)
    errs.unique(devices_path, keys)


def _is_interface_address(text: str) -> bool:
    import ipaddress

    try:
        ipaddress.ip_interface(text)
    except ValueError:
        return False
    return "/" in text


def _validate_allocation(
    allocation: AllocationResult, path: str, names: dict[str, set[str]], errs: _Errors
) -> None:
    results_path = f"{path}.devices.results"
    results = allocation.devices.results
    if errs.items_within(results_path, results, limits.AllocationResultsMaxSize):
        for i, result in enumerate(results):
            r_path = f"{results_path}[{i}]"
            if not result.request:
                errs.required(f"{r_path}.request")
            else:
                _validate_request_ref(result.request, f"{r_path}.request", names, errs)
            errs.name(f"{r_path}.driver", result.driver, driver_name_errors)
            errs.name(f"{r_path}.pool", result.pool, pool_name_errors)
            errs.name(f"{r_path}.device", result.device, dns1123_label_errors)
            _validate_binding_conditions(
                result.binding_conditions, result.binding_failure_conditions, r_path, errs
            )
            if result.share_id is not None:
                errs.messages(f"{r_path}.shareID", result.share_id, uid_errors(result.share_id))
            for name, quantity in result.consumed_capacity.items():
                c_path = _key(f"{r_path}.consumedCapacity", name)
                errs.messages(c_path, name, qualified_name_errors(name))
                if quantity.sign() < 0:
                    errs.invalid(c_path, str(quantity), "must be greater than or equal to zero")
            _validate_tolerations(result.tolerations, f"{r_path}.tolerations", errs)
            if errs.v137:
                _validate_skip_node_operations(
                    result.skip_node_operations, f"{r_path}.skipNodeOperations", errs
                )
    config_path = f"{path}.devices.config"
    if errs.items_within(config_path, allocation.devices.config, limits.AllocationConfigMaxSize):
        for i, config in enumerate(allocation.devices.config):
            c_path = f"{config_path}[{i}]"
            if not config.source:
                errs.required(f"{c_path}.source")
            elif config.source not in ALLOCATION_CONFIG_SOURCES:
                errs.not_supported(f"{c_path}.source", config.source, ALLOCATION_CONFIG_SOURCES)
            _validate_request_refs(config.requests, f"{c_path}.requests", names, errs)
            _validate_opaque(config.opaque, c_path, errs)
    if allocation.node_selector is not None:
        validate_node_selector(allocation.node_selector, f"{path}.nodeSelector", errs)


# --- DeviceTaintRule -----------------------------------------------------------------------


def validate_device_taint_rule(
    rule: DeviceTaintRule, release: Release = DEFAULT_RELEASE
) -> list[FieldViolation]:
    """The same rules in v1beta2 (1.36) and v1 (1.37)."""
    errs = _Errors(release)
    _validate_metadata(rule.metadata, "metadata", errs, namespaced=False)
    selector = rule.spec.device_selector
    if selector is not None:
        path = "spec.deviceSelector"
        if selector.driver is not None:
            errs.messages(f"{path}.driver", selector.driver, driver_name_errors(selector.driver))
        if selector.pool is not None:
            errs.messages(f"{path}.pool", selector.pool, pool_name_errors(selector.pool))
        if selector.device is not None:
            errs.messages(
                f"{path}.device", selector.device, dns1123_label_errors(selector.device) or []
            )
    _validate_taint(rule.spec.taint, "spec.taint", errs)
    conditions = rule.status.conditions
    if len(conditions) > limits.DeviceTaintRuleStatusMaxConditions:
        errs.too_many(
            "status.conditions", len(conditions), limits.DeviceTaintRuleStatusMaxConditions
        )
    _validate_conditions(conditions, "status.conditions", errs)
    return errs.items


# --- dispatch ------------------------------------------------------------------------------

_VALIDATORS: dict[type[KubeModel], Callable[[Any, Release], list[FieldViolation]]] = {
    ResourceSlice: validate_resource_slice,
    DeviceClass: validate_device_class,
    ResourceClaim: validate_resource_claim,
    ResourceClaimTemplate: validate_resource_claim_template,
    DeviceTaintRule: validate_device_taint_rule,
}


def validate(obj: KubeModel, release: Release = DEFAULT_RELEASE) -> list[FieldViolation]:
    """Every violation of one resource.k8s.io object as ``release``'s API server finds them;
    raises TypeError for other types."""
    validator = _VALIDATORS.get(type(obj))
    if validator is None:
        raise TypeError(f"no validation for {type(obj).__name__}")
    return validator(obj, release)
