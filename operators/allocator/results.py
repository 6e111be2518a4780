"""From a successful search to one AllocationResult per claim: devices, configs, node selector.

Same order and content as upstream's result building in ``Allocate``: device results in the
order the search chose them, class configs then claim configs, and the node selector that the
chosen devices' slices (or the devices themselves) require. 1.36 adds a claim config once per
request it names; 1.37 adds it once, and leaves out the ``requests`` of any config that names
every request of the claim (empty means all).
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
    OpaqueDeviceConfiguration,
)


def allocation_result(search: Search, claim_index: int) -> AllocationResult:
    """The AllocationResult of one claim of a successful search."""
    items: list[DeviceRequestAllocationResult] = []
    for choice in search.choices[claim_index]:
        request, candidate = choice.request, choice.candidate
        device = candidate.device
        kwargs: dict[str, object] = {
            "request": request.full_name,
            "driver": candidate.id.driver,
            "pool": candidate.id.pool,
            "device": candidate.id.device,
        }
        if request.admin_access:
            kwargs["admin_access"] = True
        if request.tolerations:
            kwargs["tolerations"] = [t.model_copy(deep=True) for t in request.tolerations]
        if search.features.binding_and_status:
            if device.binding_conditions:
                kwargs["binding_conditions"] = list(device.binding_conditions)
            if device.binding_failure_conditions:
                kwargs["binding_failure_conditions"] = list(device.binding_failure_conditions)
        if choice.share_id is not None:
            kwargs["share_id"] = choice.share_id
        if choice.consumed:
            kwargs["consumed_capacity"] = dict(choice.consumed)
        skips = candidate.slice.spec.skip_node_operations
        if skips and search.features.since_1_37:  # only allocated with DRAOptionalNodeOperations
            kwargs["skip_node_operations"] = list(skips)
        items.append(DeviceRequestAllocationResult(**kwargs))
    configs = _configs(search, claim_index)
    devices = (
        DeviceAllocationResult(results=items, config=configs)
        if configs
        else DeviceAllocationResult(results=items)
    )
    selector = _node_selector(search, claim_index)
    if selector is None:
        return AllocationResult(devices=devices)
    return AllocationResult(devices=devices, node_selector=selector)


def _configs(search: Search, claim_index: int) -> list[DeviceAllocationConfiguration]:
    """Class configs first (one entry per class config, listing every request of that class),
    then the claim's configs for the requests or chosen subrequests they name: drivers apply
    them in this order, so a claim's config overrides its class's."""
    claim = search.claims[claim_index]
    out: list[DeviceAllocationConfiguration] = []
    by_class: dict[str, tuple[int, int]] = {}
    for alternatives in search.requests[claim_index]:
        request = alternatives.chosen
        class_name = request.device_class.metadata.name or ""
        span = by_class.get(class_name)
        if span is not None:
            for i in range(*span):
                out[i].requests.append(request.full_name)
            continue
        first = len(out)
        for cfg in request.device_class.spec.config:
            out.append(
                DeviceAllocationConfiguration(
                    source=ALLOCATION_CONFIG_SOURCE_CLASS,
                    requests=[request.full_name],
                    opaque=cfg.opaque.model_copy(deep=True) if cfg.opaque else None,
                )
            )
        by_class[class_name] = (first, len(out))
    once = search.features.since_1_37
    for claim_cfg in claim.spec.devices.config:
        opaque = claim_cfg.opaque
        names = claim_cfg.requests
        if not names:
            out.append(_claim_config(names, opaque))
            continue
        for request_index, claim_request in enumerate(claim.spec.devices.requests):
            if claim_request.name in names or _chosen_named(
                search, claim_index, request_index, names
            ):
                out.append(_claim_config(names, opaque))
                if once:
                    break
    if once:
        for at, config in enumerate(out):
            if config.requests and all(
                r.name in config.requests or _chosen_named(search, claim_index, i, config.requests)
                for i, r in enumerate(claim.spec.devices.requests)
            ):
                out[at] = DeviceAllocationConfiguration(source=config.source, opaque=config.opaque)
    return out


def _chosen_named(search: Search, claim_index: int, request_index: int, names: list[str]) -> bool:
    """Whether ``names`` lists the subrequest chosen for a request with firstAvailable."""
    alternatives = search.requests[claim_index][request_index]
    return alternatives.first_available and alternatives.chosen.full_name in names


def _node_selector(search: Search, claim_index: int) -> NodeSelector | None:
    """Upstream's createNodeSelector: where the claim's devices can be used. A device bound to
    one node pins the claim to this node; otherwise the slices' (or devices') selectors merge
    into one term, and no selector means any node."""
    fields: list[NodeSelectorRequirement] = []
    exprs: list[NodeSelectorRequirement] = []
    for choice in search.choices[claim_index]:
        candidate = choice.candidate
        device = candidate.device
        spec = candidate.slice.spec
        if candidate.per_device_node_selection:
            name, selector = device.node_name, device.node_selector
        else:
            name, selector = spec.node_name, spec.node_selector
        if name is not None or device.binds_to_node:
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
                f"create NodeSelector for claim {search.claims[claim_index].metadata.name}: "
                "unsupported ResourceSlice.NodeSelector with "
                f"{len(selector.node_selector_terms)} terms"
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
    kwargs: dict[str, object] = {"source": ALLOCATION_CONFIG_SOURCE_CLAIM}
    if requests:
        kwargs["requests"] = list(requests)
    if isinstance(opaque, OpaqueDeviceConfiguration):
        kwargs["opaque"] = opaque.model_copy(deep=True)
    return DeviceAllocationConfiguration(**kwargs)


def _merge(src: Sequence[NodeSelectorRequirement], dst: list[NodeSelectorRequirement]) -> None:
    """Add the requirements not there yet (same key, operator and set of values)."""
    for req in src:
        values = set(req.values)
        if not any(
            have.key == req.key and have.operator == req.operator and set(have.values) == values
            for have in dst
        ):
            dst.append(req.model_copy(deep=True))


__all__ = ["allocation_result"]
