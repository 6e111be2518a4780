"""The driver on one node: keeps its pool published and prepares claims for the kubelet.

State lives in three places, all rebuilt on restart: the API server (slices, claim statuses),
the checkpoint file (prepared claims) and the CDI directory (specs). Prepare and unprepare run
one at a time: they are rare and short, and serialising them makes the checkpoint trivially
consistent.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Collection, Sequence
from dataclasses import replace
from typing import Any

import structlog

from operators.api.core import Node
from operators.api.resource import API_VERSION, AllocatedDeviceStatus, ResourceClaim
from operators.api.timestamps import format_time
from operators.driver import metrics
from operators.driver.cdi import CDIWriter
from operators.driver.checkpoint import Checkpoint, PreparedClaim, PreparedDevice
from operators.driver.health import DeviceHealth, health_report, unhealthy_devices, with_taints
from operators.driver.plugin import ClaimRef, PrepareResult
from operators.driver.prepare import PrepareError, plan_prepare, skips_prepare
from operators.driver.profiles import (
    DeviceInfo,
    DriverConfig,
    Inventory,
    default_config,
    parse_hotplug,
)
from operators.driver.slices import NO_SLICE_FIELDS, NodeRef, SliceFields, SlicePublisher
from operators.driver.sources import DeviceSource, ProfileSource, SourceError
from operators.kube.api import ApiError, ConflictError, KubeAPI, NotFoundError
from operators.observability import fields
from operators.runtime.clock import SYSTEM_CLOCK, Clock

#: Node annotation through which the fabric controller hands attached devices to the node's
#: driver: a JSON list of {"name", "model", "memory", "uuid"} (see profiles.HotplugDevice).
HOTPLUG_ANNOTATION = "resource.kopf-dra.io/attached-devices"
_FIELD_MANAGER_MAX = 128

log = structlog.get_logger(__name__)


class DriverService:
    """Implements the kubelet plugin's NodeService on top of the API and the local files."""

    def __init__(
        self,
        api: KubeAPI,
        *,
        driver: str,
        node_name: str,
        cdi: CDIWriter,
        config: DriverConfig | None = None,
        source: DeviceSource | None = None,
        checkpoint: Checkpoint,
        pool: str | None = None,
        clock: Clock = SYSTEM_CLOCK,
        unhealthy: Collection[str] = (),
        slice_fields: SliceFields = NO_SLICE_FIELDS,
    ) -> None:
        self.api = api
        self.driver = driver
        self.node_name = node_name
        self.pool = pool or node_name
        self.source: DeviceSource = source or ProfileSource(config or default_config())
        self.cdi = cdi
        self.checkpoint = checkpoint
        self.clock = clock
        self.node: Node | None = None
        self.inventory = Inventory()
        self.publisher: SlicePublisher | None = None
        #: The 1.37 slice fields this cluster takes (the app sets them once it knows it).
        self.slice_fields = slice_fields
        self._lock = asyncio.Lock()
        self.field_manager = f"{driver}/{node_name}"[:_FIELD_MANAGER_MAX]
        self.marked_unhealthy = frozenset(unhealthy)
        #: Devices the source reported unhealthy (NVML's critical events) -> why.
        self.reported_unhealthy: dict[str, str] = {}
        #: Unhealthy device -> when this driver first saw it so (the taint's timeAdded).
        self.unhealthy_since: dict[str, str] = {}
        self.health: list[DeviceHealth] = []
        self._health_changed = asyncio.Condition()
        self._health_version = 0
        metrics.PREPARED_CLAIMS.set(len(checkpoint.claims()))

    # --- the pool ------------------------------------------------------------------------

    async def refresh(self) -> int | None:
        """Re-read the Node (hot-plugged devices) and publish; the new generation or None."""
        node = Node.load(await self.api.get("Node", self.node_name))
        hotplugged, problems = parse_hotplug(node.metadata.annotations.get(HOTPLUG_ANNOTATION))
        inventory = self.source.inventory(self.node_name, hotplugged)
        for problem in (*problems, *inventory.problems):
            log.warning(
                "skipped a hot-plugged device", **{fields.NODE: self.node_name}, reason=problem
            )
        marked = self.marked_unhealthy | self.reported_unhealthy.keys()
        unhealthy = unhealthy_devices(inventory, marked)
        now = format_time(self.clock.now())
        self.unhealthy_since = {d: self.unhealthy_since.get(d, now) for d in sorted(unhealthy)}
        inventory = with_taints(inventory, self.driver, self.unhealthy_since)
        self.node, self.inventory = node, inventory
        await self._set_health(
            health_report(inventory, self.pool, unhealthy, self.reported_unhealthy)
        )
        ref = NodeRef(self.node_name, node.metadata.uid or "")
        if self.publisher is None or self.publisher.node != ref:
            self.publisher = SlicePublisher(self.api, self.driver, ref, self.pool)
        self.publisher.fields = self.slice_fields
        generation = await self.publisher.sync(inventory)
        metrics.PUBLISHED_DEVICES.set(len(inventory.devices))
        if generation is not None:
            metrics.SLICE_PUBLISHES.inc()
            log.info(
                "published the pool",
                **{fields.POOL: str(self.publisher.pool_id), fields.NODE: self.node_name},
                generation=generation,
                devices=len(inventory.devices),
            )
        return generation

    # --- device health (the kubelet's NodeWatchResources stream) -----------------------------

    async def report_unhealthy(self, device: str, why: str) -> None:
        """The source saw ``device`` (a GPU covers its partitions) fail: tell the kubelet and
        taint it now rather than at the next resync."""
        if self.reported_unhealthy.get(device) == why:
            return
        self.reported_unhealthy[device] = why
        log.warning("device failed", **{fields.NODE: self.node_name}, device=device, reason=why)
        if self.node is not None:
            try:
                await self.refresh()
            except (ApiError, OSError, TimeoutError) as e:
                log.error("could not publish the taint; the next resync will", error=str(e))

    async def _set_health(self, report: list[DeviceHealth]) -> None:
        if report == self.health:
            return
        for device in report:
            if not device.healthy:
                log.warning(
                    "device unhealthy",
                    **{fields.NODE: self.node_name, fields.POOL: device.pool},
                    device=device.device,
                    reason=device.message,
                )
        async with self._health_changed:
            self.health = report
            self._health_version += 1
            self._health_changed.notify_all()

    async def health_reports(self, repeat_seconds: float) -> AsyncIterator[list[DeviceHealth]]:
        """The current report at once, then on every change and at least every
        ``repeat_seconds`` (the kubelet forgets a report that is not repeated in time)."""
        seen = -1
        while True:
            async with self._health_changed:
                if seen == self._health_version:
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(self._health_changed.wait(), repeat_seconds)
                seen = self._health_version
                report = list(self.health)
            yield report

    # --- kubelet calls ---------------------------------------------------------------------

    async def prepare(self, claims: Sequence[ClaimRef]) -> dict[str, PrepareResult]:
        results: dict[str, PrepareResult] = {}
        async with self._lock:
            for ref in claims:
                started = time.perf_counter()
                try:
                    devices = await self._prepare_one(ref)
                except PrepareError as e:
                    metrics.PREPARES.labels(result=e.reason).inc()
                    log.warning(
                        "claim not prepared",
                        **{fields.CLAIM: ref.key, fields.REASON: e.reason},
                        error=e.message,
                    )
                    results[ref.uid] = PrepareResult(error=str(e))
                except ApiError as e:
                    # Transient: the kubelet retries claims that come back with an error.
                    metrics.PREPARES.labels(result="ApiError").inc()
                    results[ref.uid] = PrepareResult(error=f"claim {ref.key}: {e}")
                except OSError as e:
                    # The CDI or state directory is not writable: this claim fails, not the call.
                    metrics.PREPARES.labels(result="LocalStateError").inc()
                    results[ref.uid] = PrepareResult(error=f"LocalStateError: claim {ref.key}: {e}")
                else:
                    metrics.PREPARES.labels(result="Prepared").inc()
                    results[ref.uid] = PrepareResult(devices=devices)
                finally:
                    done = ref.uid in results and not results[ref.uid].error
                    failed = "false" if done else "true"
                    duration = time.perf_counter() - started
                    metrics.OPERATION_DURATION.labels("prepare", failed).observe(duration)
            metrics.PREPARED_CLAIMS.set(len(self.checkpoint.claims()))
        return results

    async def _prepare_one(self, ref: ClaimRef) -> list[PreparedDevice]:
        done = self.checkpoint.get(ref.uid)
        if done is not None:
            # Idempotent: answer as before; a reboot may have emptied the CDI directory.
            if not self.cdi.exists(ref.uid):
                self.cdi.write(ref.uid, done.cdi_spec)
            return done.devices
        if self.node is None:
            raise PrepareError("NotReady", f"claim {ref.key}: the driver has not read its Node yet")
        try:
            raw = await self.api.get("ResourceClaim", ref.name, ref.namespace)
        except NotFoundError:
            raise PrepareError("ClaimNotFound", f"claim {ref.key}: not found") from None
        claim = ResourceClaim.load(raw)
        # A device whose allocation skips preparing gets nothing set up (no MIG instance, no
        # CDI device): the kubelet sent it only beside others of ours (prepare.skips_prepare).
        results = [r for r in claim.allocated_results() if r.driver == self.driver]
        skipped = [str(r.device_id) for r in results if skips_prepare(r)]
        if skipped:
            log.info(
                "left alone devices whose slice skips node operations",
                **{fields.CLAIM: ref.key},
                devices=skipped,
            )
        ours = self._our_devices([r for r in results if not skips_prepare(r)])
        try:
            edits = await self.source.prepare(ours)
        except SourceError as e:
            raise PrepareError("DeviceSetupFailed", f"claim {ref.key}: {e}") from None
        inventory = replace(self.inventory, edits={**self.inventory.edits, **edits})
        try:
            preparation = plan_prepare(
                claim,
                uid=ref.uid,
                driver=self.driver,
                node=self.node,
                pool=self.pool,
                inventory=inventory,
                now=format_time(self.clock.now()),
            )
        except PrepareError:
            await self.source.unprepare([d for d in ours if d.name in edits])
            raise
        record = preparation.claim
        self.cdi.write(ref.uid, record.cdi_spec)
        self.checkpoint.add(record)
        log.info("prepared", **{fields.CLAIM: ref.key}, devices=[d.device for d in record.devices])
        await self._report(record, preparation.statuses)
        return record.devices

    async def unprepare(self, claims: Sequence[ClaimRef]) -> dict[str, str]:
        errors: dict[str, str] = {}
        async with self._lock:
            for ref in claims:
                started = time.perf_counter()
                record = self.checkpoint.get(ref.uid)
                self.cdi.remove(ref.uid)
                if record is not None:
                    try:
                        await self.source.unprepare(self._our_devices(record.devices))
                    except Exception as e:  # the kubelet retries: keep the record
                        errors[ref.uid] = f"claim {ref.key}: could not tear down: {e}"
                        continue
                    await self._report(record, [])
                    self.checkpoint.remove(ref.uid)
                    log.info("unprepared", **{fields.CLAIM: ref.key})
                metrics.UNPREPARES.labels(result="Unprepared").inc()
                errors[ref.uid] = ""
                duration = time.perf_counter() - started
                metrics.OPERATION_DURATION.labels("unprepare", "false").observe(duration)
            metrics.PREPARED_CLAIMS.set(len(self.checkpoint.claims()))
        return errors

    def _our_devices(self, results: Sequence[Any]) -> list[DeviceInfo]:
        """This pool's devices among allocation results or prepared devices."""
        infos = (
            self.inventory.info.get(r.device or "")
            for r in results
            if getattr(r, "driver", self.driver) == self.driver and r.pool == self.pool
        )
        return list({i.name: i for i in infos if i is not None}.values())

    # --- device status ----------------------------------------------------------------------

    async def _report(self, record: PreparedClaim, statuses: list[AllocatedDeviceStatus]) -> None:
        """Server-side apply of our entries in ``status.devices`` (empty list: remove them).

        Each writer owns its own entries (the list is keyed by driver, pool, device, shareID),
        so the fabric controller's conditions on other devices are left alone. The UID makes a
        recreated claim of the same name a conflict instead of a wrong write. Status is
        informational for node-local devices, so a failure is logged, not fatal.
        """
        body: dict[str, Any] = {
            "apiVersion": API_VERSION,
            "kind": "ResourceClaim",
            "metadata": {"name": record.name, "namespace": record.namespace, "uid": record.uid},
            "status": {"devices": [s.dump() for s in statuses]},
        }
        try:
            await self.api.patch(
                "ResourceClaim",
                record.name,
                body,
                record.namespace,
                patch_type="apply",
                subresource="status",
                field_manager=self.field_manager,
            )
        except (NotFoundError, ConflictError):
            pass  # the claim is gone (or was recreated): nothing of ours to report on
        except ApiError as e:
            metrics.STATUS_WRITE_FAILURES.inc()
            log.warning("could not write device status", **{fields.CLAIM: record.key}, error=str(e))
