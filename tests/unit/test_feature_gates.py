"""--feature-gates: Kubernetes' names, component-base's rules, the defaults of the pinned release,
and what each gate changes when it is off (the allocator's gate-off behaviour itself is proven
by the upstream table, whose cases name the features they run with)."""

from __future__ import annotations

import argparse
import dataclasses
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
import yaml

from operators.allocator import AllocatedState, Allocator, Features
from operators.allocator.errors import FeatureDisabledError
from operators.allocator.selectors import CelSelectorEngine
from operators.api import gate_tables
from operators.api.features import (
    IMPLEMENTED,
    FeatureGateError,
    Gate,
    KubernetesVersion,
    check_names,
    dra_gates,
    format_feature_gates,
    gates_of,
    not_implemented,
    parse_feature_gates,
    resolve,
)
from operators.cel import CELEnvironment
from operators.controllers.pool_validator.handlers import PoolValidatorController
from operators.controllers.pool_validator.settings import PoolValidatorSettings
from operators.controllers.scheduler.handlers import Scheduler
from operators.controllers.scheduler.settings import SchedulerSettings
from operators.localcluster.controlplane import default_version, feature_gates
from operators.settings import SettingsError
from operators.simulate import build_parser
from tests.unit.allocator import builders as b

# The defaults of Kubernetes 1.36 (pkg/features/kube_features.go of v1.36.3), written out so
# that a change to the table is a visible change here too.
DEFAULTS_1_36 = {
    "DynamicResourceAllocation": True,
    "DRAAdminAccess": True,
    "DRAConsumableCapacity": True,
    "DRADeviceBindingConditions": True,
    "DRADeviceTaintRules": False,
    "DRADeviceTaints": True,
    "DRAExtendedResource": True,
    "DRAListTypeAttributes": False,
    "DRANodeAllocatableResources": False,
    "DRAPartitionableDevices": True,
    "DRAPrioritizedList": True,
    "DRAResourceClaimDeviceStatus": True,
    "DRAResourceClaimGranularStatusAuthorization": True,
    "DRAResourcePoolStatus": False,
    "DRASchedulerFilterTimeout": True,
    "DRAWorkloadResourceClaims": False,
}


# 1.37.2's (the issue that moved kopf-dra to 1.37 lists them), min compatibility 1.36.
DEFAULTS_1_37 = {
    **DEFAULTS_1_36,
    "DRADeviceTaintRules": True,  # GA
    "DRAFractionalCapacityRange": False,  # on only with min compatibility 1.37
    "DRADerivedAttributes": False,
    "DRADeviceCompatibilityGroups": False,
    "DRAOptionalNodeOperations": False,
    "DRAPartitionableDevicesType": False,
}
V136, V137 = KubernetesVersion.of("1.36"), KubernetesVersion.of("1.37")
GATES = dra_gates(V136)


@pytest.mark.parametrize(("version", "defaults"), [(V136, DEFAULTS_1_36), (V137, DEFAULTS_1_37)])
def test_the_dra_defaults_are_those_of_each_release(
    version: KubernetesVersion, defaults: dict[str, bool]
) -> None:
    assert {n: g.default for n, g in dra_gates(version).items()} == defaults
    assert {n: v for n, v in resolve({}, version).items() if n in defaults} == defaults
    assert Features.release() == Features.from_gates(DEFAULTS_1_36)


def test_a_default_follows_the_minimum_compatibility_version_as_component_base_has_it() -> None:
    """DRAFractionalCapacityRange: beta from 1.37, on by default once no 1.36 server may be in
    the cluster (min compatibility 1.37); a 1.37 server emulating 1.36 has no such gate yet."""
    assert not resolve({}, V137)["DRAFractionalCapacityRange"]
    compatible = KubernetesVersion.of("1.37", min_compatibility="1.37")
    assert resolve({}, compatible)["DRAFractionalCapacityRange"]
    emulating = KubernetesVersion.of("1.37", emulation="1.36")
    assert dra_gates(emulating)["DRAFractionalCapacityRange"].stage == "PreAlpha"
    with pytest.raises(FeatureGateError, match=r"PreAlpha at emulated version 1\.36"):
        parse_feature_gates("DRAFractionalCapacityRange=true", emulating)
    assert dra_gates(emulating)["DRADeviceTaintRules"].stage == "Beta"


