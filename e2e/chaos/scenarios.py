"""The scenarios: a workload, faults at moments drawn from ``random.Random(seed)``, and the
processes they run against (declared per scenario, so flags are easy to adapt).

Every scenario runs on a fresh local control plane with virtual nodes (plain GPUs published by
the example driver), the claim-template controller, the reservation cleanup and one or more
scheduler replicas. Pods come from one ResourceClaimTemplate and never run: bound pods stay
in phase Pending unless a fault plays the kubelet and finishes them. The first pod of every
burst is a canary that must be bound before anything else happens (the system is up).

Waits inside scenarios are of two kinds only: pacing a workload or holding a fault for a
drawn duration (the point of the scenario), and waiting for a condition with a deadline.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import random
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from typing import Any, Final

from e2e.chaos import faults
from e2e.chaos.system import ChaosSystem, node_profile, retrying
from operators.demo.bringup import VirtualNode, ensure_default_service_account
from operators.kube.api import ConflictError, KubeAPI
from tests.integration.helpers import (
    device_class_body,
    eventually,
    pod_body,
    slice_body,
    template_body,
)

NAMESPACE: Final = "chaos"
LEASE_NAMESPACE: Final = "chaos-leases"
LEASE_NAME: Final = "kopf-dra-scheduler"
TEMPLATE: Final = "gpu"
GPU_CLASS: Final = "gpu.example.kopf-dra.io"
UNSCHEDULABLE_RETRY: Final = 3.0
# Short, in kube-scheduler's proportions, so that takeovers happen within a scenario.
LEASE_DURATION: Final = 4.0
RENEW_DEADLINE: Final = 3.0
RETRY_PERIOD: Final = 1.0
# A gang's pods placed together wait this long at Permit for the rest (upstream: 5 minutes).
GANG_PERMIT_TIMEOUT: Final = 10.0
# The gang scenarios: gangs of GANG_SIZE pods, each a GPU of its own and its gang's link (a
# claim made for the PodGroup from template LINK_TEMPLATE, on a device every node reaches).
GANG_SIZE: Final = 8
LINK_DRIVER: Final = "link.chaos.kopf-dra.io"
LINK_TEMPLATE: Final = "link"
#: The rack scenarios' node label: each gang constrained to one value of it (topology).
RACK_KEY: Final = "topology.chaos.kopf-dra.io/rack"

# Flags of every scheduler replica; each also gets --identity <its component name>.
SCHEDULER: Final = (
    "run", "scheduler",
    "--unschedulable-retry", f"{UNSCHEDULABLE_RETRY:g}",
    "--lease-name", LEASE_NAME,
    "--lease-namespace", LEASE_NAMESPACE,
    "--lease-duration", f"{LEASE_DURATION:g}",
    "--renew-deadline", f"{RENEW_DEADLINE:g}",
    "--retry-period", f"{RETRY_PERIOD:g}",
    "--gang-permit-timeout", f"{GANG_PERMIT_TIMEOUT:g}",
)  # fmt: skip
# Every way the CLI lets a replica be started as far as leader election goes.
DEFAULT: Final[tuple[str, ...]] = ()  # leader election is on by default
ELECT: Final = ("--leader-elect",)
SINGLE: Final = ("--no-leader-elect",)  # "the single replica": still takes the Lease


@dataclasses.dataclass
class Context:
    """What a running scenario acts on."""

    system: ChaosSystem
    rng: random.Random
    scenario: Scenario
    schedulers: list[str]  # component names of the scheduler replicas

    @property
    def api(self) -> KubeAPI:
        return self.system.api

    def say(self, text: str) -> None:
        self.system.say(text)


@dataclasses.dataclass(frozen=True)
class Scenario:
    name: str
    summary: str
    run: Callable[[Context], Awaitable[None]]
    #: Extra scheduler flags, one tuple per replica.
    schedulers: tuple[tuple[str, ...], ...] = (DEFAULT,)
    nodes: int = 4
    devices: int = 24  # per node: 96 devices for 110 pods, so not all fit
    pods: int = 110
    burst_seconds: float = 15.0  # the pace of pod creation after the canary
    seeds: tuple[int, ...] = (1, 2)  # run by default
    #: Racks the nodes are spread over (RACK_KEY), and each gang constrained to one (0: none).
    racks: int = 0

    def node_list(self) -> list[VirtualNode]:
        return [
            VirtualNode(
                f"chaos-node-{i + 1}",
                {RACK_KEY: f"rack-{i % self.racks}"} if self.racks else {},
                node_profile(self.devices),
            )
            for i in range(self.nodes)
        ]

    def replica_names(self) -> list[str]:
        if len(self.schedulers) == 1:
            return ["scheduler"]
        return [f"scheduler-{chr(ord('a') + i)}" for i in range(len(self.schedulers))]


# --- workload ------------------------------------------------------------------------------


async def install_workload(api: KubeAPI) -> None:
    """The pods' namespace (with its default ServiceAccount), the template, the Lease's
    namespace."""
    for name in (NAMESPACE, LEASE_NAMESPACE):
        await api.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
    await ensure_default_service_account(api, NAMESPACE)
    await api.create(template_body(TEMPLATE, NAMESPACE, device_class=GPU_CLASS))


def pod_name(i: int) -> str:
    return f"burst-{i:03d}"


async def create_pod(ctx: Context, name: str) -> None:
    body = pod_body(name, NAMESPACE, {"name": "gpu", "resourceClaimTemplateName": TEMPLATE})
    # A conflict: created by an attempt whose answer was lost to a restarting API server.
    with contextlib.suppress(ConflictError):
        await retrying(lambda: ctx.api.create(body), f"creating pod {name}")


async def canary(ctx: Context) -> None:
    """The first pod of the burst, bound before the burst goes on: the system is up."""
    name = pod_name(0)
    await create_pod(ctx, name)

    async def bound() -> str | None:
        pod = await ctx.api.get("Pod", name, NAMESPACE)
        node: str | None = pod["spec"].get("nodeName")
        return node

    node = await eventually(bound, within=90, what=f"the canary pod {name} to be bound")
    ctx.say(f"canary {name} bound to {node}")


async def burst(
    ctx: Context, *during: Coroutine[Any, Any, None], seconds: float | None = None
) -> None:
    """The scenario's pods: the canary, then the rest at a steady pace over ``seconds`` (default
    the scenario's) while the faults ``during`` run (their moments count from the canary's
    binding)."""
    try:
        await canary(ctx)
    except BaseException:
        for fault in during:
            fault.close()  # never started
        raise
    pace = ctx.scenario.burst_seconds if seconds is None else seconds
    await asyncio.gather(paced(ctx, ctx.scenario.pods, pace), *during)


async def paced(ctx: Context, count: int, seconds: float) -> None:
    ctx.say(f"burst: {count - 1} more pods over {seconds:.1f} s")
    loop = asyncio.get_running_loop()
    start = loop.time()
    for i in range(1, count):
        due = start + (i - 1) * seconds / max(1, count - 1)
        await asyncio.sleep(max(0.0, due - loop.time()))  # pacing the load, not synchronising
        await create_pod(ctx, pod_name(i))
    ctx.say(f"burst: all {count} pods created")


async def at_moments(
    ctx: Context, moments: Sequence[float], action: Callable[[int], Awaitable[None]]
) -> None:
    """Run ``action(i)`` at each moment (seconds from now, drawn by the scenario)."""
    loop = asyncio.get_running_loop()
    start = loop.time()
    for i, moment in enumerate(sorted(moments)):
        await asyncio.sleep(max(0.0, start + moment - loop.time()))  # the fault's moment
        await action(i)


def spaced(rng: random.Random, count: int, first: float, gap: tuple[float, float]) -> list[float]:
    """``count`` moments: the first within ``first`` s, then gaps drawn from ``gap``."""
    moments = [rng.uniform(0.5, first)]
    for _ in range(count - 1):
        moments.append(moments[-1] + rng.uniform(*gap))
    return moments


async def lease_holder(ctx: Context) -> str | None:
    lease = await retrying(lambda: ctx.api.get("Lease", LEASE_NAME, LEASE_NAMESPACE), "lease")
    holder: str | None = (lease.get("spec") or {}).get("holderIdentity")
    return holder


async def workload_pods(ctx: Context) -> list[dict[str, Any]]:
    listed = await retrying(lambda: ctx.api.list("Pod", NAMESPACE), "listing pods")
    pods: list[dict[str, Any]] = listed["items"]
    return pods


# --- scenarios -----------------------------------------------------------------------------


async def two_schedulers(ctx: Context) -> None:
    """Nothing but the burst: the replicas' flags are the point."""
    await burst(ctx, seconds=ctx.rng.uniform(4, 10))


