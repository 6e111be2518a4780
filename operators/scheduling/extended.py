"""Extended resources backed by DRA (KEP-5004): a container's ``example.com/gpu: 1`` served by
devices of a DeviceClass on nodes where no device plugin advertises the resource.

Pure, for the scheduler and ``simulate`` alike, and in kube-scheduler's terms:

- every DeviceClass answers to ``deviceclass.resource.kubernetes.io/<class>``, and to its
  ``spec.extendedResourceName`` when set; two classes naming the same resource: the newer one
  wins, then the lower name (``class_mapping``, as ``extendedresourcecache``);
- on a node whose allocatable lacks the resource (or has 0 of it), the request is delegated
  to DRA: NodeResourcesFit skips it (``delegated``), and the pod's one special claim gets a
  device request per container for it (``ExtendedResources.for_node``), with upstream's
  request names ``container-<i>-request-<j>`` and its reuse of long-lived containers' requests
  by init containers; elsewhere the node's allocatable must cover it as for any resource;
- the special claim: generateName ``<pod>-extended-resources-``, the annotation
  ``resource.kubernetes.io/extended-resource-claim: "true"``, controlled by the pod;
  ``pod.status.extendedResourceClaimStatus`` maps container and resource to its requests.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from operators.api.core import (
    Container,
    ContainerExtendedResourceRequest,
    Node,
    Pod,
    PodExtendedResourceClaimStatus,
)
from operators.api.names import EXTENDED_RESOURCE_CLAIM_ANNOTATION
from operators.api.resource import API_VERSION, DeviceClass, ResourceClaim
from operators.api.timestamps import parse_time

IMPLICIT_PREFIX = "deviceclass.resource.kubernetes.io/"
# The claim's name until it is written: not a valid name, so it meets no real claim.
IN_MEMORY_NAME = "<extended-resources>"
MAX_GENERATE_NAME_BASE = 58  # the API server's: 63 minus 5 random characters
_RANDOM_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"  # apimachinery's utilrand alphabet


def is_extended_resource_name(name: str) -> bool:
    """core/v1 helper IsExtendedResourceName: a domain-prefixed name outside kubernetes.io
    that is not a quota ``requests.`` name."""
    if "/" not in name or "kubernetes.io/" in name or name.startswith("requests."):
        return False
    prefix, _, rest = name.partition("/")
    return bool(prefix) and bool(rest) and "/" not in rest and len(rest) <= 63


def is_dra_extended_resource_name(name: str) -> bool:
    """An extended resource name, or a class's implicit one."""
    return is_extended_resource_name(name) or name.startswith(IMPLICIT_PREFIX)


def class_mapping(classes: Iterable[DeviceClass]) -> dict[str, str]:
    """Resource name -> DeviceClass name, for every class (implicit and explicit names)."""
    mapping: dict[str, str] = {}
    winners: dict[str, tuple[float, str]] = {}  # explicit name -> (-created, class name)
    for device_class in classes:
        name = device_class.metadata.name or ""
        mapping[IMPLICIT_PREFIX + name] = name
        explicit = device_class.spec.extended_resource_name
        if not explicit:
            continue
        created = parse_time(device_class.metadata.creation_timestamp)
        rank = (-(created.timestamp() if created is not None else 0.0), name)
        if explicit not in winners or rank < winners[explicit]:
            winners[explicit] = rank
    for explicit, (_, name) in winners.items():
        mapping[explicit] = name
    return mapping


def _container_requests(container: Container) -> dict[str, int]:
    """A container's requests of extended resources (whole numbers, by API validation; the
    API server has defaulted them from the limits, as ``simulate`` does for its files)."""
    if container.resources is None:
        return {}
    return {
        name: int(q.value)
        for name, q in container.resources.requests.items()
        if is_dra_extended_resource_name(name)
    }


def _request_names(container: Container) -> list[str]:
    """The container's request names, sorted: a resource's index names its device request."""
    return sorted(container.resources.requests) if container.resources is not None else []


def is_special_claim(claim: ResourceClaim, pod: Pod) -> bool:
    """The pod's extended-resource claim: annotated and controlled by the pod."""
    return special_claim_of(claim, pod.metadata.uid or "", pod.metadata.name)


def special_claim_of(claim: ResourceClaim, uid: str, name: str | None = None) -> bool:
    """The claim is the special claim of the pod with ``uid`` (and ``name``, if given)."""
    if claim.metadata.annotations.get(EXTENDED_RESOURCE_CLAIM_ANNOTATION) != "true":
        return False
    return any(
        ref.controller and ref.uid == uid and (name is None or ref.name == name)
        for ref in claim.metadata.owner_references
    )


