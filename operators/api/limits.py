"""API limits of resource.k8s.io/v1 in Kubernetes 1.36 and 1.37, under their upstream Go names.

Taken from k8s.io/api resource/v1 (types.go) and apimachinery's validation package, not from
the KEPs, whose numbers are older. Keeping the Go names makes every use greppable upstream.
"""

from __future__ import annotations

from typing import Final

# --- generic Kubernetes name limits (k8s.io/apimachinery/pkg/util/validation) --------------
DNS1123LabelMaxLength: Final = 63
DNS1123SubdomainMaxLength: Final = 253
LabelValueMaxLength: Final = 63
QualifiedNameMaxLength: Final = 63  # the name part of a label key / condition type
CIdentifierMaxLength: Final = DNS1123SubdomainMaxLength  # no own limit upstream

# --- ResourceSlice -------------------------------------------------------------------------
DriverNameMaxLength: Final = 63
PoolNameMaxLength: Final = DNS1123SubdomainMaxLength
ResourceSliceMaxSharedCapacity: Final = 128  # legacy name, unused by v1 validation
ResourceSliceMaxDevices: Final = 128
# 64 devices when any device uses taints, consumes counters or has list-typed attributes.
ResourceSliceMaxDevicesWithAdvancedFeatures: Final = 64
# The pre-1.36 name of the same limit (taints or consumesCounters).
ResourceSliceMaxDevicesWithTaintsOrConsumesCounters: Final = (
    ResourceSliceMaxDevicesWithAdvancedFeatures
)
ResourceSliceMaxCounterSets: Final = 8
ResourceSliceMaxCountersPerCounterSet: Final = 32
ResourceSliceMaxDeviceCounterConsumptionsPerDevice: Final = 2
ResourceSliceMaxCountersPerDeviceCounterConsumption: Final = 32
# attributes + capacity entries of one device, combined.
ResourceSliceMaxAttributesAndCapacitiesPerDevice: Final = 32
# scalar and list attribute values of one device, combined (a list counts its elements).
ResourceSliceMaxAttributeValuesPerDevice: Final = 48
DeviceMaxDomainLength: Final = 63  # the <domain> of a qualified name <domain>/<id>
DeviceMaxIDLength: Final = 32  # the <id> (C identifier) of a qualified name
DeviceAttributeMaxValueLength: Final = 64  # string and version values (each list element too)
DeviceTaintsMaxLength: Final = 16
BindingConditionsMaxSize: Final = 4
BindingFailureConditionsMaxSize: Final = 4
CapacityRequestPolicyDiscreteMaxOptions: Final = 10  # requestPolicy.validValues entries
# 1.37: consumesCounters[].compatibilityGroups entries.
DeviceCompatibilityGroupsMaxSize: Final = 2

# --- ResourceClaim -------------------------------------------------------------------------
AllocationResultsMaxSize: Final = 32
DeviceRequestsMaxSize: Final = AllocationResultsMaxSize
DeviceConstraintsMaxSize: Final = 32
DeviceConfigMaxSize: Final = 32
DeviceSelectorsMaxSize: Final = 32
# 1.38: capacity.requests entries of a request or subrequest (1.36 and 1.37 take any number).
MaxCapacityRequirements: Final = 32
FirstAvailableDeviceRequestMaxSize: Final = 8
DeviceTolerationsMaxLength: Final = 16
# status.allocation.devices.config holds class and claim configs: twice DeviceConfigMaxSize.
AllocationConfigMaxSize: Final = 2 * DeviceConfigMaxSize
CELSelectorExpressionMaxCost: Final = 1_000_000
CELSelectorExpressionMaxLength: Final = 10 * 1024
# 1.37: derivedAttributes per request or subrequest, and their CEL's combined estimated cost in
# one claim (each expression also within CELSelectorExpressionMaxCost).
DeviceDerivedAttributesMaxSize: Final = 32
DeviceClaimDerivedAttributeCELMaxCost: Final = 1_000_000
OpaqueParametersMaxLength: Final = 10 * 1024
ResourceClaimReservedForMaxSize: Final = 256
AllocatedDeviceStatusMaxConditions: Final = 8
AllocatedDeviceStatusDataMaxLength: Final = 10 * 1024
NetworkDeviceDataMaxIPs: Final = 16
NetworkDeviceDataInterfaceNameMaxLength: Final = 256
NetworkDeviceDataHardwareAddressMaxLength: Final = 128

# --- DeviceTaintRule (v1beta2; v1 from 1.37) -------------------------------------------
DeviceTaintRuleStatusMaxConditions: Final = 8
