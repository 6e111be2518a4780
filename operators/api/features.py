"""Kubernetes' feature gates, per release, as that release's kube-scheduler takes them.

kopf-dra must behave like a kube-scheduler started with the same ``--feature-gates`` on the
same cluster: a cluster that turned a DRA gate off has an API server that drops the gated
fields, and a scheduler that refuses what needs them. Each supported release's table is
generated from its own sources (``gate_tables``: every gate kube-scheduler registers, with its
versioned specs and dependencies), so a cluster's whole gate list is accepted. The rules are
component-base's: unknown names, values that are not booleans, locked gates set to the other
value, gates not available at the emulated version, and enabled gates whose dependencies are
off are all errors; ``AllAlpha``/``AllBeta`` set every unlocked gate of that stage that is not
named explicitly. Which spec of a gate applies depends on the version the cluster emulates and
its minimum compatibility version (``KubernetesVersion``, read from the API server's
``/version``), as ``featureSpecAtEmulationAndMinCompatVersion`` picks it.
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import re
from collections.abc import Iterable, Mapping
from typing import Any, Final, Literal

from operators.api import gate_tables

Stage = Literal["Alpha", "Beta", "GA", "Deprecated", "PreAlpha"]
_STAGES: Final[Mapping[str, Stage]] = {
    "ALPHA": "Alpha",
    "BETA": "Beta",
    "": "GA",
    "DEPRECATED": "Deprecated",
}
DRA = "DynamicResourceAllocation"
ALL_STAGES: Final[Mapping[str, Stage]] = {"AllAlpha": "Alpha", "AllBeta": "Beta"}


@dataclasses.dataclass(frozen=True, order=True)
class Release:
    """A Kubernetes minor release, ``1.37``."""

    major: int
    minor: int

    @classmethod
    def parse(cls, text: str) -> Release:
        """``1.37``, ``1.37.2`` or ``v1.37.2`` (a /version gitVersion)."""
        found = re.fullmatch(r"v?(\d+)\.(\d+)(?:\.\d+)?(?:[-+].*)?", text.strip())
        if found is None:
            raise ValueError(f"{text!r} is not a Kubernetes version (MAJOR.MINOR)")
        return cls(int(found[1]), int(found[2]))

    def minus(self, minors: int) -> Release:
        return Release(self.major, self.minor - minors)

    def __str__(self) -> str:
        return f"{self.major}.{self.minor}"


#: The releases kopf-dra supports, oldest first, as upstream supports three minors: the one
#: before the default, the default, and the next, followed from its newest pre-release (1.38:
#: v1.38.0-beta.0) until its release makes it the default.
SUPPORTED_RELEASES: Final = tuple(sorted(map(Release.parse, gate_tables.SOURCES)))
#: The release assumed where no cluster says (tests, simulate on files): the current minor, the
#: local control plane's default (hack/controlplane/VERSION; a test keeps the two equal).
DEFAULT_RELEASE: Final = Release(1, 37)


@dataclasses.dataclass(frozen=True)
class KubernetesVersion:
    """The cluster kopf-dra serves: its release (whose gates and API kopf-dra follows), the
    version it emulates (default: its release) and its minimum compatibility version (default:
    one minor below the emulated version), as component-base defines them."""

    release: Release
    emulation: Release | None = None
    min_compatibility: Release | None = None

    def __post_init__(self) -> None:
        if self.release not in SUPPORTED_RELEASES:
            supported = ", ".join(map(str, SUPPORTED_RELEASES))
            raise ValueError(
                f"Kubernetes {self.release} is not supported (kopf-dra supports {supported})"
            )

    @property
    def emulated(self) -> Release:
        return self.emulation or self.release

    @property
    def compatibility(self) -> Release:
        return self.min_compatibility or self.emulated.minus(1)

    @classmethod
    def of(
        cls,
        release: str,
        emulation: str | None = None,
        min_compatibility: str | None = None,
    ) -> KubernetesVersion:
        return cls(
            Release.parse(release),
            Release.parse(emulation) if emulation else None,
            Release.parse(min_compatibility) if min_compatibility else None,
        )

    @classmethod
    def from_version_info(cls, info: Mapping[str, Any]) -> KubernetesVersion:
        """From the API server's ``/version``: its major/minor (a "+" suffix allowed), and its
        emulation and minimum compatibility versions where it reports them (1.33 and later)."""

        def minor_of(major: str | None, minor: str | None) -> Release | None:
            if not major or not minor:
                return None
            return Release(int(major), int(re.sub(r"\D.*$", "", minor)))

        release = minor_of(info.get("major"), info.get("minor"))
        if release is None:
            release = Release.parse(str(info.get("gitVersion") or ""))
        return cls(
            release,
            minor_of(info.get("emulationMajor"), info.get("emulationMinor")),
            minor_of(info.get("minCompatibilityMajor"), info.get("minCompatibilityMinor")),
        )

    def __str__(self) -> str:
        text = str(self.release)
        if self.emulated != self.release:
            text += f" (emulating {self.emulated})"
        if self.min_compatibility is not None:
            text += f" (min compatibility {self.min_compatibility})"
        return text


DEFAULT_VERSION: Final = KubernetesVersion(DEFAULT_RELEASE)


@dataclasses.dataclass(frozen=True)
class Gate:
    """A gate as it applies at one version: the spec component-base picks for it."""

    default: bool
    stage: Stage
    locked: bool = False
    depends_on: tuple[str, ...] = ()


#: The gates kopf-dra implements: it behaves as kube-scheduler does with each on and off. Every
#: other gate is accepted (so that a cluster's gate list can be given as it is) and changes
#: nothing kopf-dra does; those set explicitly are logged at start.
IMPLEMENTED: Final = frozenset(
    {
        DRA,
        "DRAAdminAccess",
        "DRAConsumableCapacity",
        "DRADeviceBindingConditions",
        # 1.37 alpha, in the allocator as its experimental channel has them.
        "DRADeviceCompatibilityGroups",
        "DRADerivedAttributes",
        "DRADeviceTaintRules",
        "DRADeviceTaints",
        "DRAExtendedResource",
        # 1.37: the allocator's milli-unit ranges, and simulate's validation of them.
        "DRAFractionalCapacityRange",
        "DRAListTypeAttributes",
        # 1.37's shape (Device.nodeAllocatableResources) only: 1.36's alpha fields change nothing.
        "DRANodeAllocatableResources",
        "DRAOptionalNodeOperations",
        "DRAPartitionableDevices",
        # 1.37: the pool status request's partition summary.
        "DRAPartitionableDevicesType",
        "DRAPrioritizedList",
        "DRAResourceClaimDeviceStatus",
        # Enforced by the API server; kopf-dra's part is RBAC that holds the verbs it asks for.
        "DRAResourceClaimGranularStatusAuthorization",
        "DRAResourcePoolStatus",
        "DRASchedulerFilterTimeout",
        # 1.37's pod groups: the scheduler's group cycle, the claim controllers' PodGroup
        # claims, and a PodGroup's own preemption policy.
        "DRAWorkloadResourceClaims",
        "GenericWorkload",
        "PodGroupPreemptionPolicy",
        # 1.37 alpha, 1.38 beta: a group's topology constraint, and trees of groups
        # (scheduling.topology, scheduling.composite).
        "TopologyAwareWorkloadScheduling",
        "CompositePodGroup",
    }
)


def _spec(specs: tuple[gate_tables.Spec, ...], version: KubernetesVersion) -> gate_tables.Spec:
    """component-base's featureSpecAtEmulationAndMinCompatVersion: the newest spec from a
    version at most the emulated one whose minimum compatibility version the cluster meets;
    none: the gate is not available yet (pre-alpha)."""
    for spec in reversed(specs):
        if Release.parse(spec[0]) > version.emulated:
            continue
        if spec[4] is not None and version.compatibility < Release.parse(spec[4]):
            continue
        return spec
    return ("0.0", False, "PREALPHA", False, None)


@functools.cache
def _tables(
    release: str,
) -> tuple[dict[str, tuple[gate_tables.Spec, ...]], Mapping[str, tuple[str, ...]]]:
    """One pinned release's gates (their specs) and dependencies: the newest release's
    tables with what that release has otherwise."""
    specs = {**gate_tables.SPECS, **gate_tables.OLDER_SPECS.get(release, {})}
    dependencies = {**gate_tables.DEPENDENCIES, **gate_tables.OLDER_DEPENDENCIES.get(release, {})}
    return (
        {n: s for n, s in specs.items() if s is not None},
        {n: d for n, d in dependencies.items() if d is not None},
    )


@functools.cache
def gates_of(version: KubernetesVersion = DEFAULT_VERSION) -> Mapping[str, Gate]:
    """Every gate of ``version``'s release, as it applies at that version."""
    specs, dependencies = _tables(str(version.release))
    out: dict[str, Gate] = {}
    for name, given in specs.items():
        spec = _spec(given, version)
        stage: Stage = _STAGES.get(spec[2], "PreAlpha")
        out[name] = Gate(spec[1], stage, spec[3], dependencies.get(name, ()))
    return out


