"""Node selection of slices and devices, with Kubernetes' node-affinity semantics.

Terms are ORed, requirements within a term ANDed, an empty term matches nothing; matchFields
knows only ``metadata.name``. Malformed selectors raise, as upstream's parser does.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from operators.allocator.errors import InvalidNodeSelectorError
from operators.api.core import Node, NodeSelector, NodeSelectorRequirement


def _parse_int(text: str) -> int | None:
    try:
        return int(text)
    except ValueError:
        return None


def _expression_matches(req: NodeSelectorRequirement, labels: Mapping[str, str]) -> bool:
    op, values, key = req.operator, list(req.values), req.key or ""
    if op in ("In", "NotIn"):
        if not values:
            raise InvalidNodeSelectorError(f"{op} requirement on {req.key!r} needs values")
        inside = key in labels and labels[key] in values
        return inside if op == "In" else not inside
    if op in ("Exists", "DoesNotExist"):
        if values:
            raise InvalidNodeSelectorError(f"{op} requirement on {req.key!r} takes no values")
        return (key in labels) == (op == "Exists")
    if op in ("Gt", "Lt"):
        bound = _parse_int(values[0]) if len(values) == 1 else None
        if bound is None:
            raise InvalidNodeSelectorError(f"{op} requirement on {req.key!r} needs one integer")
        if key not in labels:
            return False
        have = _parse_int(labels[key])
        if have is None:
            return False
        return have > bound if op == "Gt" else have < bound
    raise InvalidNodeSelectorError(f"unknown operator {op!r} in requirement on {req.key!r}")


def _field_matches(req: NodeSelectorRequirement, name: str) -> bool:
    if req.operator not in ("In", "NotIn") or len(req.values) != 1:
        raise InvalidNodeSelectorError(
            f"field requirement on {req.key!r}: only In/NotIn with exactly one value"
        )
    inside = req.key == "metadata.name" and req.values[0] == name
    return inside if req.operator == "In" else not inside


def selector_matches(selector: NodeSelector, node: Node | None) -> bool:
    """Whether ``node`` satisfies ``selector`` (a ``None`` node matches nothing)."""
    if node is None:
        return False
    labels = node.metadata.labels
    name = node.metadata.name or ""
    for term in selector.node_selector_terms:
        exprs: Sequence[NodeSelectorRequirement] = term.match_expressions
        fields: Sequence[NodeSelectorRequirement] = term.match_fields
        if not exprs and not fields:
            continue
        if all(_expression_matches(r, labels) for r in exprs) and all(
            _field_matches(r, name) for r in fields
        ):
            return True
    return False


def node_matches(
    node: Node | None, node_name: str | None, all_nodes: bool | None, selector: NodeSelector | None
) -> bool:
    """Upstream's NodeMatches: nodeName, else allNodes, else a selector; nothing set is False."""
    if node_name:
        return node is not None and node.metadata.name == node_name
    if all_nodes:
        return True
    if selector is not None:
        return selector_matches(selector, node)
    return False
