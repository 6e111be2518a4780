"""Extended resources backed by DRA (KEP-5004), the pure part: names, the class mapping, the
special claim's requests and the containers' mappings, as kube-scheduler builds them."""

from __future__ import annotations

from typing import Any

import pytest

from operators.api.core import Node, Pod
from operators.api.resource import DeviceClass
from operators.scheduling.extended import (
    IMPLICIT_PREFIX,
    MAX_GENERATE_NAME_BASE,
    class_mapping,
    extended_resources,
    final_name,
    is_dra_extended_resource_name,
    is_extended_resource_name,
    requests_and_mappings,
)
from operators.scheduling.nodes import pod_requests

GPU = "example.com/gpu"


def device_class(
    name: str, extended: str | None = None, created: str = "2026-01-01T00:00:00Z"
) -> DeviceClass:
    spec: dict[str, Any] = {"extendedResourceName": extended} if extended else {}
    return DeviceClass.load(
        {"metadata": {"name": name, "creationTimestamp": created}, "spec": spec}
    )


def container(name: str, gpus: int | None, restart: str | None = None) -> dict[str, Any]:
    body: dict[str, Any] = {"name": name, "resources": {"requests": {"cpu": "1"}}}
    if gpus is not None:
        body["resources"]["requests"][GPU] = str(gpus)
    if restart:
        body["restartPolicy"] = restart
    return body


def pod(containers: list[dict[str, Any]], inits: list[dict[str, Any]] | None = None) -> Pod:
    return Pod.load(
        {
            "metadata": {"name": "p", "namespace": "ns", "uid": "u"},
            "spec": {"containers": containers, "initContainers": inits or []},
        }
    )


@pytest.mark.parametrize(
    ("name", "extended"),
    [
        ("example.com/gpu", True),
        ("cpu", False),
        ("hugepages-2Mi", False),
        ("kubernetes.io/batch-cpu", False),
        ("requests.example.com/gpu", False),
        (IMPLICIT_PREFIX + "gpu", False),
    ],
)
def test_extended_resource_names_as_core_v1_says(name: str, extended: bool) -> None:
    assert is_extended_resource_name(name) is extended
    assert is_dra_extended_resource_name(name) is (extended or name.startswith(IMPLICIT_PREFIX))


def test_every_class_answers_to_its_implicit_name_and_the_newest_wins_an_explicit_one() -> None:
    mapping = class_mapping(
        [
            device_class("old", GPU, "2026-01-01T00:00:00Z"),
            device_class("new", GPU, "2026-02-01T00:00:00Z"),
            device_class("b-tie", "example.com/nic", "2026-01-01T00:00:00Z"),
            device_class("a-tie", "example.com/nic", "2026-01-01T00:00:00Z"),
        ]
    )
    assert mapping[GPU] == "new"
    assert mapping["example.com/nic"] == "a-tie"
    assert mapping[IMPLICIT_PREFIX + "old"] == "old"


def test_each_long_lived_container_gets_its_own_request() -> None:
    requests, mappings = requests_and_mappings(
        pod([container("a", 1), container("b", None), container("c", 2)]), [GPU], {GPU: "gpus"}
    )
    # Request index: GPU is second in each container's sorted request names (after cpu).
    assert [(r["name"], r["exactly"]["count"]) for r in requests] == [
        ("container-0-request-1", 1),
        ("container-2-request-1", 2),
    ]
    assert [(m.container_name, m.request_name) for m in mappings] == [
        ("a", "container-0-request-1"),
        ("c", "container-2-request-1"),
    ]


def test_init_containers_reuse_later_requests_and_share_the_largest_of_their_own() -> None:
    inits = [container("i0", 3), container("i1", 1), container("side", 1, "Always")]
    requests, mappings = requests_and_mappings(
        pod([container("main", 1)], inits), [GPU], {GPU: "gpus"}
    )
    # i0 needs 3: the sidecar's (1) and main's (1) requests, and one more of its own; i1 is
    # covered by the sidecar's. The short-lived containers' largest own request serves them.
    assert [(r["name"], r["exactly"]["count"]) for r in requests] == [
        ("container-0-request-1", 1),
        ("container-2-request-1", 1),
        ("container-3-request-1", 1),
    ]
    assert sorted((m.container_name, m.request_name) for m in mappings) == [
        ("i0", "container-0-request-1"),
        ("i0", "container-2-request-1"),
        ("i0", "container-3-request-1"),
        ("i1", "container-2-request-1"),
        ("main", "container-3-request-1"),
        ("side", "container-2-request-1"),
    ]


def test_a_node_that_advertises_the_resource_needs_no_special_claim() -> None:
    wanted = pod([container("a", 1)])
    extended = extended_resources(wanted, {GPU: "gpus"}, pod_requests(wanted))
    assert extended is not None
    plugin = Node.load({"metadata": {"name": "n"}, "status": {"allocatable": {GPU: "4"}}})
    bare = Node.load({"metadata": {"name": "m"}, "status": {"allocatable": {GPU: "0"}}})
    assert extended.for_node(plugin) is None
    claim = extended.for_node(bare)
    assert claim is not None
    assert claim.claim.metadata.generate_name == "p-extended-resources-"
    assert claim.status_patch(claim.named("p-extended-resources-abcde")) == {
        "requestMappings": [
            {"containerName": "a", "resourceName": GPU, "requestName": "container-0-request-1"}
        ],
        "resourceClaimName": "p-extended-resources-abcde",
    }
    assert extended_resources(wanted, {}, pod_requests(wanted)) is None


def test_a_generated_name_is_cut_as_the_api_server_cuts_it() -> None:
    name = final_name("x" * 70 + "-extended-resources-", lambda n: 0)
    assert name == "x" * MAX_GENERATE_NAME_BASE + "bbbbb"
    assert len(name) == 63