def dra_gates(version: KubernetesVersion = DEFAULT_VERSION) -> Mapping[str, Gate]:
    """The DRA gates of ``version`` (``DynamicResourceAllocation`` and ``DRA*``)."""
    return {n: g for n, g in gates_of(version).items() if n == DRA or n.startswith("DRA")}


def known_anywhere(name: str) -> bool:
    """A gate of some supported release (checked for that release once it is known)."""
    return name in ALL_STAGES or any(name in _tables(r)[0] for r in gate_tables.SOURCES)


class FeatureGateError(ValueError):
    """A ``--feature-gates`` value kube-scheduler would refuse."""


def split_feature_gates(value: str | Mapping[str, bool] | Iterable[str]) -> dict[str, bool]:
    """``"A=true,B=false"`` (or its items, or a mapping) as name -> bool, syntax only."""
    if isinstance(value, Mapping):
        pairs = [(str(k), v) for k, v in value.items()]
    else:
        items = value.split(",") if isinstance(value, str) else list(value)
        pairs = []
        for item in (i.strip() for i in items):
            if not item:
                continue
            # kube-scheduler's flag takes component:Name=value pairs, "kube" by default.
            component, colon, rest = item.partition(":")
            if colon and "=" not in component:
                if component.strip() != "kube":
                    raise FeatureGateError(
                        f"component {component.strip()!r}: kopf-dra takes the gates of "
                        "component kube (Kubernetes' own)"
                    )
                item = rest.strip()
            name, sep, raw = item.partition("=")
            name, raw = name.strip(), raw.strip()
            if not sep or not raw:
                raise FeatureGateError(f"missing bool value for {name}")
            pairs.append((name, _bool(name, raw)))
    overrides: dict[str, bool] = {}
    for name, on in pairs:
        if not isinstance(on, bool):
            raise FeatureGateError(f"invalid value of {name}={on!r}")
        overrides[name] = on
    return overrides


