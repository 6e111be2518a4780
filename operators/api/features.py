"""Kubernetes' DRA feature gates, under their own names, with the defaults of the release the
project targets (the local control plane's, 1.36).

kopf-dra must behave like a kube-scheduler started with the same ``--feature-gates``: a cluster
that turned a DRA gate off has an API server that drops the gated fields, and a scheduler that
refuses what needs them. The table and the parsing rules are component-base's: unknown names,
values that are not booleans, locked gates set to the other value and enabled gates whose
dependencies are off are all errors, and ``AllAlpha``/``AllBeta`` set every unlocked gate of
that stage that is not named explicitly.
"""

from __future__ import annotations

import argparse
import dataclasses
from collections.abc import Iterable, Mapping
from typing import Final, Literal

KUBERNETES_RELEASE: Final = "1.36"

Stage = Literal["Alpha", "Beta", "GA"]


@dataclasses.dataclass(frozen=True)
class Gate:
    default: bool
    stage: Stage
    locked: bool = False
    depends_on: tuple[str, ...] = ()
    implemented: bool = True  # False: accepted for compatibility, kopf-dra does nothing with it


DRA = "DynamicResourceAllocation"

GATES: Final[Mapping[str, Gate]] = {
    DRA: Gate(True, "GA", locked=True),
    "DRAAdminAccess": Gate(True, "GA", locked=True, depends_on=(DRA,)),
    "DRAConsumableCapacity": Gate(True, "Beta", depends_on=(DRA,)),
    "DRADeviceBindingConditions": Gate(
        True, "Beta", depends_on=(DRA, "DRAResourceClaimDeviceStatus")
    ),
    "DRADeviceTaintRules": Gate(False, "Beta", depends_on=("DRADeviceTaints",)),
    "DRADeviceTaints": Gate(True, "Beta", depends_on=(DRA,)),
    "DRAExtendedResource": Gate(True, "Beta", depends_on=(DRA,)),
    "DRAListTypeAttributes": Gate(False, "Alpha", depends_on=(DRA,)),
    "DRANodeAllocatableResources": Gate(False, "Alpha", depends_on=(DRA,), implemented=False),
    "DRAPartitionableDevices": Gate(True, "Beta", depends_on=(DRA,)),
    "DRAPrioritizedList": Gate(True, "GA", depends_on=(DRA,)),
    "DRAResourceClaimDeviceStatus": Gate(True, "Beta"),
    # Enforced by the API server; kopf-dra's part is RBAC that holds the verbs it asks for.
    "DRAResourceClaimGranularStatusAuthorization": Gate(
        True, "Beta", depends_on=(DRA, "DRAResourceClaimDeviceStatus")
    ),
    "DRAResourcePoolStatus": Gate(False, "Alpha", depends_on=(DRA,)),
    "DRASchedulerFilterTimeout": Gate(True, "Beta", depends_on=(DRA,)),
    # Upstream it also depends on GenericWorkload, a gate outside DRA that kopf-dra does not know.
    "DRAWorkloadResourceClaims": Gate(False, "Alpha", depends_on=(DRA,), implemented=False),
}
ALL_STAGES: Final[Mapping[str, Stage]] = {"AllAlpha": "Alpha", "AllBeta": "Beta"}


class FeatureGateError(ValueError):
    """A ``--feature-gates`` value kube-scheduler would refuse."""


def parse_feature_gates(value: str | Mapping[str, bool] | Iterable[str]) -> dict[str, bool]:
    """``"A=true,B=false"`` (or its items, or a mapping) as checked overrides."""
    if isinstance(value, Mapping):
        pairs = [(str(k), v) for k, v in value.items()]
    else:
        items = value.split(",") if isinstance(value, str) else list(value)
        pairs = []
        for item in (i.strip() for i in items):
            if not item:
                continue
            name, sep, raw = item.partition("=")
            name, raw = name.strip(), raw.strip()
            if not sep or not raw:
                raise FeatureGateError(f"missing bool value for {name}")
            pairs.append((name, _bool(name, raw)))
    overrides: dict[str, bool] = {}
    problems = []
    for name, on in pairs:
        if not isinstance(on, bool):
            raise FeatureGateError(f"invalid value of {name}={on!r}")
        gate = GATES.get(name)
        if gate is None and name not in ALL_STAGES:
            problems.append(f"unrecognized feature gate: {name}")
        elif gate is not None and gate.locked and on != gate.default:
            problems.append(
                f"cannot set feature gate {name} to {str(on).lower()}, feature is locked to "
                f"{str(gate.default).lower()}"
            )
        overrides[name] = on
    if problems:
        raise FeatureGateError("; ".join(problems))
    disabled = _disabled_dependencies(resolve(overrides))
    if disabled:
        raise FeatureGateError(
            "; ".join(
                f"{gate} is enabled, but depends on features that are disabled: [{' '.join(deps)}]"
                for gate, deps in disabled.items()
            )
        )
    return overrides


def feature_gates_argument(value: str) -> dict[str, bool]:
    """``type=`` of an argparse ``--feature-gates``: a refusal is a usage error (exit 2)."""
    try:
        return parse_feature_gates(value)
    except FeatureGateError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def _bool(name: str, raw: str) -> bool:
    """Go's strconv.ParseBool, which component-base uses."""
    if raw in ("1", "t", "T", "true", "TRUE", "True"):
        return True
    if raw in ("0", "f", "F", "false", "FALSE", "False"):
        return False
    raise FeatureGateError(f"invalid value of {name}={raw}, err: not a boolean")


def resolve(overrides: Mapping[str, bool]) -> dict[str, bool]:
    """Every known gate's value: explicit names, then AllAlpha/AllBeta, then the default."""
    gates = {}
    for name, gate in GATES.items():
        stage_name = next((k for k, s in ALL_STAGES.items() if s == gate.stage), None)
        if name in overrides:
            gates[name] = overrides[name]
        elif stage_name is not None and stage_name in overrides and not gate.locked:
            gates[name] = overrides[stage_name]
        else:
            gates[name] = gate.default
    return gates


def _disabled_dependencies(gates: Mapping[str, bool]) -> dict[str, list[str]]:
    return {
        name: deps
        for name, gate in GATES.items()
        if gates[name] and (deps := [d for d in gate.depends_on if not gates[d]])
    }


def format_feature_gates(gates: Mapping[str, bool]) -> str:
    """The ``--feature-gates`` value that sets ``gates`` (sorted, as components print them)."""
    return ",".join(f"{name}={str(on).lower()}" for name, on in sorted(gates.items()))
