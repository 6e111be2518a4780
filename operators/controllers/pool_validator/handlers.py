"""kopf handlers of the pool validator: index slices, claims and our statuses; reconcile a pool.

Work is keyed by pool (driver, pool name). A slice event enqueues its pool (and the pool it
belonged to before, should its pool name have changed); a claim event enqueues every pool its
allocation uses now or used before (a deallocation changes utilisation too); a
ResourcePoolStatus event enqueues its pool, so statuses deleted by hand come back and those
of pools that vanished while we were down go. kopf runs no handler before every index has
finished its initial list, so the first verdict already sees the whole pool.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import dataclasses
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final

import kopf
import structlog

from operators.allocator.features import Features
from operators.allocator.pool_checks import (
    DOUBLE_ALLOCATION,
    PoolReport,
    admission_problems,
    check_pool,
)
from operators.allocator.pools import newest_generations
from operators.api.holdings import Holdings
from operators.api.ids import PoolID
from operators.api.keys import ObjectKey
from operators.api.poolstatus import KIND as REQUEST_KIND
from operators.api.poolstatus import PLURAL as REQUEST_PLURAL
from operators.api.poolstatus import ResourcePoolStatusRequest
from operators.api.resource import DeviceTaintRule, ResourceClaim, ResourceSlice
from operators.api.timestamps import format_time
from operators.controllers.pool_validator import metrics, planning
from operators.controllers.pool_validator.model import (
    API_VERSION,
    GROUP,
    KIND,
    PLURAL,
    VERSION,
    PoolStatusStatus,
)
from operators.controllers.pool_validator.settings import PoolValidatorSettings
from operators.kube import certs
from operators.kube.api import (
    ApiError,
    ConflictError,
    NotFoundError,
    Resource,
    register_resource,
)
from operators.observability import fields
from operators.runtime.actions import PostEvent, ReplaceStatus
from operators.runtime.controller import Controller
from operators.runtime.indices import CLAIMS, SLICES
from operators.runtime.queue import WorkQueue

log = structlog.get_logger(__name__)
SERVED_POLL = 0.5  # seconds between checks that a just-installed CRD is served

COMPONENT: Final = "pool-validator"
STATUSES: Final = (GROUP, VERSION, PLURAL)
RESOURCE: Final = Resource(API_VERSION, PLURAL, False, KIND)
#: resource.k8s.io/v1alpha3, served with the DRAResourcePoolStatus gate (KEP-5677).
REQUESTS: Final = ("resource.k8s.io", "v1alpha3", REQUEST_PLURAL)
POOL_STATUS_GATE: Final = "DRAResourcePoolStatus"

PoolKey = tuple[str, str]  # (driver, pool)


def slice_pool(body: Mapping[str, Any]) -> PoolKey:
    spec = body.get("spec") or {}
    return spec.get("driver") or "", (spec.get("pool") or {}).get("name") or ""


def claim_pools(body: Mapping[str, Any]) -> set[PoolKey]:
    """Pools an allocated claim takes devices from."""
    allocation = (body.get("status") or {}).get("allocation") or {}
    results = (allocation.get("devices") or {}).get("results") or []
    return {(r.get("driver") or "", r.get("pool") or "") for r in results}


def status_pool(body: Mapping[str, Any]) -> PoolKey:
    spec = body.get("spec") or {}
    return spec.get("driver") or "", spec.get("pool") or ""


@dataclasses.dataclass(frozen=True)
class Verdict:
    """What the metrics show of one pool."""

    state: str
    codes: tuple[str, ...]
    devices: tuple[int, int]  # total, allocated
    counters: tuple[tuple[str, str, float], ...]  # counter set, counter, consumed/total
    node: str | None = None  # the one node its slices name, if so


class PoolValidatorController(Controller[PoolValidatorSettings]):
    component = COMPONENT
    metrics_registry = metrics.REGISTRY
    kopf_indices = ("slices_by_pool", "claims_by_pool", "statuses")

    def __init__(
        self, settings: PoolValidatorSettings, features: Features | None = None, **kwargs: Any
    ) -> None:
        super().__init__(settings, **kwargs)
        self.features = features or Features.of(settings.gates(), settings.version())
        self.queue: WorkQueue[PoolKey] = WorkQueue(
            self.reconcile, name=COMPONENT, workers=settings.workers, clock=self.clock
        )
        self.verdicts: dict[PoolKey, Verdict] = {}
        #: Finished reconciles per pool (tests and debugging wait on it).
        self.reconciled: collections.Counter[PoolKey] = collections.Counter()
        self._since: dict[tuple[PoolKey, str], float] = {}
        self._slice_pools: dict[str, PoolKey] = {}
        self._claim_pools: dict[tuple[str, str], set[PoolKey]] = {}
        # Our last write per pool, with the resourceVersion it replaced: the cache may lag.
        self._written: dict[PoolKey, tuple[str | None, dict[str, Any]]] = {}
        self._labels: dict[PoolKey, list[tuple[str, ...]]] = {}
        #: Each node's value of ``settings.domain_key`` (nodes without it left out).
        self.node_domains: dict[str, str] = {}
        #: Devices held per namespace and queue (``settings.queue_label``).
        self.holdings = Holdings()
        # ResourcePoolStatusRequests: answered here in place of kube-controller-manager's
        # resourcepoolstatusrequest-controller, which must then be off (one writer).
        self.answers_requests = settings.gate(POOL_STATUS_GATE)
        # DeviceTaintRules taint devices too; off, there are none (as for kube-scheduler).
        self.taint_rules = settings.gate("DRADeviceTaintRules")
        self.requests: WorkQueue[str] = WorkQueue(
            self.reconcile_request, name=f"{COMPONENT}-requests", workers=1, clock=self.clock
        )
        self._request_names: set[str] = set()
        self._request_attempts: collections.Counter[str] = collections.Counter()
        self.lifetimes = planning.RequestLifetimes(
            completed_ttl=settings.request_completed_ttl,
            pending_ttl=settings.request_pending_ttl,
            incomplete_retries=settings.request_incomplete_retries,
            incomplete_retry_delay=settings.request_incomplete_retry_delay,
        )

    # --- reconcile ------------------------------------------------------------------------

    def _elapsed(self, key: PoolKey, what: str, active: bool, now: float) -> float | None:
        """For how long ``what`` has been true of the pool (as seen by this process)."""
        if not active:
            self._since.pop((key, what), None)
            return None
        return now - self._since.setdefault((key, what), now)

    def _current(self, key: PoolKey) -> dict[str, Any] | None:
        """The pool's ResourcePoolStatus: from the cache, or our own write if it is newer."""
        cached = self.indices.one("statuses", key)
        written = self._written.get(key)
        if written is None:
            return None if cached is None else dict(cached)
        replaced, body = written
        if cached is None or cached["metadata"].get("resourceVersion") == replaced:
            return body
        del self._written[key]
        return dict(cached)

    async def reconcile(self, key: PoolKey) -> None:
        self.require_indices()
        try:
            await self._reconcile(key)
        finally:
            self.reconciled[key] += 1

    async def _reconcile(self, key: PoolKey) -> None:
        pool = PoolID(*key)
        bodies = list(self.indices.values("slices_by_pool", key))
        current = self._current(key)
        if not bodies:
            await self._delete(key, current)
            return
        (group,) = newest_generations([ResourceSlice.load(b) for b in bodies])
        claims = [
            ResourceClaim.load(c)
            for c in {
                c["metadata"].get("uid") or ObjectKey.of(c): c
                for c in self.indices.values("claims_by_pool", key)
            }.values()
        ]
        report = check_pool(group, claims, self.features)
        clock = self.clock.monotonic()
        timing = planning.Timing(
            incomplete_for=self._elapsed(key, "incomplete", not report.complete, clock),
            stale_for=self._elapsed(key, "stale", bool(report.stale_slices), clock),
        )
        previous = (
            PoolStatusStatus.load(current["status"])
            if current is not None and current.get("status")
            else None
        )
        plan = planning.plan_pool(
            report,
            previous,
            timing,
            grace=self.settings.incomplete_grace_period,
            now=format_time(self.clock.now()),
            max_problems=self.settings.max_problems,
        )
        if current is None:
            current = await self._create(pool)
        if (action := planning.status_write(current, plan.status)) is not None:
            await self._write_status(key, action)
            log.info(
                "pool status published",
                state=plan.state,
                problems=len(plan.codes),
                **{fields.POOL: str(pool)},
            )
        for problem in plan.new_problems:
            target = next(
                (b for b in bodies if b["metadata"].get("name") == problem.slice), current
            )
            await self.post(
                PostEvent(
                    obj=target,
                    type="Warning",
                    reason=problem.code,
                    message=planning.describe(pool, problem),
                )
            )
            if problem.code == DOUBLE_ALLOCATION:
                metrics.DOUBLE_ALLOCATIONS.inc()
                for event in planning.double_allocation_events(pool, problem, claims):
                    await self.post(event)
        self._publish(key, plan, report)
        if plan.requeue_after is not None:
            self.queue.add_after(key, plan.requeue_after + 0.05)

    async def _create(self, pool: PoolID) -> dict[str, Any]:
        try:
            created = await self.apply(planning.creation(pool))
        except ConflictError:
            # Created by us a moment ago and not in the cache yet (or by a previous run).
            return await self.api.get(KIND, planning.status_name(pool))
        assert created is not None
        return created

    async def _write_status(self, key: PoolKey, action: ReplaceStatus) -> None:
        try:
            written = await self.apply(action)
        except NotFoundError:
            self._written.pop(key, None)
            raise  # deleted meanwhile: the retry creates it again
        except ConflictError:
            self._written.pop(key, None)
            raise
        assert written is not None
        self._written[key] = (action.body["metadata"].get("resourceVersion"), written)

    async def _delete(self, key: PoolKey, current: dict[str, Any] | None) -> None:
        """The pool has no slices any more: its status goes, and so do its metrics."""
        self._written.pop(key, None)
        for what in ("incomplete", "stale"):
            self._since.pop((key, what), None)
        self._forget(key)
        if current is None:
            return
        await self.apply(planning.deletion(current))
        log.info("pool gone, status deleted", **{fields.POOL: str(PoolID(*key))})

    # --- ResourcePoolStatusRequests ----------------------------------------------------------

    async def reconcile_request(self, name: str) -> None:
        """Answer one request from the cache of slices and claims, once; delete it at its TTL.

        Read fresh: an answered request is never answered again, whoever wrote its status.
        """
        self.require_indices()
        try:
            body = await self.api.get(REQUEST_KIND, name)
        except NotFoundError:
            self._request_attempts.pop(name, None)
            return
        try:
            request = ResourcePoolStatusRequest.load(body)
        except ValueError as e:  # not what 1.36 serves: nothing to answer, nothing to retry
            log.warning("request unreadable", request=name, error=str(e))
            return
        driver = request.spec.driver or ""
        groups = newest_generations(
            ResourceSlice.load(b)
            for key in list(self.indices.keys("slices_by_pool"))
            if key[0] == driver
            for b in self.indices.values("slices_by_pool", key)
        )
        claims = [
            ResourceClaim.load(c)
            for c in {
                c["metadata"].get("uid") or ObjectKey.of(c): c
                for key in list(self.indices.keys("claims_by_pool"))
                if key[0] == driver
                for c in self.indices.values("claims_by_pool", key)
            }.values()
        ]
        rules: list[DeviceTaintRule] = []
        if request.status is None and self.taint_rules:
            # Read when answering (rarely): a fresh list, no watch kept for it.
            items = (await self.api.list("DeviceTaintRule"))["items"]
            rules = [DeviceTaintRule.load(item) for item in items]
        step = planning.plan_request(
            request,
            groups,
            claims,
            self.features,
            self.clock.now(),
            self._request_attempts[name],
            self.lifetimes,
            rules,
        )
        if step.delete:
            await self.apply(planning.request_deletion(request))
            self._request_attempts.pop(name, None)
            log.info("request expired, deleted", request=name)
            return
        if step.waiting_for:
            self._request_attempts[name] += 1
            log.info("request waits for incomplete pools", request=name, pools=step.waiting_for)
        if step.status is not None:
            await self.apply(planning.request_answer(body, step.status))
            self._request_attempts.pop(name, None)
            log.info("request answered", request=name, driver=driver)
        if step.requeue_after is not None:
            self.requests.add_after(name, step.requeue_after + 0.05)

    # --- metrics --------------------------------------------------------------------------

    def _node_of(self, key: PoolKey) -> str | None:
        """The one node the pool's slices name (None: several, every node, a selector)."""
        nodes = {
            (body.get("spec") or {}).get("nodeName") or ""
            for body in self.indices.values("slices_by_pool", key)
        }
        if len(nodes) != 1:
            return None
        return next(iter(nodes)) or None

    def _publish(self, key: PoolKey, plan: planning.PoolPlan, report: PoolReport) -> None:
        self.verdicts[key] = Verdict(
            state=plan.state,
            codes=plan.codes,
            devices=(report.devices, report.allocated_devices),
            counters=tuple(
                (
                    u.counter_set,
                    u.counter,
                    float(u.consumed.value / u.total.value) if u.total.value else 0.0,
                )
                for u in report.counters
            ),
            node=self._node_of(key),
        )
        self._republish(key)

    def _forget(self, key: PoolKey) -> None:
        self.verdicts.pop(key, None)
        self._republish(key)

    def republish_domains(self) -> None:
        """The devices per topology domain (``--domain-key``), from every pool's verdict."""
        key = self.settings.domain_key
        if not key:
            return
        pools = {k: (v.node, *v.devices) for k, v in self.verdicts.items()}
        metrics.DOMAIN_DEVICES.clear()
        for domain, (total, allocated) in planning.domain_devices(pools, self.node_domains).items():
            for state, value in (
                ("total", total),
                ("allocated", allocated),
                ("free", total - allocated),
            ):
                metrics.DOMAIN_DEVICES.labels(key, domain, state).set(value)

    def _republish(self, key: PoolKey) -> None:
        self.republish_domains()
        states = collections.Counter(v.state for v in self.verdicts.values())
        for state in planning.STATES:
            metrics.POOLS.labels(state=state).set(states[state])
        codes = collections.Counter(c for v in self.verdicts.values() for c in v.codes)
        metrics.POOL_PROBLEMS.clear()
        for code, count in codes.items():
            metrics.POOL_PROBLEMS.labels(code=code).set(count)
        for labels in self._labels.pop(key, []):
            gauge = metrics.COUNTER_UTILIZATION if len(labels) == 4 else metrics.DEVICES
            with contextlib.suppress(KeyError):
                gauge.remove(*labels)
        verdict = self.verdicts.get(key)
        if verdict is None:
            return
        driver, pool = key
        published: list[tuple[str, ...]] = []
        for counter_set, counter, ratio in verdict.counters:
            labels = (driver, pool, counter_set, counter)
            metrics.COUNTER_UTILIZATION.labels(*labels).set(ratio)
            published.append(labels)
        for state, value in zip(("total", "allocated"), verdict.devices, strict=True):
            metrics.DEVICES.labels(driver, pool, state).set(value)
            published.append((driver, pool, state))
        self._labels[key] = published

    # --- kopf side ------------------------------------------------------------------------

    async def prepare(self) -> None:
        waiting = False
        while True:
            try:
                await self.api.list(KIND)
                return
            except NotFoundError:
                raise kopf.PermanentError(
                    f"the {KIND} CRD is not installed: "
                    "kubectl apply -f crds/resourcepoolstatuses.yaml"
                ) from None
            except ApiError as e:
                if e.status != 429 and e.status < 500:
                    raise
                # A just-installed CRD's storage starting (429): an expected wait, said once.
                if not waiting:
                    log.info(f"waiting for {KIND} to be served", reason=str(e))
                    waiting = True
                await asyncio.sleep(SERVED_POLL)

    async def activate(self) -> None:
        self.queue.start()
        self.requests.start()
        if all(self.indices.has(n) for n in self.kopf_indices):  # seen while not leading
            for index in ("slices_by_pool", "statuses"):
                for pool in list(self.indices.keys(index)):
                    self.queue.add(pool)
        for name in sorted(self._request_names):
            self.requests.add(name)
        self.publish_holdings(set(self.holdings.sums))

    async def deactivate(self) -> None:
        await self.queue.stop()
        await self.requests.stop()
        self._written.clear()
        metrics.NAMESPACE_DEVICES.clear()  # the leader publishes them

    def register_handlers(self, registry: kopf.OperatorRegistry) -> None:
        """Indices (the cache) and event handlers (enqueue only)."""
        controller = self
        register_resource(RESOURCE)

        @kopf.index(*SLICES, id="slices_by_pool", registry=registry)
        async def slices_by_pool(**kw: Any) -> dict[Any, Any]:
            return {slice_pool(kw["body"]): dict(kw["body"])}

        @kopf.index(*CLAIMS, id="claims_by_pool", registry=registry)
        async def claims_by_pool(**kw: Any) -> dict[Any, Any]:
            body = dict(kw["body"])
            return dict.fromkeys(claim_pools(body), body)

        @kopf.index(*STATUSES, id="statuses", registry=registry)
        async def statuses(**kw: Any) -> dict[Any, Any]:
            return {status_pool(kw["body"]): dict(kw["body"])}

        @kopf.on.event(*SLICES, registry=registry)
        async def slice_changed(**kw: Any) -> None:
            controller.indices.attach(kw)
            name = kw["body"]["metadata"]["name"]
            pool = slice_pool(kw["body"])
            before = controller._slice_pools.get(name)
            if before is not None and before != pool:
                controller.queue.add(before)
            if kw.get("type") == "DELETED":
                controller._slice_pools.pop(name, None)
            else:
                controller._slice_pools[name] = pool
            controller.queue.add(pool)

        @kopf.on.event(*CLAIMS, registry=registry)
        async def claim_changed(**kw: Any) -> None:
            controller.indices.attach(kw)
            key = ObjectKey.of(kw["body"])
            pools = set() if kw.get("type") == "DELETED" else claim_pools(kw["body"])
            before = controller._claim_pools.pop(key, set())
            if pools:
                controller._claim_pools[key] = pools
            for pool in pools | before:
                controller.queue.add(pool)
            gone = kw.get("type") == "DELETED"
            controller.publish_holdings(
                controller.holdings.set_claim(key, None if gone else kw["body"])
            )

        @kopf.on.event(*STATUSES, registry=registry)
        async def status_changed(**kw: Any) -> None:
            controller.indices.attach(kw)
            pool = status_pool(kw["body"])
            if kw.get("type") == "DELETED":
                controller._written.pop(pool, None)  # deleted by hand: create it again
            controller.queue.add(pool)

        del slices_by_pool, claims_by_pool, statuses
        del slice_changed, claim_changed, status_changed
        if self.settings.domain_key:
            self._register_nodes(registry, self.settings.domain_key)
        if self.settings.queue_label:
            self._register_pods(registry, self.settings.queue_label)
        if self.answers_requests:
            self._register_requests(registry)
        if self.settings.webhook:
            self._register_webhook(registry)

    def _register_pods(self, registry: kopf.OperatorRegistry, label: str) -> None:
        """Watch Pods for their value of ``--queue-label`` (only where it is set)."""
        controller = self

        @kopf.on.event("", "v1", "pods", registry=registry)
        async def pod_changed(**kw: Any) -> None:
            labels = kw["body"]["metadata"].get("labels") or {}
            queue = None if kw.get("type") == "DELETED" else labels.get(label)
            moved = controller.holdings.set_pod(ObjectKey.of(kw["body"]), queue)
            controller.publish_holdings(moved)

        del pod_changed

    def publish_holdings(self, labels: set[tuple[str, str]]) -> None:
        """The devices held of each (namespace, queue) that moved; none held: no series.
        Kept on every replica (a new leader publishes at once), published by the leader only,
        as the pools' gauges are: summed over replicas they count once."""
        if not self.active:
            return
        for namespace, queue in labels:
            devices = self.holdings.sums.get((namespace, queue), 0)
            if devices:
                metrics.NAMESPACE_DEVICES.labels(namespace, queue).set(devices)
            else:
                with contextlib.suppress(KeyError):
                    metrics.NAMESPACE_DEVICES.remove(namespace, queue)

    def _register_nodes(self, registry: kopf.OperatorRegistry, key: str) -> None:
        """Watch Nodes for their value of ``--domain-key`` (only where it is set)."""
        controller = self

        @kopf.on.event("", "v1", "nodes", registry=registry)
        async def node_changed(**kw: Any) -> None:
            name = kw["body"]["metadata"]["name"]
            labels = kw["body"]["metadata"].get("labels") or {}
            domain = None if kw.get("type") == "DELETED" else labels.get(key) or None
            if controller.node_domains.get(name) == domain:
                return
            if domain is None:
                controller.node_domains.pop(name, None)
            else:
                controller.node_domains[name] = domain
            controller.republish_domains()

        del node_changed

    def _register_requests(self, registry: kopf.OperatorRegistry) -> None:
        """Watch ResourcePoolStatusRequests (only with the gate on: off, none are served)."""
        controller = self

        @kopf.on.event(*REQUESTS, registry=registry)
        async def request_changed(**kw: Any) -> None:
            controller.indices.attach(kw)
            name = kw["body"]["metadata"]["name"]
            if kw.get("type") == "DELETED":
                controller._request_names.discard(name)
                controller._request_attempts.pop(name, None)
                return
            controller._request_names.add(name)
            controller.requests.add(name)

        del request_changed

    # --- the optional admission webhook ------------------------------------------------------

    def admit(self, body: Mapping[str, Any]) -> None:
        """Refuse a ResourceSlice that adds problems to its pool (kopf.AdmissionError)."""
        try:
            candidate = ResourceSlice.load(body)
        except ValueError:  # malformed: the API server's own validation refuses it, clearly
            metrics.ADMISSION_REVIEWS.labels(result="allowed").inc()
            return
        stored = [
            ResourceSlice.load(b) for b in self.indices.values("slices_by_pool", slice_pool(body))
        ]
        problems = admission_problems(candidate, stored, self.features)
        if not problems:
            metrics.ADMISSION_REVIEWS.labels(result="allowed").inc()
            return
        metrics.ADMISSION_REVIEWS.labels(result="denied").inc()
        pool = candidate.pool_id
        found = "; ".join(
            f"{p.code}: {p.message}" + (f" (device {p.device})" if p.device else "")
            for p in problems
        )
        raise kopf.AdmissionError(
            f"ResourceSlice {candidate.metadata.name}: pool {pool.driver}/{pool.pool} "
            f"generation {candidate.spec.pool.generation} would get {found}",
            code=422,
        )

    def _register_webhook(self, registry: kopf.OperatorRegistry) -> None:
        controller = self
        settings = self.settings

        @kopf.on.validate(
            *SLICES,
            id="pool-checks",
            operations=["CREATE", "UPDATE"],
            ignore_failures=not settings.webhook_fail_closed,
            side_effects=False,
            registry=registry,
        )
        async def validate_slice(**kw: Any) -> None:
            controller.indices.attach(kw)
            controller.admit(kw["body"])

        @kopf.on.startup(registry=registry)
        async def serve_webhook(settings: kopf.OperatorSettings, **_: Any) -> None:
            settings.admission.server = webhook_server(controller.settings)
            settings.admission.managed = controller.settings.webhook_configuration

        del validate_slice, serve_webhook