def check_names(value: str | Mapping[str, bool] | Iterable[str]) -> dict[str, bool]:
    """What can be checked before the cluster's version is known: syntax, names that some
    supported release has, and values that every supported release refuses (a gate locked to
    the other value)."""
    overrides = split_feature_gates(value)
    problems = [f"unrecognized feature gate: {n}" for n in overrides if not known_anywhere(n)]
    for name, on in overrides.items():
        locked = [
            gate
            for release in SUPPORTED_RELEASES
            if (gate := gates_of(KubernetesVersion(release)).get(name)) is not None
            and gate.locked
            and gate.default != on
        ]
        if locked and len(locked) == len(SUPPORTED_RELEASES):
            problems.append(
                f"cannot set feature gate {name} to {str(on).lower()}, feature is locked to "
                f"{str(locked[0].default).lower()}"
            )
    if problems:
        raise FeatureGateError("; ".join(problems))
    return overrides


def parse_feature_gates(
    value: str | Mapping[str, bool] | Iterable[str],
    version: KubernetesVersion = DEFAULT_VERSION,
) -> dict[str, bool]:
    """``value`` as overrides checked as ``version``'s kube-scheduler checks them."""
    overrides = split_feature_gates(value)
    gates = gates_of(version)
    problems = []
    for name, on in overrides.items():
        gate = gates.get(name)
        if gate is None and name not in ALL_STAGES:
            problems.append(f"unrecognized feature gate: {name} (Kubernetes {version.release})")
        elif gate is not None and gate.locked and on != gate.default:
            problems.append(
                f"cannot set feature gate {name} to {str(on).lower()}, feature is locked to "
                f"{str(gate.default).lower()}"
            )
        elif gate is not None and gate.stage == "PreAlpha":
            problems.append(
                f"cannot set feature gate {name} to {str(on).lower()}, feature is PreAlpha at "
                f"emulated version {version.emulated}, min compatibility version "
                f"{version.compatibility}"
            )
    if problems:
        raise FeatureGateError("; ".join(problems))
    disabled = _disabled_dependencies(resolve(overrides, version), version)
    if disabled:
        raise FeatureGateError(
            "; ".join(
                f"{gate} is enabled, but depends on features that are disabled: [{' '.join(deps)}]"
                for gate, deps in disabled.items()
            )
        )
    return overrides