async def kill_scheduler(ctx: Context) -> None:
    moments = spaced(ctx.rng, ctx.rng.randint(3, 5), 2.0, (1.5, 5.0))
    ctx.say("SIGKILL at +" + ", +".join(f"{m:.1f}" for m in moments) + " s into the burst")

    async def kill(_: int) -> None:
        await faults.kill(ctx.system, ctx.schedulers[0])

    await burst(ctx, at_moments(ctx, moments, kill))


async def paused_in_flight(
    ctx: Context, who: Callable[[], Awaitable[str | None]], attempts: int = 30
) -> tuple[str, list[tuple[str, str, str]]] | None:
    """SIGSTOP the scheduler replica ``who`` names at random moments until it is caught with
    a binding in flight (a claim written for a pod not bound yet; SIGCONT at once when not).
    Returns the replica, left paused, and what it has in flight; None after ``attempts``."""
    for attempt in range(1, attempts + 1):
        await asyncio.sleep(ctx.rng.uniform(0.05, 0.3))  # a random moment of the burst
        name = await who()
        if name not in ctx.schedulers:
            ctx.say(f"attempt {attempt}: no replica to pause ({name!r} leads)")
            continue
        await faults.pause(ctx.system, name)
        caught = await written_for_unbound_pods(ctx)
        if caught:
            for claim, pod, node in caught:
                ctx.say(f"in flight: claim {claim} of unbound pod {pod}, allocated on {node}")
            return name, caught
        await faults.resume(ctx.system, name)
    ctx.say(f"no binding caught in flight in {attempts} attempts")
    return None


