"""Reserve's claim writes, decided without I/O: what each claim of an attempt becomes once the
pod's place is chosen (the scheduler writes these; ``simulate`` assumes them in memory)."""

from __future__ import annotations

import datetime
from collections.abc import Collection, Mapping, Sequence

from operators.api.claim_status import pod_consumer
from operators.api.core import Pod
from operators.api.groups import PodGroup, group_consumer, is_reserved_for_group
from operators.api.resource import (
    AllocationResult,
    ResourceClaim,
    ResourceClaimConsumerReference,
)
from operators.api.timestamps import format_time

#: (the claim as it is, as it will be written, its new allocation if any)
Reserved = tuple[ResourceClaim, ResourceClaim, AllocationResult | None]


def reserved_claims(
    pod: Pod,
    claims: Sequence[ResourceClaim],
    allocations: Mapping[str, AllocationResult],
    now: datetime.datetime,
    *,
    group: PodGroup | None = None,
    shared: Collection[str] = (),
) -> list[Reserved]:
    """New allocations (stamped ``now``) and the pod's entry in ``reservedFor``; claims already
    allocated and reserved for the pod are left alone. ``shared``: keys of the claims of
    ``group`` (the pod's PodGroup), reserved for it, once, instead of for the pod
    (DRAWorkloadResourceClaims)."""
    uid = pod.metadata.uid or ""
    stamp = format_time(now)
    out = []
    for claim in claims:
        allocation = allocations.get(claim.key)
        if group is not None and claim.key in shared:
            consumer = group_consumer(group)
            reserved = is_reserved_for_group(claim, group.metadata.name or "")
        else:
            consumer = pod_consumer(pod.metadata.name or "", uid)
            reserved = claim.is_reserved_for(uid)
        if allocation is None and reserved:
            continue
        # Copies that share what they do not change (a dump and a parse of the whole claim
        # were a twentieth of the scheduler's CPU per pod).
        written = (
            allocation.model_copy(update={"allocation_timestamp": stamp})
            if allocation is not None
            else None
        )
        entries = list(claim.status.reserved_for)
        if not reserved and all(r.uid != consumer["uid"] for r in entries):
            entries.append(ResourceClaimConsumerReference.load(consumer))
        changes: dict[str, object] = {"reserved_for": entries}
        if written is not None:
            changes["allocation"] = written
        status = claim.status.model_copy(update=changes)
        out.append((claim, claim.model_copy(update={"status": status}), written))
    return out
