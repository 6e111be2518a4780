"""One tenant against another, on the real local control plane (``make bench-tenants``).

Prints, for a scheduler process on 2 nodes x 8 devices:

- how long a plain pod of tenant B takes from creation to binding, alone and right after
  tenant A created three claims with expensive selectors (each its own constant, so no cache
  helps), and whether the scheduler kept its Lease meanwhile;
- the scheduler's memory (RSS) before and after 5000 claims with unique selectors.

Figures are printed, never asserted: the integration test
``test_a_tenants_expensive_selectors_do_not_stall_another_tenants_pod`` checks the behaviour.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.bench_scheduler import DRIVER, setup
from operators.kube.api import KubeAPI
from operators.kube.client import make_api_client
from operators.localcluster import controlplane

LEASE = ("kube-system", "kopf-dra-scheduler")
ROUNDS = 3


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def hostile_selector(constant: int) -> str:
    numbers = ", ".join(str(i) for i in range(300))
    return f"[{numbers}].exists(x, [{numbers}].exists(y, x * y == -{constant}))"


async def namespace(kube: KubeAPI, name: str) -> None:
    for body in (
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}},
        {
            "apiVersion": "v1",
            "kind": "ServiceAccount",
            "metadata": {"name": "default", "namespace": name},
        },
    ):
        with contextlib.suppress(Exception):
            await kube.create(body)


async def claim_and_pod(kube: KubeAPI, ns: str, name: str, selector: str | None) -> None:
    request: dict[str, Any] = {"deviceClassName": DRIVER}
    if selector is not None:
        request["selectors"] = [{"cel": {"expression": selector}}]
    await kube.create(
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaim",
            "metadata": {"name": name, "namespace": ns},
            "spec": {"devices": {"requests": [{"name": "gpu", "exactly": request}]}},
        }
    )
    await kube.create(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name, "namespace": ns},
            "spec": {
                "schedulerName": "kopf-dra",
                "containers": [{"name": "c", "image": "pause"}],
                "resourceClaims": [{"name": "gpu", "resourceClaimName": name}],
            },
        }
    )


async def bound_after(kube: KubeAPI, ns: str, name: str, created: float) -> float:
    while True:
        pod = await kube.get("Pod", name, ns)
        if pod["spec"].get("nodeName"):
            return time.monotonic() - created
        await asyncio.sleep(0.02)


async def plain_pod(kube: KubeAPI, name: str) -> float:
    created = time.monotonic()
    await claim_and_pod(kube, "tenant-b", name, None)
    return await asyncio.wait_for(bound_after(kube, "tenant-b", name, created), 120)


async def lease(kube: KubeAPI) -> tuple[str, int]:
    spec = (await kube.get("Lease", LEASE[1], LEASE[0]))["spec"]
    return spec["holderIdentity"], int(spec.get("leaseTransitions") or 0)


async def run(kubeconfig: Path, scheduler_pid: int, selectors: int) -> None:
    async with await make_api_client(kubeconfig) as api_client:
        kube = KubeAPI(api_client)
        await setup(kube, 2, 8)
        for ns in ("tenant-a", "tenant-b", "tenant-c"):
            await namespace(kube, ns)
        await asyncio.sleep(3)  # the scheduler's initial lists and its Lease
        alone = [await plain_pod(kube, f"alone-{i}") for i in range(ROUNDS)]
        holder = await lease(kube)
        crowded = []
        for r in range(ROUNDS):
            for i in range(3):
                selector = hostile_selector(100 * r + i + 1)
                await claim_and_pod(kube, "tenant-a", f"hostile-{r}-{i}", selector)
            crowded.append(await plain_pod(kube, f"crowded-{r}"))
        kept = await lease(kube) == holder
        print("tenant isolation (2 nodes x 8 devices)")
        print(f"  plain pod, alone: median {statistics.median(alone):.2f} s {_list(alone)}")
        print(
            "  plain pod, after 3 expensive claims of another tenant: median "
            f"{statistics.median(crowded):.2f} s {_list(crowded)}"
        )
        print(f"  scheduler kept its Lease throughout: {kept}")
        before = rss_mib(scheduler_pid)
        sem = asyncio.Semaphore(16)

        async def unique(i: int) -> None:
            async with sem:
                await claim_and_pod(
                    kube, "tenant-c", f"u-{i:05d}", f'device.driver == "unique-{i}.example.com"'
                )

        started = time.monotonic()
        await asyncio.gather(*(unique(i) for i in range(selectors)))
        await asyncio.sleep(30)  # the scheduler tries them all (they never fit)
        print(
            f"  scheduler RSS: {before:.0f} MiB before, {rss_mib(scheduler_pid):.0f} MiB after "
            f"{selectors} claims with unique selectors ({time.monotonic() - started:.0f} s)"
        )


def _list(values: list[float]) -> str:
    return "(" + ", ".join(f"{v:.2f}" for v in values) + ")"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--selectors", type=int, default=5000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp, controlplane.running(Path(tmp) / "cp") as cp:
        env = {**os.environ, "KUBECONFIG": str(cp.kubeconfig), "KOPF_DRA_LOG_LEVEL": "WARNING"}
        log = (Path(tmp) / "scheduler.log").open("w")
        scheduler = subprocess.Popen(
            [sys.executable, "-m", "operators.cli", "run", "scheduler"],
            stdout=log,
            stderr=subprocess.STDOUT,
            env=env,
        )
        try:
            asyncio.run(run(cp.kubeconfig, scheduler.pid, args.selectors))
        finally:
            scheduler.terminate()
            try:
                scheduler.wait(timeout=30)
            except subprocess.TimeoutExpired:
                scheduler.kill()
    return 0


if __name__ == "__main__":
    sys.exit(main())