async def paused_leader(ctx: Context) -> None:
    """The leader, caught with a binding in flight, is held past its lease, so the other
    replica takes over; then SIGCONT."""
    hold = LEASE_DURATION * ctx.rng.uniform(1.5, 3.0)
    ctx.say(f"the caught pause lasts {hold:.1f} s (lease {LEASE_DURATION:g} s)")

    async def pause_leader() -> None:
        paused = await paused_in_flight(ctx, lambda: lease_holder(ctx))
        if paused is None:
            return
        await asyncio.sleep(hold)  # the fault's duration: past the lease
        ctx.say(f"lease held by {await lease_holder(ctx)} after {hold:.1f} s")
        await faults.resume(ctx.system, paused[0])

    await burst(ctx, pause_leader())


async def written_for_unbound_pods(ctx: Context) -> list[tuple[str, str, str]]:
    """(claim, pod, node) of claims allocated and reserved for a pod that is not bound."""
    claims = await retrying(lambda: ctx.api.list("ResourceClaim", NAMESPACE), "claims")
    pods = {p["metadata"]["uid"]: p for p in await workload_pods(ctx)}
    found = []
    for c in claims["items"]:
        status = c.get("status") or {}
        selector = (status.get("allocation") or {}).get("nodeSelector") or {}
        nodes = [
            v
            for term in selector.get("nodeSelectorTerms") or []
            for f in term.get("matchFields") or []
            for v in f.get("values") or []
        ]
        for ref in status.get("reservedFor") or []:
            pod = pods.get(ref.get("uid"))
            if pod is not None and not pod["spec"].get("nodeName") and nodes:
                found.append((c["metadata"]["name"], pod["metadata"]["name"], nodes[0]))
    return found


