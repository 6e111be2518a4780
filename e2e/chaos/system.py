"""The system a scenario runs against: a fresh local control plane, virtual nodes with the
example driver each, the operators as child processes, and an observer of pods and claims.

Components are started by name with their argument lists, so faults can kill, pause and
restart them by name; a process stopped on purpose (a deleted node's driver) is left out of
the liveness check. The observer polls pods and claims to tell when the cluster has settled
and since when each allocated claim has been without a reservation.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import re
import shutil
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Final, TextIO, TypeVar

import aiohttp

from e2e.chaos.invariants import ProcessState, Snapshot
from operators.demo.bringup import System, VirtualNode, start_system
from operators.demo.supervision import Child
from operators.kube.api import ApiError, ConflictError, KubeAPI, NotFoundError
from operators.kube.client import make_api_client
from operators.localcluster import controlplane

T = TypeVar("T")
TRANSIENT: Final = (ApiError, OSError, aiohttp.ClientError, TimeoutError)
TRACEBACK: Final = "Traceback (most recent call last)"
# The line a traceback ends with: an exception's (dotted) name, then its message if any.
EXCEPTION_LINE: Final = re.compile(r"^[A-Za-z_][\w.]*(:|$)")


def tracebacks(text: str) -> tuple[str, ...]:
    """One entry per distinct traceback of a log: the exception line, with a count."""
    lines = text.splitlines()
    found: dict[str, int] = {}
    for i, line in enumerate(lines):
        if TRACEBACK not in line:
            continue
        last = next(
            (x.strip() for x in lines[i + 1 : i + 300] if EXCEPTION_LINE.match(x)),
            "(exception line not found)",
        )
        found[last] = found.get(last, 0) + 1
    return tuple(f"{e} (x{n})" if n > 1 else e for e, n in found.items())


async def retrying(call: Callable[[], Awaitable[T]], what: str, within: float = 90.0) -> T:
    """``call`` until the API server answers (it may be restarting); a 409 is not transient."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + within
    while True:
        try:
            return await call()
        except ConflictError:
            raise
        except TRANSIENT as e:
            if isinstance(e, ApiError) and e.status < 500 and e.status != 429:
                raise
            if loop.time() > deadline:
                raise AssertionError(f"{what}: no answer within {within:.0f}s: {e}") from e
            await asyncio.sleep(0.5)


@dataclasses.dataclass
class Component:
    """One process of the system, restartable with the same arguments."""

    name: str
    args: tuple[str, ...]
    child: Child
    stopped: bool = False  # on purpose: not expected to be alive

    @property
    def pid(self) -> int:
        return self.child.process.pid


class Observer:
    """Polls pods and claims: when they last changed, and unreserved allocations' ages."""

    def __init__(self, api: KubeAPI, period: float = 1.0) -> None:
        self.api = api
        self.period = period
        self.fingerprint: tuple[int, int, int] | None = None
        self.changed_at = time.monotonic()
        self.unreserved_since: dict[str, float] = {}
        self.pods: list[dict[str, Any]] = []
        self.claims: list[dict[str, Any]] = []

    async def poll(self) -> None:
        now = time.monotonic()
        try:
            pods = (await self.api.list("Pod"))["items"]
            claims = (await self.api.list("ResourceClaim"))["items"]
        except TRANSIENT:
            self.changed_at = now  # nothing is settled while the API server is away
            return
        self.pods, self.claims = pods, claims
        versions = [int(o["metadata"]["resourceVersion"]) for o in (*pods, *claims)]
        fingerprint = (max(versions, default=0), len(pods), len(claims))
        if fingerprint != self.fingerprint:
            self.fingerprint, self.changed_at = fingerprint, now
        unreserved = {
            f"{c['metadata']['namespace']}/{c['metadata']['name']}"
            for c in claims
            if (c.get("status") or {}).get("allocation") and not c["status"].get("reservedFor")
        }
        for key in unreserved:
            self.unreserved_since.setdefault(key, now)
        for key in set(self.unreserved_since) - unreserved:
            del self.unreserved_since[key]

    async def run(self) -> None:
        while True:
            await self.poll()
            await asyncio.sleep(self.period)

    def restart_quiet(self) -> None:
        """Quiet periods count from now: a fault just ended (a resumed process may write)."""
        self.changed_at = time.monotonic()

    def quiet_for(self) -> float:
        return time.monotonic() - self.changed_at

    def unreserved_for(self) -> dict[str, float]:
        now = time.monotonic()
        return {k: now - t for k, t in self.unreserved_since.items()}


