"""Simulated health: which devices a setting marks, the report, and the taints."""

from __future__ import annotations

from google.protobuf.descriptor import FieldDescriptor, FileDescriptor

from operators.driver.health import (
    TAINT_EFFECT,
    health_report,
    taint_key,
    unhealthy_devices,
    with_taints,
)
from operators.driver.profiles import build_inventory, default_config
from operators.driver.proto import dra_health_v1_pb2, dra_health_v1alpha1_pb2

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


def _shape(file: FileDescriptor) -> tuple[object, ...]:
    """Everything of a health API but its package: messages, fields, enums and the service."""

    def of(f: FieldDescriptor) -> str:
        kind = f.message_type or f.enum_type
        return kind.name if kind is not None else str(f.type)

    messages = {
        name: [(f.name, f.number, of(f), f.is_repeated) for f in m.fields]
        for name, m in file.message_types_by_name.items()
    }
    enums = {
        name: [(v.name, v.number) for v in e.values] for name, e in file.enum_types_by_name.items()
    }
    services = {
        name: [
            (m.name, m.input_type.name, m.output_type.name, m.server_streaming) for m in s.methods
        ]
        for name, s in file.services_by_name.items()
    }
    return messages, enums, services


def test_the_health_apis_v1_and_v1alpha1_differ_only_in_their_package() -> None:
    """One implementation serves both (plugin.health_handler): it holds while the shapes match."""
    v1, v1alpha1 = dra_health_v1_pb2.DESCRIPTOR, dra_health_v1alpha1_pb2.DESCRIPTOR
    assert (v1.package, v1alpha1.package) == ("v1", "v1alpha1")
    assert _shape(v1) == _shape(v1alpha1)
    assert _shape(v1)[0], "the comparison saw the messages"
