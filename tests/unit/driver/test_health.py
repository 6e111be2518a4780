"""Simulated health: which devices a setting marks, the report, and the taints."""

from __future__ import annotations

from operators.driver.health import (
    TAINT_EFFECT,
    health_report,
    taint_key,
    unhealthy_devices,
    with_taints,
)
from operators.driver.profiles import build_inventory, default_config

DRIVER = "example.kopf-dra.io"


def test_a_gpu_marked_unhealthy_takes_its_partitions_with_it() -> None:
    inventory = build_inventory(default_config(), "node-a")
    marked = unhealthy_devices(inventory, {"gpu-0"})
    assert "gpu-0" in marked
    assert "gpu-0-mig-1g-5gb-0" in marked
    assert not any(name.startswith("gpu-1") for name in marked)
    assert unhealthy_devices(inventory, {"no-such-device"}) == frozenset()


def test_report_names_every_published_device_in_order() -> None:
    inventory = build_inventory(default_config(), "node-a")
    report = health_report(inventory, "pool-a", {"gpu-1"})
    assert [h.device for h in report] == [d.name for d in inventory.devices]
    assert {h.device for h in report if not h.healthy} == {"gpu-1"}
    assert all(h.pool == "pool-a" for h in report)
    assert all(h.message == "" for h in report if h.healthy)


def test_taints_only_the_unhealthy_devices_and_keep_their_time() -> None:
    inventory = build_inventory(default_config(), "node-a")
    since = {"gpu-1": "2026-01-01T00:00:00Z"}
    tainted = with_taints(inventory, DRIVER, since)
    by_name = {d.name: d for d in tainted.devices}
    (taint,) = by_name["gpu-1"].taints
    assert (taint.key, taint.effect, taint.time_added) == (
        taint_key(DRIVER),
        TAINT_EFFECT,
        "2026-01-01T00:00:00Z",
    )
    assert all(not d.taints for n, d in by_name.items() if n != "gpu-1")
    assert not any(d.taints for d in inventory.devices), "the input is left alone"
    assert with_taints(tainted, DRIVER, since) == tainted, "idempotent"
    assert with_taints(inventory, DRIVER, {}) is inventory
