"""The driver's NVML source on this machine's GPU, without a cluster (hack/gpu/check.sh runs it).

Prints the ResourceSlice the driver would publish and checks it: valid for the API, equal to
what nvidia-smi says, allocatable for a claim naming the product and compute capability; writes
the CDI spec, checks its nodes and libraries exist, and reads the device's UUID through the
spec's libnvidia-ml in a process that sees nothing else. ``--fake DIR`` runs the same against a
fixture's fake NVML (steps that need the real machine say SKIP).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET
from collections.abc import Callable
from pathlib import Path

import yaml

from operators.allocator import AllocatedState, Allocator, Features, Status
from operators.allocator.selectors import CelSelectorEngine
from operators.api.core import Node
from operators.api.resource import DeviceClass, ResourceClaim
from operators.api.validation import validate_resource_slice
from operators.driver import cdi, nvidia
from operators.driver.slices import NodeRef, plan_slices
from operators.driver.sources import NvmlBackend, NvmlSource

DRIVER = "gpu.example.kopf-dra.io"
NODE = "gpu-check"
#: Runs with only the CDI spec's environment: loads its libnvidia-ml and asks for the UUID.
PROBE = """
import ctypes, sys
nvml = ctypes.CDLL(sys.argv[1])
assert nvml.nvmlInit_v2() == 0, "nvmlInit failed"
handle = ctypes.c_void_p()
assert nvml.nvmlDeviceGetHandleByUUID(sys.argv[2].encode(), ctypes.byref(handle)) == 0
buf = ctypes.create_string_buffer(96)
assert nvml.nvmlDeviceGetUUID(handle, buf, 96) == 0
print(buf.value.decode())
"""

Smi = tuple[str, str, int, str]  # name, UUID, memory MiB, MIG mode


class Checks:
    def __init__(self) -> None:
        self.failed = 0

    def __call__(self, name: str, ok: bool | None, detail: str = "") -> None:
        word = "SKIP" if ok is None else "PASS" if ok else "FAIL"
        self.failed += ok is False
        print(f"{word}: {name}{' - ' + detail if detail else ''}", flush=True)


def smi_real() -> Smi:
    out = subprocess.run(
        [
            "nvidia-smi",
            "--query-gpu=name,uuid,memory.total,mig.mode.current",
            "--format=csv,noheader,nounits",
            "--id=0",
        ],
        capture_output=True,
        text=True,
        check=True,
        timeout=30,
    ).stdout
    name, uuid, memory, mig = (p.strip() for p in out.strip().split(","))
    return name, uuid, int(memory), mig


def smi_fixture(directory: Path) -> Callable[[], Smi]:
    def read() -> Smi:
        gpu = ET.parse(directory / "nvidia-smi-q.xml").getroot().find("gpu")
        assert gpu is not None
        memory = (gpu.findtext("fb_memory_usage/total") or "0").split()[0]
        mig = gpu.findtext("mig_mode/current_mig") or ""
        return gpu.findtext("product_name") or "", gpu.findtext("uuid") or "", int(memory), mig

    return read


def run(backend: NvmlBackend, smi: Callable[[], Smi], *, real: bool, out: Path) -> int:
    check = Checks()
    source = NvmlSource(backend)
    inventory = source.inventory(NODE)
    published = plan_slices(DRIVER, NodeRef(NODE, "uid"), NODE, inventory, 1)
    for s in published:
        print(yaml.safe_dump(s.dump(), sort_keys=False), "---", sep="", flush=True)
        problems = validate_resource_slice(s)
        check(f"ResourceSlice {s.metadata.name} is valid", not problems, "; ".join(problems))
    device = inventory.devices[0]
    attrs = {k: v.typed_value() for k, v in device.attributes.items()}
    name, uuid, memory_mib, mig_mode = smi()
    d = nvidia.DOMAIN
    check("productName = nvidia-smi name", attrs[f"{d}/productName"] == name, name)
    gpu_uuid = attrs.get(f"{d}/uuid") if device.name == "gpu-0" else attrs.get(f"{d}/parentUUID")
    check("uuid = nvidia-smi UUID", gpu_uuid == uuid, uuid)
    mig_on = mig_mode.lower() == "enabled"
    check("migEnabled = nvidia-smi MIG mode", attrs[f"{d}/migEnabled"] is mig_on, mig_mode)
    if device.name == "gpu-0":
        total = device.capacity["memory"].value
        mib = int(total.as_int()) // 2**20 if total is not None else -1
        check("memory = nvidia-smi memory.total", mib == memory_mib, f"{mib} MiB")
    cc = attrs[f"{d}/cudaComputeCapability"]
    selector = (
        f"device.attributes['{d}'].productName == '{attrs[f'{d}/productName']}' && "
        f"device.attributes['{d}'].cudaComputeCapability.compareTo(semver('{cc}')) == 0"
    )
    klass = DeviceClass.load(
        {
            "metadata": {"name": "gpu"},
            "spec": {"selectors": [{"cel": {"expression": f"device.driver == '{DRIVER}'"}}]},
        }
    )
    request = {"name": "gpu", "exactly": {"deviceClassName": "gpu"}}
    request["exactly"]["selectors"] = [{"cel": {"expression": selector}}]  # type: ignore[index]
    claim = ResourceClaim.load(
        {"metadata": {"name": "c", "namespace": "n"}, "spec": {"devices": {"requests": [request]}}}
    )
    allocator = Allocator(
        Features.all(),
        AllocatedState(),
        [klass],
        published,
        CelSelectorEngine(),
        share_ids=lambda: "s",
    )
    node = Node.load({"metadata": {"name": NODE}})
    outcome = allocator.allocate(node, [claim])
    got = [r.device for r in outcome.results[0].devices.results] if outcome.results else []
    check(
        "the allocator allocates it for a product + compute capability selector",
        outcome.status == Status.SUCCESS and got == [device.name],
        f"{selector} -> {got}",
    )
    edits = inventory.edits[device.name or ""]
    entry = cdi.device_entry(
        "c-" + (device.name or ""),
        dict(edits.env),
        [{"path": n, "hostPath": n} for n in edits.device_nodes],
        edits.mounts,
    )
    spec_path = cdi.CDIWriter(out, DRIVER).write("check", cdi.build_spec(DRIVER, [entry]))
    print(f"CDI spec: {spec_path}\n{spec_path.read_text()}", flush=True)
    paths = [*edits.device_nodes, *edits.mounts]
    missing = [p for p in paths if not os.path.exists(p)]
    check(
        f"the CDI spec's {len(paths)} device nodes and libraries exist",
        not missing if real else None,
        "fake NVML" if not real else ", ".join(missing),
    )
    nvml_lib = next((m for m in edits.mounts if m.endswith("libnvidia-ml.so.1")), None)
    check("the CDI spec mounts libnvidia-ml.so.1", nvml_lib is not None)
    if real and nvml_lib is not None:
        env = {**edits.env, "PATH": "/usr/bin:/bin"}
        probe = subprocess.run(
            [sys.executable, "-I", "-c", PROBE, nvml_lib, edits.env["NVIDIA_VISIBLE_DEVICES"]],
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        seen = probe.stdout.strip()
        check(
            "NVML through the spec's library alone reads the device's UUID",
            probe.returncode == 0 and seen == edits.env["NVIDIA_VISIBLE_DEVICES"],
            seen or probe.stderr.strip()[-300:],
        )
    else:
        check(
            "NVML through the spec's library alone reads the device's UUID",
            None,
            "fake NVML",
        )
    print(json.dumps({"failed": check.failed}), flush=True)
    return 1 if check.failed else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--fake", type=Path, help="a fixture directory: use the fake NVML")
    parser.add_argument("--driver-root", default=os.environ.get("DRIVER_ROOT"))
    parser.add_argument("--out", type=Path, default=None, help="where the CDI spec goes")
    args = parser.parse_args(argv)
    out = args.out or Path(tempfile.mkdtemp(prefix="kopf-dra-gpu-"))
    if args.fake:
        from operators.driver.nvml_fixture import FixtureNvml

        return run(FixtureNvml(args.fake), smi_fixture(args.fake), real=False, out=out)
    from operators.driver.nvml import PynvmlBackend

    return run(PynvmlBackend(args.driver_root), smi_real, real=True, out=out)


if __name__ == "__main__":
    sys.exit(main())
