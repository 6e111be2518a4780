"""The demo's child processes, supervised so that stopping the demo leaves nothing running.

Every child runs in its own process group, which ``stop`` terminates, then kills; children
also die with the demo (PR_SET_PDEATHSIG) if it is killed itself.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import dataclasses
import os
import signal
import subprocess
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final

from operators.localcluster.files import project_root

REPO_ROOT: Final = project_root()


class DemoError(RuntimeError):
    """The system could not be started (a child exited, a pool never appeared)."""


def _own_group_and_die_with_parent() -> None:  # pragma: no cover - runs in the child
    os.setsid()
    libc = ctypes.CDLL("libc.so.6", use_errno=True)
    libc.prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


@dataclasses.dataclass
class Child:
    name: str
    process: subprocess.Popen[bytes]
    log: Path


class Supervisor:
    """Child processes in process groups of their own; ``stop`` leaves nothing running."""

    def __init__(self, log_dir: Path, env: Mapping[str, str]) -> None:
        self.log_dir = log_dir
        self.env = dict(env)
        self.children: list[Child] = []
        log_dir.mkdir(parents=True, exist_ok=True)

    def start(self, name: str, *args: str) -> Child:
        log = self.log_dir / f"{name}.log"
        with open(log, "ab") as out:
            process = subprocess.Popen(
                [sys.executable, "-m", "operators.cli", *args],
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=self.env,
                cwd=REPO_ROOT,
                preexec_fn=_own_group_and_die_with_parent,
            )
        child = Child(name, process, log)
        self.children.append(child)
        return child

    def pids(self) -> list[int]:
        return [c.process.pid for c in self.children]

    def exited(self) -> list[Child]:
        return [c for c in self.children if c.process.poll() is not None]

    def check(self) -> None:
        for child in self.exited():
            tail = "\n".join(child.log.read_text(errors="replace").splitlines()[-15:])
            raise DemoError(
                f"{child.name} exited with {child.process.returncode}; {child.log}:\n{tail}"
            )

    def stop_child(self, name: str, timeout: float = 10.0) -> None:
        """Stop one child (SIGTERM, then SIGKILL of its group) and forget it."""
        for child in [c for c in self.children if c.name == name]:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(child.process.pid, signal.SIGTERM)
            with contextlib.suppress(subprocess.TimeoutExpired):
                child.process.wait(timeout=timeout)
            with contextlib.suppress(ProcessLookupError):
                os.killpg(child.process.pid, signal.SIGKILL)
            child.process.wait()
            self.children.remove(child)

    def stop(self, timeout: float = 10.0) -> None:
        for child in self.children:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(child.process.pid, signal.SIGTERM)
        deadline = time.monotonic() + timeout
        for child in self.children:
            with contextlib.suppress(subprocess.TimeoutExpired):
                child.process.wait(timeout=max(0.1, deadline - time.monotonic()))
            # The group too: anything the child started itself.
            with contextlib.suppress(ProcessLookupError):
                os.killpg(child.process.pid, signal.SIGKILL)
            child.process.wait()
        self.children.clear()


async def wait_for(
    probe: Any, what: str, supervisor: Supervisor | None = None, within: float = 60.0
) -> Any:
    """Poll ``probe`` (an async callable) until truthy; children exiting fail it early."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + within
    while True:
        if supervisor is not None:
            supervisor.check()
        result = await probe()
        if result:
            return result
        if loop.time() > deadline:
            raise DemoError(f"timed out after {within:.0f}s waiting for {what}")
        await asyncio.sleep(0.25)
