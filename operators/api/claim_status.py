"""The edits of a ResourceClaim's status that the scheduler and the reservation cleanup share.

One function, so reserve, release, deallocate and the cleanup's removals agree on the rules:
clearing the allocation clears ``status.devices`` too (the API rejects device statuses of
devices no longer allocated), and an empty ``reservedFor`` is omitted, not written as ``[]``.
The result is the claim's JSON for a PUT with the resourceVersion it was computed from.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any

from operators.api.resource import ResourceClaim


def pod_consumer(name: str, uid: str) -> dict[str, str]:
    """A ``reservedFor`` entry for a pod."""
    return {"resource": "pods", "name": name, "uid": uid}


def edited_status(
    claim: ResourceClaim,
    *,
    allocation: Mapping[str, Any] | None = None,
    reserve: Mapping[str, Any] | None = None,
    unreserve: Collection[str] = (),
    deallocate: bool = False,
) -> dict[str, Any]:
    """``claim`` with a new allocation, a consumer added, consumers (by uid) removed, or the
    allocation cleared, applied in that order."""
    body = claim.dump()
    status = dict(body.get("status") or {})
    if allocation is not None:
        status["allocation"] = dict(allocation)
    entries = [r for r in status.get("reservedFor") or [] if r.get("uid") not in unreserve]
    if reserve is not None and all(r.get("uid") != reserve.get("uid") for r in entries):
        entries.append(dict(reserve))
    if entries:
        status["reservedFor"] = entries
    else:
        status.pop("reservedFor", None)
    if deallocate:
        status.pop("allocation", None)
        status.pop("devices", None)
    body["status"] = status
    return body