def find_special_claim(pod: Pod, claims: Iterable[ResourceClaim]) -> ResourceClaim | None:
    return next((c for c in claims if is_special_claim(c, pod)), None)


def _mapping(container: str, resource: str, request: str) -> ContainerExtendedResourceRequest:
    return ContainerExtendedResourceRequest(
        container_name=container, resource_name=resource, request_name=request
    )


@dataclasses.dataclass(frozen=True)
class ExtendedClaim:
    """The special claim a node needs for the pod, and which request serves which container."""

    claim: ResourceClaim
    mappings: tuple[ContainerExtendedResourceRequest, ...]

    def named(self, name: str) -> ResourceClaim:
        """The claim as it will be created, under its final name."""
        body = self.claim.dump()
        body["metadata"]["name"] = name
        return ResourceClaim.load(body)

    def status_patch(self, claim: ResourceClaim) -> dict[str, Any]:
        """``pod.status.extendedResourceClaimStatus`` for the claim as created."""
        status = PodExtendedResourceClaimStatus(
            request_mappings=list(self.mappings), resource_claim_name=claim.metadata.name
        )
        return status.dump()


def final_name(generate_name: str, random: Callable[[int], int]) -> str:
    """A name as the API server would generate it from ``generate_name`` (``random(n)``: a
    number below n). The scheduler names the claim itself: its in-flight ledger holds the
    claim by name before the create, and a create whose answer was lost finds it again."""
    base = generate_name[:MAX_GENERATE_NAME_BASE]
    return base + "".join(_RANDOM_ALPHABET[random(len(_RANDOM_ALPHABET))] for _ in range(5))


def _device_request(name: str, device_class: str, count: int) -> dict[str, Any]:
    return {
        "name": name,
        "exactly": {
            "deviceClassName": device_class,
            "allocationMode": "ExactCount",
            "count": count,
        },
    }


def requests_and_mappings(
    pod: Pod, resources: Iterable[str], mapping: Mapping[str, str]
) -> tuple[list[dict[str, Any]], list[ContainerExtendedResourceRequest]]:
    """The device requests and mappings for the pod's ``resources`` delegated to DRA.

    Long-lived containers (regular ones and sidecars) each get their own request; a
    short-lived init container first reuses the requests of long-lived containers after it
    (they are not running yet), asks for the rest itself, and all short-lived ones share the
    largest such request (they run one at a time). Requests are sorted by name.
    """
    containers = [*pod.spec.init_containers, *pod.spec.containers]
    inits = len(pod.spec.init_containers)
    short = [i for i, c in enumerate(containers) if i < inits and c.restart_policy != "Always"]
    long_lived = [i for i in range(len(containers)) if i not in short]
    requests: list[dict[str, Any]] = []
    mappings: list[ContainerExtendedResourceRequest] = []
    for resource in sorted(resources):
        device_class = mapping.get(resource)
        if device_class is None:
            continue
        per_container: list[dict[str, Any] | None] = [None] * len(containers)
        long_mappings: list[ContainerExtendedResourceRequest] = []
        for i in long_lived:
            request, found = _container_request(i, containers[i], resource, device_class, [])
            per_container[i] = request
            long_mappings.extend(found)
        largest: dict[str, Any] | None = None
        short_names: set[str] = set()
        short_mappings: list[ContainerExtendedResourceRequest] = []
        for i in short:
            request, found = _container_request(
                i, containers[i], resource, device_class, per_container[i:]
            )
            if request is not None:
                short_names.add(request["name"])
                if largest is None or largest["exactly"]["count"] < request["exactly"]["count"]:
                    largest = request
            short_mappings.extend(found)
        if largest is not None and len(short_names) > 1:
            short_mappings = [
                m.model_copy(update={"request_name": largest["name"]})
                if m.request_name in short_names
                else m
                for m in short_mappings
            ]
        if largest is not None:
            requests.append(largest)
        requests.extend(r for r in per_container if r is not None)
        mappings.extend(long_mappings)
        mappings.extend(short_mappings)
    requests.sort(key=lambda r: str(r["name"]))
    return requests, mappings


