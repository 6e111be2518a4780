"""LocalStore: newer versions win, and derived state hears of every change."""

from __future__ import annotations

from typing import Any

from operators.controllers.common.stores import LocalStore


def _pod(name: str, version: str, node: str = "") -> dict[str, Any]:
    return {
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "ns", "resourceVersion": version},
        "spec": {"nodeName": node},
    }


def test_on_change_hears_accepted_events_only() -> None:
    changed: list[tuple[tuple[str, str], str | None]] = []
    store = LocalStore(
        "Pod",
        {"by_node": lambda b: {b["spec"]["nodeName"]: b["metadata"]["name"]}},
        on_change=lambda key, body: changed.append(
            (key, body["spec"]["nodeName"] if body else None)
        ),
    )
    assert store.apply("ADDED", _pod("a", "5", "n1"))
    assert not store.apply("MODIFIED", _pod("a", "4", "n2"))  # older: ignored, not announced
    assert store.apply("DELETED", _pod("a", "6", "n1"))
    assert changed == [(("ns", "a"), "n1"), (("ns", "a"), None)]
    assert "n1" not in store.indices["by_node"]
