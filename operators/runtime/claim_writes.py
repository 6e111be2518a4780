"""The writes of the reservation cleanup's plan (``api.consumers``), shared by the scheduler.

Pure: built here, applied by whichever controller decided them (the cleanup, or the scheduler
freeing a preemption victim's claims and deleting its own special claims), so neither imports
the other.
"""

from __future__ import annotations

from operators.api.claim_status import edited_status
from operators.api.consumers import ClaimPlan
from operators.api.keys import ObjectKey
from operators.api.names import DELETE_PROTECTION_FINALIZER
from operators.api.resource import ResourceClaim
from operators.runtime.actions import Delete, Patch, ReplaceStatus


def status_write(claim: ResourceClaim, plan: ClaimPlan) -> ReplaceStatus:
    """The plan's status edit, at the claim's resourceVersion (a 409 on a stale cache)."""
    return ReplaceStatus(
        body=edited_status(
            claim,
            unreserve={r.consumer.uid or "" for r in plan.removals},
            deallocate=plan.deallocate,
        )
    )


def finalizer_removal(claim: ResourceClaim, resource_version: str) -> Patch:
    """The delete-protection finalizer off, at ``resource_version`` (after our status write)."""
    finalizers = [f for f in claim.metadata.finalizers if f != DELETE_PROTECTION_FINALIZER]
    return Patch(
        kind="ResourceClaim",
        key=ObjectKey(claim.metadata.namespace or "", claim.metadata.name or ""),
        patch={"metadata": {"finalizers": finalizers}},
        resource_version=resource_version,
    )


def deletion(claim: ResourceClaim) -> Delete:
    """A generated claim goes after its pod: this claim only (its uid)."""
    return Delete(
        kind="ResourceClaim",
        key=ObjectKey(claim.metadata.namespace or "", claim.metadata.name or ""),
        uid=claim.metadata.uid or "",
    )