def test_each_release_takes_its_own_gate_list() -> None:
    """A 1.37 cluster's gate list is taken on 1.37, a 1.36 one's on 1.36; a gate one release
    does not have is refused naming that release, and one none has is refused at once."""
    assert parse_feature_gates("GenericWorkload=true,DRAWorkloadResourceClaims=true", V137)
    assert parse_feature_gates("GangScheduling=true,GenericWorkload=true", V136)
    with pytest.raises(
        FeatureGateError, match=r"unrecognized feature gate: GangScheduling \(Kubernetes 1.37\)"
    ):
        parse_feature_gates("GangScheduling=true", V137)
    with pytest.raises(FeatureGateError, match="feature is locked to true"):
        parse_feature_gates("DRAExtendedResource=false", V137)
    assert parse_feature_gates("DRAExtendedResource=false", V136)
    assert check_names("GangScheduling=true,SchedulerPreQueueingHints=true")
    # kube-scheduler's flag syntax: component:Name=value, "kube" the only component.
    assert check_names("kube:GenericWorkload=true, DRAPrioritizedList=false") == {
        "GenericWorkload": True,
        "DRAPrioritizedList": False,
    }
    with pytest.raises(FeatureGateError, match="component 'wardle'"):
        check_names("wardle:featureA=true")
    with pytest.raises(FeatureGateError, match="unrecognized feature gate: DRANope"):
        check_names("DRANope=true")
    assert not_implemented({"SchedulerPreQueueingHints": True, "DRAPrioritizedList": False}) == [
        "SchedulerPreQueueingHints"
    ]


def test_a_version_is_read_as_the_api_server_reports_it() -> None:
    info = {
        "major": "1",
        "minor": "37+",
        "gitVersion": "v1.37.2",
        "emulationMajor": "1",
        "emulationMinor": "37",
        "minCompatibilityMajor": "1",
        "minCompatibilityMinor": "36",
    }
    version = KubernetesVersion.from_version_info(info)
    assert version == KubernetesVersion.of("1.37", "1.37", "1.36")
    assert KubernetesVersion.from_version_info({"gitVersion": "v1.36.3"}) == V136
    with pytest.raises(
        ValueError, match=r"Kubernetes 1.35 is not supported \(kopf-dra supports 1.36, 1.37, 1.38\)"
    ):
        KubernetesVersion.from_version_info({"major": "1", "minor": "35"})


@pytest.mark.parametrize(
    ("value", "error"),
    [
        ("DRANope=true", "unrecognized feature gate: DRANope"),
        ("DRAPrioritizedList", "missing bool value for DRAPrioritizedList"),
        ("DRAPrioritizedList=maybe", "invalid value of DRAPrioritizedList=maybe"),
        (
            "DRAAdminAccess=false",
            "cannot set feature gate DRAAdminAccess to false, feature is locked to true",
        ),
        (
            "DynamicResourceAllocation=false",
            "cannot set feature gate DynamicResourceAllocation to false",
        ),
        (
            "DRAResourceClaimDeviceStatus=false",
            "cannot set feature gate DRAResourceClaimDeviceStatus to false, feature is locked to "
            "true",
        ),
        (
            "DRADeviceTaints=false,DRADeviceTaintRules=true",
            "DRADeviceTaintRules is enabled, but depends on features that are disabled: "
            "[DRADeviceTaints]",
        ),
    ],
)
def test_values_kube_scheduler_refuses_are_refused(value: str, error: str) -> None:
    with pytest.raises(FeatureGateError, match=error.replace("[", r"\[").replace("]", r"\]")):
        parse_feature_gates(value)


@pytest.mark.parametrize(
    ("value", "error"),
    [
        (
            "DRAResourceClaimDeviceStatus=false",
            "DRADeviceBindingConditions is enabled, but depends on features that are disabled: "
            "[DRAResourceClaimDeviceStatus]",
        ),
        ("DRAPrioritizedList=maybe", "invalid value of DRAPrioritizedList=maybe"),
    ],
)
def test_values_kube_scheduler_136_refuses_are_refused_on_136(value: str, error: str) -> None:
    """1.37 locks DRAResourceClaimDeviceStatus on; 1.36 refuses only what depends on it."""
    with pytest.raises(FeatureGateError, match=error.replace("[", r"\[").replace("]", r"\]")):
        parse_feature_gates(value, V136)


