"""Every KEP example in tests/fixtures (rewritten for 1.36) is accepted by the real API server,
and nothing we send is silently dropped (e.g. by a feature gate that is off); invalid objects are
rejected with the field named."""

from __future__ import annotations

import copy
import dataclasses
import uuid
from typing import Any

import pytest
from kubernetes_asyncio import client

from operators.api.resource import KINDS, ResourceClaim
from operators.kube.api import InvalidError, KubeAPI, resource_of
from tests.fixtures import documents

DOCUMENTS = documents()


def missing_fields(sent: Any, returned: Any, path: str = "") -> list[str]:
    """Paths of ``sent`` that the server did not return (defaults it adds are fine)."""
    if isinstance(sent, dict):
        if not isinstance(returned, dict):
            return [path or "."]
        problems = []
        for key, value in sent.items():
            if key not in returned:
                problems.append(f"{path}.{key}")
            else:
                problems.extend(missing_fields(value, returned[key], f"{path}.{key}"))
        return problems
    if isinstance(sent, list):
        if not isinstance(returned, list):
            return [path]
        if len(sent) == len(returned):
            return [
                p
                for i, (s, r) in enumerate(zip(sent, returned, strict=True))
                for p in missing_fields(s, r, f"{path}[{i}]")
            ]
        # Admission plugins may add entries (tolerations); each sent one must still be there.
        return [
            f"{path}[{i}]"
            for i, s in enumerate(sent)
            if not any(missing_fields(s, r) == [] for r in returned)
        ]
    return [] if sent == returned or str(sent) == str(returned) else [f"{path}={sent!r}"]


def _placed(doc: dict[str, Any], namespace: str) -> dict[str, Any]:
    """The document in the test namespace, cluster-scoped names made unique per run."""
    obj = copy.deepcopy(doc)
    meta = obj.setdefault("metadata", {})
    if resource_of(obj["kind"]).namespaced:
        meta["namespace"] = namespace
        if obj["kind"] == "Event":
            obj.get("involvedObject", {})["namespace"] = namespace
    else:
        meta["name"] = f"{meta['name']}-{uuid.uuid4().hex[:6]}"
    return obj


@pytest.mark.parametrize(("name", "doc"), DOCUMENTS, ids=[n for n, _ in DOCUMENTS])
async def test_server_accepts_fixture_and_keeps_every_field(
    api: client.ApiClient, namespace: str, name: str, doc: dict[str, Any]
) -> None:
    kube = KubeAPI(api)
    obj = _placed(doc, namespace)
    status = obj.pop("status", None) if obj["kind"] == "ResourceClaim" else None
    created = await kube.create(obj)
    meta = created["metadata"]
    # Read back in the version it was sent in: a 1.37 server reads DeviceTaintRule in v1.
    where = dataclasses.replace(kube.resource(obj["kind"]), group_version=obj["apiVersion"])
    fetched = await kube.call("GET", where.path(meta.get("namespace"), meta["name"]))
    sent = {k: v for k, v in obj.items() if k not in ("metadata", "status")}
    assert missing_fields(sent, fetched) == []
    if obj["kind"] in KINDS:
        # What the server returns parses into our models and dumps back unchanged.
        assert KINDS[obj["kind"]].load(fetched).dump() == fetched
    if status is not None:
        fetched["status"] = status
        updated = await kube.replace_status(fetched)
        assert missing_fields({"status": status}, updated) == []
        assert ResourceClaim.load(updated).dump() == updated
    await kube.delete(obj["kind"], meta["name"], meta.get("namespace"))


async def test_server_rejects_slice_with_too_many_devices(
    api: client.ApiClient,
) -> None:
    kube = KubeAPI(api)
    devices = [{"name": f"dev-{i}"} for i in range(129)]
    slice_ = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": f"too-many-{uuid.uuid4().hex[:6]}"},
        "spec": {
            "driver": "gpu.example.com",
            "nodeName": "node-1",
            "pool": {"name": "p", "generation": 1, "resourceSliceCount": 1},
            "devices": devices,
        },
    }
    with pytest.raises(InvalidError) as info:
        await kube.create(slice_)
    assert info.value.status == 422
    assert any(c.get("field") == "spec.devices" for c in info.value.causes), info.value.causes
