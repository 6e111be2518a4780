"""The simulated fabric manager process: ``kopf-dra run fabric-manager-sim``.

One process per fabric; several clusters may share it, each with a bearer token of its own
(``--tokens-dir``, required: the manager answers no one without a credential). State survives
restarts through ``--state-file`` (a snapshot and a journal beside it).
"""

from __future__ import annotations

import argparse
import asyncio
import random
import signal
import sys
import time

import structlog
from pydantic import Field

from operators.fabric.auth import TokenDirectory, TokenError
from operators.fabric.journal import JournalError
from operators.fabric.service import FabricService
from operators.fabric.simulator import (
    KEEP_FINISHED,
    MAX_RUNNING,
    ConfigError,
    FabricSimulator,
    load_config,
)
from operators.observability.logging import configure
from operators.settings import Settings, SettingsError

COMPONENT = "fabric-manager-sim"
log = structlog.get_logger(__name__)


class FabricSimSettings(Settings):
    fabric_config: str | None = Field(
        default=None, description="Inventory and timings (YAML); default: one A100"
    )
    state_file: str | None = Field(
        default=None,
        description="Where the state is persisted (a snapshot, and a journal beside it at "
        "<state-file>.journal); default: memory only",
    )
    tokens_dir: str | None = Field(
        default=None,
        description="Required. Directory of bearer tokens, one file per cluster: the file name is "
        "the cluster id, its content the token (a Secret's mount); re-read when it changes",
    )
    enable_faults: bool = Field(
        default=False,
        description="Serve POST /v1/faults (fail attaches on purpose: tests only); off: 403",
    )
    keep_finished: int = Field(
        default=KEEP_FINISHED,
        ge=0,
        description="Finished operations kept per cluster (idempotent retries, audits); the "
        "earliest finished are forgotten first",
    )
    max_running: int = Field(
        default=MAX_RUNNING, ge=1, description="Running operations per cluster; more get 429"
    )
    host: str = Field(default="0.0.0.0", description="Address to listen on")
    port: int = Field(default=8470, description="Port to listen on")
    attach_seconds: float | None = Field(
        default=None, ge=0, description="Override the config's attach time"
    )
    detach_seconds: float | None = Field(
        default=None, ge=0, description="Override the config's detach time"
    )


def build_simulator(settings: FabricSimSettings) -> FabricSimulator:
    config = load_config(settings.fabric_config)
    if settings.attach_seconds is not None:
        config = config.model_copy(update={"attach_seconds": settings.attach_seconds})
    if settings.detach_seconds is not None:
        config = config.model_copy(update={"detach_seconds": settings.detach_seconds})
    return FabricSimulator(
        config,
        settings.state_file,
        clock=time.time,
        rng=random.Random(config.seed),
        keep_finished=settings.keep_finished,
        max_running=settings.max_running,
    )


async def _main(settings: FabricSimSettings, sim: FabricSimulator, tokens: TokenDirectory) -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    service = FabricService(sim, tokens, faults=settings.enable_faults)
    url = await service.start(settings.host, settings.port)
    log.info(
        "fabric manager simulator serving",
        url=url,
        devices=len(service.sim.devices),
        faults=settings.enable_faults,
    )
    try:
        await stop.wait()
    finally:
        await service.stop()


def add_arguments(parser: argparse.ArgumentParser) -> None:
    FabricSimSettings.add_arguments(parser)


def run(args: argparse.Namespace) -> int:
    try:
        settings = FabricSimSettings.load(args)
        if not settings.tokens_dir:
            raise SettingsError(
                "FabricSimSettings: --tokens-dir / KOPF_DRA_TOKENS_DIR is required (the manager "
                "serves no one without a credential)"
            )
        if settings.metrics_bind_address:
            raise SettingsError(
                "FabricSimSettings: --metrics-bind-address: the simulator has no metrics; its "
                "/healthz and /readyz are on --port"
            )
        tokens = TokenDirectory(settings.tokens_dir)
        sim = build_simulator(settings)  # a bad config or state file: the offending keys
    except (SettingsError, ConfigError, TokenError, JournalError) as e:
        print(f"kopf-dra run {COMPONENT}: {e}", file=sys.stderr)
        return 2
    configure(COMPONENT, level=settings.log_level, json_output=settings.log_json)
    asyncio.run(_main(settings, sim, tokens))
    return 0