def test_prioritized_list_is_off_only_on_136() -> None:
    """GA in both, locked on only in 1.37 (DRAExtendedResource: test_each_release_...)."""
    assert parse_feature_gates("DRAPrioritizedList=false", V136) == {"DRAPrioritizedList": False}
    with pytest.raises(FeatureGateError, match="cannot set feature gate DRAPrioritizedList"):
        parse_feature_gates("DRAPrioritizedList=false", V137)


def test_go_booleans_all_alpha_and_all_beta() -> None:
    assert parse_feature_gates("DRAListTypeAttributes=T, DRAPrioritizedList=0", V136) == {
        "DRAListTypeAttributes": True,
        "DRAPrioritizedList": False,
    }
    assert parse_feature_gates("DRAListTypeAttributes=T, DRAPrioritizedList=1") == {
        "DRAListTypeAttributes": True,
        "DRAPrioritizedList": True,
    }
    # 1.37's alpha gates include some whose dependencies are beta and off (GenericWorkload),
    # so there, as in component-base, all alpha without those is refused.
    with pytest.raises(FeatureGateError, match="depends on features that are disabled"):
        parse_feature_gates("AllAlpha=true,DRAResourcePoolStatus=false", V137)
    gates = resolve(parse_feature_gates("AllAlpha=true,DRAResourcePoolStatus=false", V136), V136)
    assert gates["DRAListTypeAttributes"]
    assert gates["DRAWorkloadResourceClaims"]
    assert not gates["DRAResourcePoolStatus"]  # named explicitly
    assert gates["DRAPrioritizedList"]  # GA: not touched by AllAlpha
    gates = resolve(parse_feature_gates("AllBeta=false,DRAResourceClaimDeviceStatus=true"))
    assert not gates["DRAPartitionableDevices"]
    assert not gates["DRADeviceBindingConditions"]
    assert gates["DRAAdminAccess"]  # locked


def test_the_local_control_planes_gates_round_trip() -> None:
    gates = feature_gates(default_version())
    assert parse_feature_gates(format_feature_gates(gates)) == gates


def test_a_bad_flag_or_environment_value_is_a_settings_error_naming_both() -> None:
    parser = argparse.ArgumentParser()
    SchedulerSettings.add_arguments(parser)
    with pytest.raises(
        SettingsError,
        match="--feature-gates / KOPF_DRA_FEATURE_GATES: unrecognized feature gate: DRAFoo",
    ):
        SchedulerSettings.load(parser.parse_args(["--feature-gates", "DRAFoo=true"]), {})
    settings = SchedulerSettings.load(
        parser.parse_args([]), {"KOPF_DRA_FEATURE_GATES": "DRAListTypeAttributes=true"}
    )
    assert settings.gate("DRAListTypeAttributes")
    assert settings.gate("DRAPrioritizedList")  # the default where not named


def test_simulate_takes_the_schedulers_flag() -> None:
    args = build_parser().parse_args(["--feature-gates", "DRAPrioritizedList=false"])
    assert args.feature_gates == {"DRAPrioritizedList": False}
    with pytest.raises(SystemExit) as exited:
        build_parser().parse_args(["--feature-gates", "DRAFoo=true"])
    assert exited.value.code == 2


# --- what each gate changes -----------------------------------------------------------------