async def stranded_claims(ctx: Context) -> None:
    """SIGKILL the scheduler while a claim is between its status write and its bind (caught
    by SIGSTOP first), take the nodes of such claims away (cordon, NotReady or delete), then
    restart it."""
    name = ctx.schedulers[0]
    node_faults = {
        "cordon": faults.cordon,
        "not-ready": faults.mark_not_ready,
        "delete": faults.delete_node,
    }

    # Drawn first: the kinds of node faults depend on the seed alone, not on the timing.
    order = ctx.rng.sample(sorted(node_faults), len(node_faults))
    ctx.say(f"node faults, in this order: {', '.join(order)}")

    async def catch() -> None:
        async def scheduler() -> str:
            return name

        paused = await paused_in_flight(ctx, scheduler)
        if paused is None:
            return
        await faults.kill(ctx.system, name, restart=False)
        for i, node in enumerate(sorted({node for _, _, node in paused[1]})):
            await node_faults[order[i % len(order)]](ctx.system, node)
        faults.restart(ctx.system, name)

    await burst(ctx, catch())


async def controllers_killed(ctx: Context) -> None:
    """Pods come, go (deleted) and finish (Succeeded) while the claim-template controller and
    the reservation cleanup are SIGKILLed and restarted."""
    rng = ctx.rng
    kills = {
        "claim-templates": spaced(rng, rng.randint(2, 3), 4.0, (3.0, 7.0)),
        "reservations": spaced(rng, rng.randint(2, 3), 4.0, (3.0, 7.0)),
    }
    for name, moments in kills.items():
        ctx.say(f"SIGKILL {name} at +" + ", +".join(f"{m:.1f}" for m in moments) + " s")

    def killer(name: str) -> Callable[[int], Awaitable[None]]:
        async def kill(_: int) -> None:
            await faults.kill(ctx.system, name)

        return kill

    async def churn() -> None:
        loop = asyncio.get_running_loop()
        end = loop.time() + ctx.scenario.burst_seconds + 3.0
        while loop.time() < end:
            await asyncio.sleep(rng.uniform(0.5, 2.0))  # pacing the churn
            pods = sorted(await workload_pods(ctx), key=lambda p: p["metadata"]["name"])
            live = [p for p in pods if (p.get("status") or {}).get("phase") == "Pending"]
            bound = [p for p in live if p["spec"].get("nodeName")]
            if rng.random() < 0.5 and live:
                await faults.delete_pods(ctx.system, [rng.choice(live)])
            elif bound:
                await faults.finish_pods(ctx.system, [rng.choice(bound)])

    await burst(
        ctx,
        churn(),
        *(at_moments(ctx, moments, killer(name)) for name, moments in kills.items()),
    )


async def apiserver_restart(ctx: Context) -> None:
    moments = spaced(ctx.rng, ctx.rng.randint(1, 2), 6.0, (8.0, 12.0))
    ctx.say("restarting kube-apiserver at +" + ", +".join(f"{m:.1f}" for m in moments) + " s")

    async def restart(_: int) -> None:
        await faults.restart_apiserver(ctx.system)

    await burst(ctx, at_moments(ctx, moments, restart))


# --- gangs ---------------------------------------------------------------------------------