def webhook_server(settings: PoolValidatorSettings) -> kopf.WebhookServer:
    """HTTPS for the API server: the mounted certificate, or a self-signed one for local runs.

    Listens on every interface: in a cluster the API server connects from outside the pod.
    """
    if settings.webhook_cert_dir:
        directory = Path(settings.webhook_cert_dir)
        cert, key = directory / "tls.crt", directory / "tls.key"
        if not (cert.is_file() and key.is_file()):
            raise kopf.PermanentError(
                f"--webhook: no tls.crt and tls.key in {directory} (the Secret "
                "kopf-dra-pool-validator-webhook-tls: see manifests/pool-validator/webhook)"
            )
        ca = directory / "ca.crt" if (directory / "ca.crt").exists() else cert
    else:
        directory = Path(tempfile.mkdtemp(prefix="kopf-dra-webhook-"))
        try:
            cert, key = certs.self_signed(directory, [settings.webhook_host])
        except certs.CertificateError as e:
            raise kopf.PermanentError(f"--webhook without --webhook-cert-dir: {e}") from None
        ca = cert
    return kopf.WebhookServer(
        addr="0.0.0.0",
        port=settings.webhook_port,
        host=settings.webhook_host,
        certfile=str(cert),
        pkeyfile=str(key),
        cafile=str(ca),  # the caBundle of a managed configuration
    )
