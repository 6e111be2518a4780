"""From a successful search to one AllocationResult per claim: devices, configs, node selector.

Same order and content as upstream's result building in ``Allocate``: device results in the
order the search chose them, class configs then claim configs, and the node selector that the
chosen devices' slices (or the devices themselves) require.
"""

from __future__ import annotations

from collections.abc import Sequence

from operators.allocator.errors import InvalidNodeSelectorError
from operators.allocator.search import Search
from operators.api.core import NodeSelector, NodeSelectorRequirement, NodeSelectorTerm
from operators.api.resource import (
    ALLOCATION_CONFIG_SOURCE_CLAIM,
    ALLOCATION_CONFIG_SOURCE_CLASS,
    AllocationResult,
    DeviceAllocationConfiguration,
    DeviceAllocationResult,
    DeviceRequestAllocationResult,
)


def allocation_result(search: Search, ci: int) -> AllocationResult:
    """The AllocationResult of claim ``ci`` from a successful search."""
    items: list[DeviceRequestAllocationResult] = []
    for res in search.results[ci]:
        r, dev = res.req, res.dev
        kwargs: dict[str, object] = {
            "request": r.full_name,
            "driver": dev.id.driver,
            "pool": dev.id.pool,
            "device": dev.id.device,
        }
        if r.admin:
            kwargs["admin_access"] = True
        if r.tolerations:
            kwargs["tolerations"] = [t.model_copy(deep=True) for t in r.tolerations]
        if search.f.binding_and_status:
            if dev.device.binding_conditions:
                kwargs["binding_conditions"] = list(dev.device.binding_conditions)
            if dev.device.binding_failure_conditions:
                kwargs["binding_failure_conditions"] = list(dev.device.binding_failure_conditions)
        if res.share_id is not None:
            kwargs["share_id"] = res.share_id
        if res.consumed:
            kwargs["consumed_capacity"] = dict(res.consumed)
        items.append(DeviceRequestAllocationResult(**kwargs))
    configs = _configs(search, ci)
    devices = (
        DeviceAllocationResult(results=items, config=configs)
        if configs
        else DeviceAllocationResult(results=items)
    )
    selector = _node_selector(search, ci)
    if selector is None:
        return AllocationResult(devices=devices)
    return AllocationResult(devices=devices, node_selector=selector)


def _configs(search: Search, ci: int) -> list[DeviceAllocationConfiguration]:
    claim = search.claims[ci]
    out: list[DeviceAllocationConfiguration] = []
    by_class: dict[str, tuple[int, int]] = {}
    for slot in search.slots[ci]:
        r = slot.alternatives[slot.selected]
        class_name = r.device_class.metadata.name or ""
        span = by_class.get(class_name)
        if span is not None:
            for i in range(*span):
                out[i].requests.append(r.full_name)
            continue
        first = len(out)
        for cfg in r.device_class.spec.config:
            out.append(
                DeviceAllocationConfiguration(
                    source=ALLOCATION_CONFIG_SOURCE_CLASS,
                    requests=[r.full_name],
                    opaque=cfg.opaque.model_copy(deep=True) if cfg.opaque else None,
                )
            )
        by_class[class_name] = (first, len(out))
    for claim_cfg in claim.spec.devices.config:
        opaque = claim_cfg.opaque
        names = claim_cfg.requests
        if not names:
            out.append(_claim_config(names, opaque))
            continue
        for ri, request in enumerate(claim.spec.devices.requests):
            if request.name in names:
                out.append(_claim_config(names, opaque))
                continue
            slot = search.slots[ci][ri]
            if not slot.has_sub:
                continue
            chosen = slot.alternatives[slot.selected]
            if chosen.full_name in names:
                out.append(_claim_config(names, opaque))
    return out


def _node_selector(search: Search, ci: int) -> NodeSelector | None:
    fields: list[NodeSelectorRequirement] = []
    exprs: list[NodeSelectorRequirement] = []
    for res in search.results[ci]:
        dev = res.dev
        spec = dev.slice.spec
        if dev.per_device:
            name, selector = dev.device.node_name, dev.device.node_selector
        else:
            name, selector = spec.node_name, spec.node_selector
        if name is not None or dev.device.binds_to_node:
            term = NodeSelectorTerm(
                match_fields=[
                    NodeSelectorRequirement(
                        key="metadata.name",
                        operator="In",
                        values=[search.node.metadata.name or ""],
                    )
                ]
            )
            return NodeSelector(node_selector_terms=[term])
        if selector is None or not selector.node_selector_terms:
            continue
        if len(selector.node_selector_terms) > 1:
            raise InvalidNodeSelectorError(
                f"create NodeSelector for claim {search.claims[ci].metadata.name}: unsupported "
                f"ResourceSlice.NodeSelector with {len(selector.node_selector_terms)} terms"
            )
        term0 = selector.node_selector_terms[0]
        _merge(term0.match_fields, fields)
        _merge(term0.match_expressions, exprs)
    if not fields and not exprs:
        return None
    term_kwargs: dict[str, object] = {}
    if exprs:
        term_kwargs["match_expressions"] = exprs
    if fields:
        term_kwargs["match_fields"] = fields
    return NodeSelector(node_selector_terms=[NodeSelectorTerm(**term_kwargs)])


def _claim_config(requests: list[str], opaque: object) -> DeviceAllocationConfiguration:
    from operators.api.resource import OpaqueDeviceConfiguration

    kwargs: dict[str, object] = {"source": ALLOCATION_CONFIG_SOURCE_CLAIM}
    if requests:
        kwargs["requests"] = list(requests)
    if isinstance(opaque, OpaqueDeviceConfiguration):
        kwargs["opaque"] = opaque.model_copy(deep=True)
    return DeviceAllocationConfiguration(**kwargs)


def _merge(src: Sequence[NodeSelectorRequirement], dst: list[NodeSelectorRequirement]) -> None:
    for req in src:
        values = set(req.values)
        if not any(
            have.key == req.key and have.operator == req.operator and set(have.values) == values
            for have in dst
        ):
            dst.append(req.model_copy(deep=True))


__all__ = ["allocation_result"]