async def install_gangs(ctx: Context, gangs: int) -> None:
    """A link per gang on a slice every node reaches, its class and template."""
    api = ctx.api
    links = [{"name": f"link-{i}"} for i in range(gangs)]
    await api.create(slice_body("chaos-links", LINK_DRIVER, "", links, pool="links", allNodes=True))
    await api.create(device_class_body(LINK_DRIVER, LINK_DRIVER))
    await api.create(template_body(LINK_TEMPLATE, NAMESPACE, device_class=LINK_DRIVER))


def gang_name(g: int) -> str:
    return f"gang-{g:02d}"


def member_name(g: int, i: int) -> str:
    return f"{gang_name(g)}-{i}"


async def create_group(ctx: Context, g: int) -> None:
    spec: dict[str, Any] = {
        "schedulingPolicy": {"gang": {"minCount": GANG_SIZE}},
        "resourceClaims": [{"name": "link", "resourceClaimTemplateName": LINK_TEMPLATE}],
    }
    if ctx.scenario.racks:
        spec["schedulingConstraints"] = {"topology": [{"key": RACK_KEY}]}
    body = {
        "apiVersion": "scheduling.k8s.io/v1beta1",
        "kind": "PodGroup",
        "metadata": {"name": gang_name(g), "namespace": NAMESPACE},
        "spec": spec,
    }
    with contextlib.suppress(ConflictError):
        await retrying(lambda: ctx.api.create(body), f"creating PodGroup {gang_name(g)}")


async def create_member(ctx: Context, g: int, i: int) -> None:
    body = pod_body(
        member_name(g, i),
        NAMESPACE,
        {"name": "gpu", "resourceClaimTemplateName": TEMPLATE},
        {"name": "link", "resourceClaimTemplateName": LINK_TEMPLATE},
    )
    body["spec"]["schedulingGroup"] = {"podGroupName": gang_name(g)}
    with contextlib.suppress(ConflictError):
        await retrying(lambda: ctx.api.create(body), f"creating pod {member_name(g, i)}")


async def gang_burst(ctx: Context, *during: Coroutine[Any, Any, None]) -> None:
    """The canary, then ``pods // GANG_SIZE`` gangs, their pods one after another at a steady
    pace over the scenario's burst (so a gang waits for its last pods), while ``during`` runs."""
    gangs = ctx.scenario.pods // GANG_SIZE
    await install_gangs(ctx, gangs)
    try:
        await canary(ctx)
    except BaseException:
        for fault in during:
            fault.close()
        raise

    async def paced_gangs() -> None:
        ctx.say(f"gangs: {gangs} of {GANG_SIZE} pods over {ctx.scenario.burst_seconds:.1f} s")
        loop = asyncio.get_running_loop()
        start, total = loop.time(), gangs * GANG_SIZE
        for n in range(total):
            g, i = divmod(n, GANG_SIZE)
            if i == 0:
                await create_group(ctx, g)
            due = start + n * ctx.scenario.burst_seconds / max(1, total - 1)
            await asyncio.sleep(max(0.0, due - loop.time()))  # pacing the load
            await create_member(ctx, g, i)
        ctx.say(f"gangs: all {total} pods created")

    await asyncio.gather(paced_gangs(), *during)


async def partial_gangs(ctx: Context) -> list[str]:
    """Gangs with some pods bound and others not: between two members' bindings."""
    bound: dict[str, int] = {}
    members: dict[str, int] = {}
    for pod in await workload_pods(ctx):
        group = (pod["spec"].get("schedulingGroup") or {}).get("podGroupName")
        if group:
            members[group] = members.get(group, 0) + 1
            bound[group] = bound.get(group, 0) + bool(pod["spec"].get("nodeName"))
    return sorted(g for g, n in bound.items() if 0 < n < members[g])