class ChaosSystem:
    """What faults and scenarios act on; ``say`` prints a timestamped line of the timeline."""

    def __init__(
        self,
        cp: controlplane.ControlPlane,
        api: KubeAPI,
        system: System,
        out: TextIO,
    ) -> None:
        self.cp = cp
        self.api = api
        self.system = system
        self.out = out
        self.started = time.monotonic()
        self.components: dict[str, Component] = {}
        self.observer = Observer(api)
        for child in system.supervisor.children:  # the drivers start_system started
            argv = child.process.args
            args = tuple(str(a) for a in argv[3:]) if isinstance(argv, list) else ()
            self.components[child.name] = Component(child.name, args, child)

    @property
    def log_dir(self) -> Path:
        return self.system.supervisor.log_dir

    def say(self, text: str) -> None:
        print(f"[{time.monotonic() - self.started:6.1f}s] {text}", file=self.out, flush=True)

    def start(self, name: str, *args: str) -> Component:
        child = self.system.supervisor.start(name, *args)
        component = Component(name, tuple(args), child)
        self.components[name] = component
        self.say(f"started {name} (pid {child.process.pid}): kopf-dra {' '.join(args)}")
        return component

    def restart(self, name: str) -> Component:
        old = self.components[name]
        child = self.system.supervisor.start(name, *old.args)
        self.components[name] = dataclasses.replace(old, child=child, stopped=False)
        return self.components[name]

    def process_states(self) -> tuple[ProcessState, ...]:
        states = [
            ProcessState(
                c.name,
                alive=c.child.process.poll() is None,
                exit_code=c.child.process.returncode,
                tracebacks=tracebacks(c.child.log.read_text(errors="replace")),
            )
            for c in self.components.values()
            if not c.stopped
        ]
        for name, process in (
            ("etcd", self.cp.processes[0]),
            ("kube-apiserver", self.cp.apiserver),
        ):
            if process is not None:
                states.append(ProcessState(name, process.poll() is None, process.returncode))
        return tuple(states)

    async def groups(self) -> list[dict[str, Any]]:
        """The PodGroups, where the control plane serves them (1.37 with GenericWorkload)."""
        try:
            listed = await retrying(lambda: self.api.list("PodGroup"), "listing PodGroups")
        except NotFoundError:
            return []
        found: list[dict[str, Any]] = listed["items"]
        return found

    async def snapshot(self) -> Snapshot:
        async def items(kind: str) -> list[dict[str, Any]]:
            listed = await retrying(lambda: self.api.list(kind), f"listing {kind}")
            found: list[dict[str, Any]] = listed["items"]
            return found

        return Snapshot.load(
            pods=await items("Pod"),
            claims=await items("ResourceClaim"),
            slices=await items("ResourceSlice"),
            classes=await items("DeviceClass"),
            nodes=await items("Node"),
            groups=await self.groups(),
            unreserved_for=self.observer.unreserved_for(),
            processes=self.process_states(),
        )


def node_profile(devices: int) -> Mapping[str, Any]:
    """``devices`` plain GPUs (one device each), nothing else."""
    return {"gpus": [{"count": devices, "model": "T4", "memory": "16Gi"}], "nics": []}


@contextlib.asynccontextmanager
async def running_system(
    workdir: Path, nodes: Sequence[VirtualNode], out: TextIO
) -> AsyncIterator[ChaosSystem]:
    """A fresh control plane with ``nodes`` published; always stopped, logs kept in workdir
    (etcd's data goes: 64 MB of preallocated log per run)."""
    try:
        async with _running_system(workdir, nodes, out) as chaos:
            yield chaos
    finally:
        shutil.rmtree(workdir / "control-plane" / "etcd", ignore_errors=True)


@contextlib.asynccontextmanager
async def _running_system(
    workdir: Path, nodes: Sequence[VirtualNode], out: TextIO
) -> AsyncIterator[ChaosSystem]:
    with controlplane.running(workdir / "control-plane") as cp:
        async with await make_api_client(cp.kubeconfig) as api_client:
            api = KubeAPI(api_client)
            system = await start_system(
                api,
                cp.kubeconfig,
                nodes=nodes,
                log_dir=workdir / "logs",
                operators=False,
                fabric=False,
                feature_gates=controlplane.feature_gates(),
            )
            chaos = ChaosSystem(cp, api, system, out)
            observing = asyncio.create_task(chaos.observer.run(), name="chaos-observer")
            try:
                yield chaos
            finally:
                observing.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await observing
                await asyncio.to_thread(system.stop)