def _container_request(
    index: int,
    container: Container,
    resource: str,
    device_class: str,
    reusable: Sequence[dict[str, Any] | None],
) -> tuple[dict[str, Any] | None, list[ContainerExtendedResourceRequest]]:
    """One container's request for ``resource`` (None: it needs none of its own)."""
    wanted = _container_requests(container).get(resource, 0)
    if wanted <= 0:
        return None, []
    name = container.name or ""
    mappings: list[ContainerExtendedResourceRequest] = []
    covered = 0
    for request in reusable:
        if request is None:
            continue
        covered += request["exactly"]["count"]
        mappings.append(_mapping(name, resource, request["name"]))
        if covered >= wanted:
            return None, mappings
    position = _request_names(container).index(resource)
    request_name = f"container-{index}-request-{position}"
    mappings.append(_mapping(name, resource, request_name))
    return _device_request(request_name, device_class, wanted - covered), mappings


def _node_lacks(node: Node, resource: str) -> bool:
    have = node.status.allocatable.get(resource)
    return have is None or have.value == 0


@dataclasses.dataclass(frozen=True)
class ExtendedResources:
    """What a pod asks of extended resources that DeviceClasses back, for one cycle.

    ``backed``: the pod's requested resources with a class (resource -> class name), and
    ``existing``: its special claim from an earlier attempt, if there is one.
    """

    pod: Pod
    backed: Mapping[str, str]
    existing: ResourceClaim | None = None

    def delegated(self, node: Node) -> list[str]:
        """The resources DRA serves on ``node``: backed, and not in its allocatable."""
        return sorted(r for r in self.backed if _node_lacks(node, r))

    @property
    def reusable(self) -> bool:
        """The claim of an earlier attempt can be used as it is: allocated and reserved for
        the pod (its binding cycle was cut short, or waits for binding conditions). Any other
        is stale, and deleted before the pod is tried again."""
        claim = self.existing
        return (
            claim is not None
            and claim.is_allocated
            and claim.is_reserved_for(self.pod.metadata.uid or "")
            and not claim.is_deleting
        )

    def for_node(self, node: Node) -> ExtendedClaim | None:
        """The special claim ``node`` needs (None: device plugins serve everything there)."""
        resources = self.delegated(node)
        if not resources:
            return None
        requests, mappings = requests_and_mappings(self.pod, resources, self.backed)
        return ExtendedClaim(special_claim(self.pod, requests), tuple(mappings))


def makes_claim(extended: ExtendedResources | None) -> bool:
    """This attempt allocates a new special claim (the pod asks for backed resources and no
    claim of an earlier attempt is used): the scheduler, preemption and simulate agree."""
    return extended is not None and extended.existing is None


def new_claim(extended: ExtendedResources | None, node: Node) -> ExtendedClaim | None:
    """The new special claim to allocate on ``node`` with the pod's claims, if any."""
    if extended is None or extended.existing is not None:
        return None
    return extended.for_node(node)


def delegated(extended: ExtendedResources | None, node: Node) -> list[str]:
    """The pod's resources that DRA serves on ``node`` (NodeResourcesFit leaves them)."""
    return extended.delegated(node) if extended is not None else []


def special_claim(pod: Pod, requests: list[dict[str, Any]]) -> ResourceClaim:
    """The special claim, in memory (named ``IN_MEMORY_NAME`` until it is created)."""
    name = pod.metadata.name or ""
    return ResourceClaim.load(
        {
            "apiVersion": API_VERSION,
            "kind": "ResourceClaim",
            "metadata": {
                "name": IN_MEMORY_NAME,
                "namespace": pod.metadata.namespace,
                "generateName": f"{name}-extended-resources-",
                "annotations": {EXTENDED_RESOURCE_CLAIM_ANNOTATION: "true"},
                "ownerReferences": [
                    {
                        "apiVersion": "v1",
                        "kind": "Pod",
                        "name": name,
                        "uid": pod.metadata.uid,
                        "controller": True,
                    }
                ],
            },
            "spec": {"devices": {"requests": requests}},
        }
    )


def extended_resources(
    pod: Pod,
    mapping: Mapping[str, str],
    requests: Mapping[str, Any],
    existing: ResourceClaim | None = None,
) -> ExtendedResources | None:
    """The pod's extended resources backed by DRA (None: it asks for none). ``requests``:
    the pod's effective requests (``nodes.pod_requests``); ``existing``: its special claim
    from an earlier attempt (``find_special_claim``)."""
    backed = {
        name: mapping[name]
        for name, amount in requests.items()
        if amount and is_dra_extended_resource_name(name) and name in mapping
    }
    if not backed:
        return None
    return ExtendedResources(pod, backed, existing)