async def gang_leader_killed(ctx: Context) -> None:
    """The leader caught (SIGSTOP at random moments) with a gang partly bound, then SIGKILL;
    the standby takes over and the killed replica comes back."""

    async def kill_mid_gang() -> None:
        for caught in range(ctx.rng.randint(1, 2)):
            for _attempt in range(1, 61):
                await asyncio.sleep(ctx.rng.uniform(0.05, 0.3))  # a random moment of the burst
                name = await lease_holder(ctx)
                if name not in ctx.schedulers:
                    continue
                await faults.pause(ctx.system, name)
                partial = await partial_gangs(ctx)
                if partial:
                    ctx.say(f"caught {name} between members' bindings of {', '.join(partial)}")
                    await faults.kill(ctx.system, name)
                    break
                await faults.resume(ctx.system, name)
            else:
                ctx.say(f"kill {caught + 1}: no gang caught partly bound in 60 attempts")

    await gang_burst(ctx, kill_mid_gang())


async def rack_node_lost(ctx: Context) -> None:
    """Caught (SIGSTOP at a random moment) with a gang partly bound in its rack, a node of
    that rack is cordoned or marked NotReady (drawn by the seed) before the scheduler goes on:
    the gang's other pods go to that rack's other nodes, or the gang waits whole."""
    node_faults = {"cordon": faults.cordon, "not-ready": faults.mark_not_ready}
    fault = ctx.rng.choice(sorted(node_faults))
    ctx.say(f"node fault: {fault}")

    async def lose_a_node() -> None:
        name = ctx.schedulers[0]
        for _attempt in range(1, 61):
            await asyncio.sleep(ctx.rng.uniform(0.05, 0.3))  # a random moment of the burst
            await faults.pause(ctx.system, name)
            partial = await partial_gangs(ctx)
            if not partial:
                await faults.resume(ctx.system, name)
                continue
            nodes = sorted(
                p["spec"]["nodeName"]
                for p in await workload_pods(ctx)
                if (p["spec"].get("schedulingGroup") or {}).get("podGroupName") == partial[0]
                and p["spec"].get("nodeName")
            )
            ctx.say(f"caught {name} between members' bindings of {partial[0]} (on {nodes[0]})")
            await node_faults[fault](ctx.system, nodes[0])
            await faults.resume(ctx.system, name)
            return
        ctx.say("no gang caught partly bound in 60 attempts")

    await gang_burst(ctx, lose_a_node())


async def gang_member_deleted(ctx: Context) -> None:
    """A pod of a gang that waits for its last pods (fewer than minCount exist) deleted, and
    created again by its owner a moment later (as a Job's controller would), 3-5 times."""
    moments = spaced(ctx.rng, ctx.rng.randint(3, 5), 2.0, (1.0, 3.0))

    async def delete_waiting(_: int) -> None:
        members: dict[str, list[dict[str, Any]]] = {}
        for pod in await workload_pods(ctx):
            group = (pod["spec"].get("schedulingGroup") or {}).get("podGroupName")
            if group:
                members.setdefault(group, []).append(pod)
        waiting = sorted(g for g, pods in members.items() if len(pods) < GANG_SIZE)
        if not waiting:
            ctx.say("no gang waiting for its pods")
            return
        victim = ctx.rng.choice(members[waiting[-1]])
        await faults.delete_pods(ctx.system, [victim])
        g, i = (int(x) for x in victim["metadata"]["name"].removeprefix("gang-").split("-"))
        await asyncio.sleep(ctx.rng.uniform(0.2, 1.5))  # the owner's reaction time
        await create_member(ctx, g, i)
        ctx.say(f"created {member_name(g, i)} again")

    await gang_burst(ctx, at_moments(ctx, moments, delete_waiting))


async def gang_apiserver_restart(ctx: Context) -> None:
    moments = spaced(ctx.rng, ctx.rng.randint(1, 2), 4.0, (5.0, 8.0))
    ctx.say("restarting kube-apiserver at +" + ", +".join(f"{m:.1f}" for m in moments) + " s")

    async def restart(_: int) -> None:
        await faults.restart_apiserver(ctx.system)

    await gang_burst(ctx, at_moments(ctx, moments, restart))