# Gate -> the allocator's field it switches (None: not an allocator gate).
ALLOCATOR_FIELDS: dict[str, str | None] = {
    "DynamicResourceAllocation": None,
    "DRAAdminAccess": "admin_access",
    "DRAConsumableCapacity": "consumable_capacity",
    "DRADeviceBindingConditions": "device_binding_conditions",
    "DRADeviceTaintRules": None,
    "DRADeviceTaints": "device_taints",
    "DRAExtendedResource": None,
    "DRAListTypeAttributes": "list_type_attributes",
    "DRANodeAllocatableResources": None,
    "DRAPartitionableDevices": "partitionable_devices",
    "DRAPrioritizedList": "prioritized_list",
    "DRAResourceClaimDeviceStatus": "resource_claim_device_status",
    "DRAResourceClaimGranularStatusAuthorization": None,
    "DRAResourcePoolStatus": None,
    "DRASchedulerFilterTimeout": None,
    "DRAWorkloadResourceClaims": None,
}
# 1.37 adds these; kopf-dra implements three of them off only (operators.allocator.features).
ALLOCATOR_FIELDS_1_37: dict[str, str | None] = {
    **ALLOCATOR_FIELDS,
    "DRADerivedAttributes": "derived_attributes",
    "DRADeviceCompatibilityGroups": "device_compatibility_groups",
    "DRAFractionalCapacityRange": "fractional_capacity_range",
    "DRAOptionalNodeOperations": "optional_node_operations",
    "DRAPartitionableDevicesType": None,
}
GATES_1_37 = dra_gates(V137)
# Gates the scheduler itself honours, outside the allocator.
SCHEDULER_GATES = {
    "DRADeviceTaintRules",
    "DRAExtendedResource",
    "DRANodeAllocatableResources",
    "DRASchedulerFilterTimeout",
}
# Gates the pool validator honours.
POOL_VALIDATOR_GATES = {"DRAResourcePoolStatus", "DRAPartitionableDevicesType"}
# Gates the API server enforces on kopf-dra's writes, which the manifests' RBAC satisfies
# (tests/integration/test_rbac.py runs the components under them).
API_SERVER_GATES = {"DRAResourceClaimGranularStatusAuthorization"}
# 1.37's pod groups: the scheduler's group cycle and preemption, the claim controllers' claims,
# a group's topology constraint and trees of groups.
GROUP_GATES = {
    "GenericWorkload",
    "DRAWorkloadResourceClaims",
    "PodGroupPreemptionPolicy",
    "TopologyAwareWorkloadScheduling",
    "CompositePodGroup",
}


def flipped(name: str, table: Mapping[str, Gate] = GATES) -> dict[str, bool]:
    """Every gate on, then ``name`` off (with what depends on it)."""
    gates = dict.fromkeys(table, True)
    gates[name] = False
    for other, gate in table.items():
        if name in gate.depends_on:
            gates[other] = False
    return gates


def test_every_gate_is_in_the_table() -> None:
    assert set(ALLOCATOR_FIELDS) == set(GATES)
    assert set(ALLOCATOR_FIELDS_1_37) == set(GATES_1_37)
    allocator = {n for n, f in ALLOCATOR_FIELDS_1_37.items() if f}
    elsewhere = SCHEDULER_GATES | POOL_VALIDATOR_GATES | API_SERVER_GATES | GROUP_GATES
    assert allocator | elsewhere | {"DynamicResourceAllocation"} == IMPLEMENTED
    # The start log names none of them as "not implemented".
    assert not_implemented(dict.fromkeys(GROUP_GATES, True)) == []


@pytest.mark.parametrize("name", sorted(n for n, f in ALLOCATOR_FIELDS_1_37.items() if f))
def test_an_allocator_gate_switches_its_field_and_no_other(name: str) -> None:
    on = dataclasses.asdict(Features.from_gates(dict.fromkeys(GATES_1_37, True)))
    off = dataclasses.asdict(Features.from_gates(flipped(name, GATES_1_37)))
    dependants = {ALLOCATOR_FIELDS_1_37[n] for n, g in GATES_1_37.items() if name in g.depends_on}
    assert {k for k in on if on[k] != off[k]} == {ALLOCATOR_FIELDS_1_37[name]} | (
        dependants - {None}
    )


def _scheduler(kubernetes: str | None = None, **gates: bool) -> Scheduler:
    return Scheduler(
        SchedulerSettings(
            feature_gates={**dict.fromkeys(("DRAListTypeAttributes",), True), **gates},
            filter_timeout=7,
            kubernetes_version=kubernetes,
        )
    )


def test_scheduler_gates_device_taint_rules_and_filter_timeout() -> None:
    on = _scheduler(DRADeviceTaintRules=True, DRASchedulerFilterTimeout=True)
    off = _scheduler(DRADeviceTaintRules=False, DRASchedulerFilterTimeout=False)
    assert (on.profile.taint_rules, on.profile.filter_timeout) == (True, 7)
    # Off, kube-scheduler watches no DeviceTaintRule and has no filter timeout.
    assert (off.profile.taint_rules, off.profile.filter_timeout) == (False, 0.0)
    assert off.indices.has("taint_rules")
    assert not list(off.indices.keys("taint_rules"))


def test_scheduler_gates_extended_resources() -> None:
    assert _scheduler(DRAExtendedResource=True).profile.extended
    assert _scheduler().profile.extended  # 1.37: GA, locked on
    assert not _scheduler("1.36", DRAExtendedResource=False).profile.extended


