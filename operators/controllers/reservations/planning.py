"""What the reservation cleanup decides of its own: which claim events need a reconcile.

The cleanup's rules (kube-controller-manager's resourceclaim controller) are
``operators.api.consumers`` and their writes ``operators.runtime.claim_writes``: the scheduler
frees a preemption victim's claims by the same rules, and neither controller imports the other.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from operators.api.consumers import ClaimFacts


def claim_signature(body: Mapping[str, Any] | None) -> tuple[Any, ...] | None:
    """What ``plan_claim`` reads of a claim (its pods aside): an event that leaves it alone
    (the scheduler's finalizer on a claim not being deleted, device statuses) brings no
    reconcile."""
    if body is None:
        return None
    f = ClaimFacts.of(body)
    # The finalizer matters only to a claim being deleted.
    return (f.uid, f.consumers, f.allocated, f.deleting, f.protected and f.deleting, f.owner)