SCENARIOS: Final = {
    s.name: s
    for s in (
        *(
            Scenario(
                f"two-schedulers/{variant}",
                f"two replicas ({' and '.join(' '.join(f) or 'no flag' for f in flags)}) over a "
                "burst of 110 pods",
                two_schedulers,
                schedulers=flags,
            )
            for variant, flags in (
                ("defaults", (DEFAULT, DEFAULT)),
                ("both-elect", (ELECT, ELECT)),
                ("both-single", (SINGLE, SINGLE)),
                ("single-and-default", (SINGLE, DEFAULT)),
                ("single-and-elect", (SINGLE, ELECT)),
                ("elect-and-default", (ELECT, DEFAULT)),
            )
        ),
        Scenario(
            "kill-scheduler",
            "SIGKILL the scheduler 3-5 times during a burst; restart it each time",
            kill_scheduler,
        ),
        Scenario(
            "paused-leader",
            "two --leader-elect replicas; SIGSTOP the leader past its lease during a burst, "
            "then SIGCONT",
            paused_leader,
            schedulers=(ELECT, ELECT),
            burst_seconds=3.0,  # faster than the scheduler: bindings in flight when paused
        ),
        Scenario(
            "stranded-claims",
            "SIGKILL the scheduler with claims written for unbound pods (caught by SIGSTOP); "
            "cordon, NotReady or delete their nodes; restart it",
            stranded_claims,
            # 110 pods for 160 devices: the pods of a lost node fit on the other three.
            devices=40,
            burst_seconds=2.0,  # a backlog: many claims between status write and bind
            seeds=(1, 5, 7),  # the first node fault: cordon, NotReady, delete
        ),
        Scenario(
            "controllers-killed",
            "SIGKILL claim-templates and reservations while pods are created, deleted and finished",
            controllers_killed,
            devices=12,  # 48 devices: pods still wait for the ones that go
            pods=80,
            burst_seconds=20.0,
        ),
        Scenario(
            "apiserver-restart",
            "restart kube-apiserver (same etcd) once or twice during a burst",
            apiserver_restart,
        ),
        # 12 gangs of 8 and the canary on 96 GPUs: 11 gangs fit, the last one is a GPU short.
        Scenario(
            "gang-leader-killed",
            "two --leader-elect replicas; the leader SIGKILLed with a gang partly bound "
            "(caught by SIGSTOP), once or twice",
            gang_leader_killed,
            schedulers=(ELECT, ELECT),
            pods=12 * GANG_SIZE,
            burst_seconds=10.0,
        ),
        Scenario(
            "gang-member-deleted",
            "a pod of a gang still waiting for its pods deleted and created again, 3-5 times",
            gang_member_deleted,
            pods=12 * GANG_SIZE,
            burst_seconds=15.0,
        ),
        # The same gangs, each constrained to one of two racks of two nodes (48 GPUs a rack:
        # six gangs each; the last gang a GPU short).
        Scenario(
            "rack-gang-leader-killed",
            "two --leader-elect replicas; rack-constrained gangs; the leader SIGKILLed with a "
            "gang partly bound in its rack (caught by SIGSTOP), once or twice",
            gang_leader_killed,
            schedulers=(ELECT, ELECT),
            pods=12 * GANG_SIZE,
            burst_seconds=10.0,
            racks=2,
        ),
        Scenario(
            "rack-node-lost",
            "rack-constrained gangs; a node of the rack a gang is being bound in cordoned or "
            "marked NotReady between its members' bindings",
            rack_node_lost,
            pods=12 * GANG_SIZE,
            burst_seconds=10.0,
            racks=2,
            seeds=(1, 5),  # the node fault: cordon, NotReady
        ),
        Scenario(
            "gang-apiserver-restart",
            "restart kube-apiserver (same etcd) once or twice while gangs are placed",
            gang_apiserver_restart,
            pods=12 * GANG_SIZE,
            burst_seconds=12.0,
        ),
    )
}