def feature_gates_argument(value: str) -> dict[str, bool]:
    """``type=`` of an argparse ``--feature-gates``: a refusal is a usage error (exit 2). The
    names are checked against every supported release; ``parse_feature_gates`` checks the
    rest once the release is known."""
    try:
        return check_names(value)
    except FeatureGateError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def _bool(name: str, raw: str) -> bool:
    """Go's strconv.ParseBool, which component-base uses."""
    if raw in ("1", "t", "T", "true", "TRUE", "True"):
        return True
    if raw in ("0", "f", "F", "false", "FALSE", "False"):
        return False
    raise FeatureGateError(f"invalid value of {name}={raw}, err: not a boolean")


def resolve(
    overrides: Mapping[str, bool], version: KubernetesVersion = DEFAULT_VERSION
) -> dict[str, bool]:
    """Every gate's value at ``version``: explicit names, then AllAlpha/AllBeta, then the
    default."""
    gates = {}
    for name, gate in gates_of(version).items():
        stage_name = next((k for k, s in ALL_STAGES.items() if s == gate.stage), None)
        if name in overrides:
            gates[name] = overrides[name]
        elif stage_name is not None and stage_name in overrides and not gate.locked:
            gates[name] = overrides[stage_name]
        else:
            gates[name] = gate.default
    return gates


def _disabled_dependencies(
    gates: Mapping[str, bool], version: KubernetesVersion
) -> dict[str, list[str]]:
    return {
        name: deps
        for name, gate in gates_of(version).items()
        if gates.get(name) and (deps := [d for d in gate.depends_on if not gates.get(d)])
    }


def not_implemented(overrides: Mapping[str, bool]) -> list[str]:
    """The gates set explicitly that kopf-dra does not implement (said once at start)."""
    return sorted(n for n in overrides if n not in IMPLEMENTED and n not in ALL_STAGES)


def format_feature_gates(gates: Mapping[str, bool]) -> str:
    """The ``--feature-gates`` value that sets ``gates`` (sorted, as components print them)."""
    return ",".join(f"{name}={str(on).lower()}" for name, on in sorted(gates.items()))
