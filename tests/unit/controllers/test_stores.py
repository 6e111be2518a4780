"""LocalStore: newer versions win, and derived state hears of every change."""

from __future__ import annotations

from typing import Any

from operators.runtime.indices import IndexView
from operators.runtime.stores import LocalStore


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


def test_one_reads_the_last_value_from_local_and_kopf_shaped_indices() -> None:
    store = LocalStore("Pod", {"by_node": lambda b: {b["spec"]["nodeName"]: b["metadata"]["name"]}})
    store.apply("ADDED", _pod("a", "1", "n1"))
    store.apply("ADDED", _pod("b", "1", "n1"))
    view = IndexView()
    view.add("by_node", store.indices["by_node"])
    view.add("plain", {"n1": ["a", "b"]})  # what kopf's indices look like to IndexView
    assert view.one("by_node", "n1") == "b" == view.one("plain", "n1")
    assert view.one("by_node", "n2") is None
    assert view.one("plain", "n2") is None
