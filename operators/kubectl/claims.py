"""``kubectl dra claims``: what each ResourceClaim got, who holds it, and what its drivers say.

Pure: the claims (and the pod) come in as the API server returned them; ``now`` is given.
The binding state is the scheduler's own reading (``scheduling.binding_conditions``).
"""

from __future__ import annotations

import datetime
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from operators.api.core import Pod
from operators.api.resource import DeviceRequestAllocationResult, ResourceClaim
from operators.api.timestamps import age
from operators.display import human, paint, short_age, table
from operators.scheduling.binding_conditions import (
    ConditionsState,
    allocated_node,
    binding_verdict,
    device_conditions,
)


def device_name(result: DeviceRequestAllocationResult) -> str:
    """``driver/pool/device``, with what a share consumes and whether it is admin access."""
    label = f"{result.driver}/{result.pool}/{result.device}"
    if result.consumed_capacity:
        label += (
            " ("
            + ", ".join(f"{k} {human(str(v))}" for k, v in sorted(result.consumed_capacity.items()))
            + ")"
        )
    if result.admin_access:
        label += " [admin]"
    return label


def state(claim: ResourceClaim) -> str:
    """As ``kubectl get resourceclaims`` prints it: pending, allocated, reserved, deleted."""
    parts = []
    if claim.is_deleting:
        parts.append("deleted")
    if claim.is_allocated:
        parts.append("allocated")
        if claim.status.reserved_for:
            parts.append("reserved")
    return ",".join(parts) or "pending"


def devices(claim: ResourceClaim) -> str:
    results = claim.allocated_results()
    return ", ".join(f"{r.request}: {device_name(r)}" for r in results) or "-"


def reserved_for(claim: ResourceClaim) -> str:
    refs = claim.status.reserved_for
    names = [f"{(r.resource or '').removesuffix('s') or 'object'}/{r.name}" for r in refs]
    return ", ".join(names) or "-"


def binding(claim: ResourceClaim, now: datetime.datetime) -> str:
    """The binding conditions' state (KEP-5007): ``-`` where no device has any."""
    allocation = claim.status.allocation
    elapsed = age(allocation.allocation_timestamp, now) if allocation is not None else None
    verdict = binding_verdict(claim, elapsed, float("inf"))
    if verdict.state is ConditionsState.NOT_NEEDED:
        return "-"
    if verdict.state is ConditionsState.READY:
        return "ready"
    return f"{verdict.state.value}: {verdict.message}" if verdict.message else verdict.state.value


def device_status(claim: ResourceClaim) -> str:
    """What drivers report per allocated device (``status.devices``): conditions, network."""
    shown = []
    for result in claim.allocated_results():
        conditions = device_conditions(claim, result)
        entry = next((s for s in claim.status.devices if s.device_id == result.device_id), None)
        parts = [f"{t}={'True' if v else 'False'}" for t, v in sorted(conditions.items())]
        if entry is not None and entry.network_data is not None:
            network = entry.network_data
            parts += [network.interface_name or "", *network.ips]
        if parts:
            shown.append(f"{result.device}: {' '.join(p for p in parts if p)}")
    return "; ".join(shown) or "-"


def claims_of(pod: Pod, claims: Iterable[ResourceClaim]) -> tuple[list[ResourceClaim], list[str]]:
    """The pod's claims that exist, and a line for each entry still without one."""
    by_name = {c.metadata.name: c for c in claims if c.metadata.namespace == pod.metadata.namespace}
    found: list[ResourceClaim] = []
    missing = []
    for entry in pod.spec.resource_claims:
        known, name = pod.claim_status(entry)
        claim = by_name.get(name) if name else None
        if claim is not None:
            found.append(claim)
        elif not known:
            missing.append(
                f"entry {entry.name}: no claim from template "
                f"{entry.resource_claim_template_name} yet (the claim-template controller makes it)"
            )
        elif name:
            missing.append(f"entry {entry.name}: claim {name} does not exist")
    extended = pod.status.extended_resource_claim_status
    if extended is not None and (special := by_name.get(extended.resource_claim_name)):
        found.append(special)
    return found, missing


def rows(
    claims: Sequence[ResourceClaim],
    now: datetime.datetime,
    *,
    wide: bool = False,
    namespaced: bool = False,
) -> list[list[str]]:
    """The table, header first; ``namespaced``: a NAMESPACE column (``-A``)."""
    head = ["NAME", "STATE", "DEVICES", "RESERVED FOR", "BINDING", "AGE"]
    if wide:
        head += ["NODE", "DEVICE STATUS"]
    out = [(["NAMESPACE"] if namespaced else []) + head]
    ordered = sorted(claims, key=lambda c: (c.metadata.namespace or "", c.metadata.name or ""))
    for claim in ordered:
        row = [
            claim.metadata.name or "",
            state(claim),
            devices(claim),
            reserved_for(claim),
            binding(claim, now),
            short_age(age(claim.metadata.creation_timestamp, now)),
        ]
        if wide:
            row += [allocated_node(claim) or "-", device_status(claim)]
        out.append(([claim.metadata.namespace or ""] if namespaced else []) + row)
    return out


def render(
    claims: Sequence[ResourceClaim],
    now: datetime.datetime,
    *,
    wide: bool = False,
    namespaced: bool = False,
    notes: Sequence[str] = (),
    empty: str = "No resources found.",
    colour: bool = False,
) -> str:
    """The table (``empty`` when there is no claim), then the notes."""
    lines = [empty]
    if claims:
        shown = rows(claims, now, wide=wide, namespaced=namespaced)
        lines = [line.rstrip() for line in table(shown, "")]
        lines[0] = paint(lines[0], "bold", colour)
    lines += [f"NOTE  {n}" for n in notes]
    return "\n".join(lines) + "\n"


def as_list(items: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The raw objects as one ``List``, as ``kubectl get -o yaml`` prints several."""
    return {"apiVersion": "v1", "kind": "List", "items": list(items), "metadata": {}}