def _allocate(features: Features, claim: Any) -> Any:
    klass = b.device_class(b.CLASS_A, b.DRIVER_A)
    slices = [b.slice_one(b.SLICE1, b.NODE1, b.POOL1, b.DRIVER_A)]
    allocator = Allocator(
        features,
        AllocatedState.from_claims([], features),
        [klass],
        slices,
        CelSelectorEngine(CELEnvironment()),
        share_ids=lambda: b.FIXED_SHARE_ID,
    )
    return allocator.allocate(b.node(b.NODE1, b.REGION1), [claim])


def test_a_claim_with_alternatives_fails_as_upstream_says_with_prioritized_list_off() -> None:
    claim = b.claim(
        b.CLAIM0,
        b.prioritized(b.REQ0, b.sub_request(b.SUBREQ0, b.CLASS_A)),
    )
    assert _allocate(Features.release(), claim).fits
    with pytest.raises(
        FeatureDisabledError,
        match="request req-0: has subrequests, but the DRAPrioritizedList feature is disabled",
    ):
        # 1.36 only: 1.37 locks the gate on.
        _allocate(Features.release({"DRAPrioritizedList": False}, V136), claim)


def test_the_local_clusters_installs_give_every_component_the_control_planes_gates() -> None:
    """The local cluster's kustomize overlay and Helm values carry the default release's gates,
    gate for gate."""
    root = Path(__file__).resolve().parents[2] / "e2e" / "cluster"
    overlay = yaml.safe_load((root / "overlay" / "kustomization.yaml").read_text())
    (patch,) = [p for p in overlay["patches"] if "KOPF_DRA_FEATURE_GATES" in p["patch"]]
    (op,) = yaml.safe_load(patch["patch"])
    gates = feature_gates(default_version())
    assert op["value"]["value"] == format_feature_gates(gates)
    values = yaml.safe_load((root.parents[1] / "hack" / "cluster" / "helm-values.yaml").read_text())
    assert values["featureGates"] == gates


def test_pool_validator_answers_pool_status_requests_only_with_the_gate() -> None:
    # Off, the API server serves no ResourcePoolStatusRequest: nothing to watch or answer.
    on = PoolValidatorController(
        PoolValidatorSettings(feature_gates={"DRAResourcePoolStatus": True})
    )
    off = PoolValidatorController(PoolValidatorSettings(feature_gates={}))
    assert (on.answers_requests, off.answers_requests) == (True, False)


def test_the_gate_tables_say_they_are_generated_and_repeat_no_release() -> None:
    """Tools look for Go's marker on the first line; an older release's table holds only what
    differs from the newest's."""
    path = Path(gate_tables.__file__)
    first = path.read_text().splitlines()[0]
    assert re.fullmatch(r"# Code generated by \S+; DO NOT EDIT\.", first), first
    for older, specs in gate_tables.OLDER_SPECS.items():
        assert older in gate_tables.SOURCES
        assert all(gate_tables.SPECS.get(n) != s for n, s in specs.items()), older
    for older, deps in gate_tables.OLDER_DEPENDENCIES.items():
        assert all(gate_tables.DEPENDENCIES.get(n) != d for n, d in deps.items()), older
    # Each release read back whole: 1.36 has gates 1.37 removed, and not those it added.
    assert "CompositePodGroup" in gates_of(V137)
    assert "CompositePodGroup" not in gates_of(KubernetesVersion.of("1.36"))


def test_the_next_minor_is_followed_from_its_pre_release() -> None:
    """1.38's gate table is read from its pre-release's sources (GA gates locked where it locks
    them, the gates it removed gone, their names refused), and a 1.38 cluster is served."""
    assert gate_tables.SOURCES["1.38"] == "v1.38.0-beta.0"
    v138 = KubernetesVersion.of("1.38")
    with pytest.raises(ValueError, match="PodGroupPreemptionPolicy"):
        parse_feature_gates({"PodGroupPreemptionPolicy": True}, v138)
    with pytest.raises(ValueError, match="DRAPartitionableDevices"):
        parse_feature_gates({"DRAPartitionableDevices": False}, v138)
    assert resolve(parse_feature_gates({}, v138), v138)["SchedulerPreQueueingHints"]
    assert "DynamicResourceAllocation" not in gate_tables.SPECS, "gone in 1.38"
    assert "DynamicResourceAllocation" in gates_of(V137)
    assert gate_tables.SPECS["DRAPartitionableDevices"][-1] == ("1.38", True, "", True, None)
