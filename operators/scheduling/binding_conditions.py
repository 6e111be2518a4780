"""Binding conditions (KEP-5007): may a pod whose claim is allocated be bound yet?

Every allocated device with ``bindingConditions`` must report each of them True in the claim's
``status.devices``; any ``bindingFailureConditions`` True, or the binding timeout counted from
the allocation's ``allocationTimestamp``, means the allocation must be undone.
"""

from __future__ import annotations

import dataclasses
import enum

from operators.api.resource import DeviceRequestAllocationResult, ResourceClaim


class ConditionsState(enum.Enum):
    NOT_NEEDED = "not-needed"  # no device has binding conditions
    PENDING = "pending"
    READY = "ready"
    FAILED = "failed"
    TIMED_OUT = "timed-out"


@dataclasses.dataclass(frozen=True)
class BindingVerdict:
    state: ConditionsState
    message: str = ""
    remaining: float | None = None  # seconds until the timeout, while pending


def device_conditions(
    claim: ResourceClaim, result: DeviceRequestAllocationResult
) -> dict[str, bool]:
    """Condition type -> is True, from the claim's ``status.devices`` entry for the result."""
    for status in claim.status.devices:
        if status.device_id == result.device_id and (
            result.share_id is None or status.share_id == result.share_id
        ):
            return {c.type or "": c.status == "True" for c in status.conditions}
    return {}


def binding_verdict(claim: ResourceClaim, elapsed: float | None, timeout: float) -> BindingVerdict:
    """The state of ``claim``'s binding conditions; ``elapsed`` is the allocation's age in s."""
    pending: list[str] = []
    needed = False
    for result in claim.allocated_results():
        if not result.binding_conditions:
            continue
        needed = True
        conditions = device_conditions(claim, result)
        failed = [c for c in result.binding_failure_conditions if conditions.get(c)]
        if failed:
            return BindingVerdict(
                ConditionsState.FAILED,
                f"claim {claim.key}: device {result.device_id} reports {', '.join(failed)}",
            )
        pending.extend(
            f"{result.device_id} {c}" for c in result.binding_conditions if not conditions.get(c)
        )
    if not needed:
        return BindingVerdict(ConditionsState.NOT_NEEDED)
    if not pending:
        return BindingVerdict(ConditionsState.READY)
    if elapsed is not None and elapsed >= timeout:
        return BindingVerdict(
            ConditionsState.TIMED_OUT,
            f"claim {claim.key}: binding conditions not met within {timeout:g}s: "
            + ", ".join(pending),
        )
    remaining = None if elapsed is None else max(0.0, timeout - elapsed)
    return BindingVerdict(ConditionsState.PENDING, "waiting for " + ", ".join(pending), remaining)


def allocated_node(claim: ResourceClaim) -> str | None:
    """The node an allocation is pinned to (``metadata.name In [node]``), if it is."""
    allocation = claim.status.allocation
    selector = allocation.node_selector if allocation is not None else None
    if selector is None:
        return None
    for term in selector.node_selector_terms:
        for field in term.match_fields:
            if field.key == "metadata.name" and field.operator == "In" and len(field.values) == 1:
                return field.values[0]
    return None
