"""The simulated fabric manager process: ``kopf-dra run fabric-manager-sim``.

One process per fabric; several clusters (fabric controllers with different ``--cluster-id``)
may share it. State survives restarts through ``--state-file``.
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

from operators.fabric.service import FabricService
from operators.fabric.simulator import ConfigError, FabricSimulator, load_config
from operators.observability import metrics
from operators.observability.logging import configure
from operators.settings import Settings, SettingsError

COMPONENT = "fabric-manager-sim"
log = structlog.get_logger(__name__)


class FabricSimSettings(Settings):
    fabric_config: str | None = Field(
        default=None, description="Inventory and timings (YAML); default: one A100"
    )
    state_file: str | None = Field(
        default=None, description="Where the state is persisted (default: memory only)"
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
        config, settings.state_file, clock=time.time, rng=random.Random(config.seed)
    )


async def _main(settings: FabricSimSettings) -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    service = FabricService(build_simulator(settings))
    url = await service.start(settings.host, settings.port)
    log.info("fabric manager simulator serving", url=url, devices=len(service.sim.devices))
    try:
        await stop.wait()
    finally:
        await service.stop()


def add_arguments(parser: argparse.ArgumentParser) -> None:
    FabricSimSettings.add_arguments(parser)


def run(args: argparse.Namespace) -> int:
    try:
        settings = FabricSimSettings.load(args)
        load_config(settings.fabric_config)  # fail fast with the offending keys
    except (SettingsError, ConfigError) as e:
        print(f"kopf-dra run {COMPONENT}: {e}", file=sys.stderr)
        return 2
    configure(COMPONENT, level=settings.log_level, json_output=settings.log_json)
    metrics.serve(settings.metrics_port)
    asyncio.run(_main(settings))
    return 0
