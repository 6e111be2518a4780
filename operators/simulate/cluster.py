"""A live cluster's objects of every kind the scheduler reads, for an answer from it.

``simulate --from-cluster`` needs all of them: an answer from part of a cluster would look
complete, so a refused list is bad input there. ``kubectl dra why`` answers a user who may
read only their own namespace: given ``namespace``, a namespaced kind the user may not list
cluster-wide is read in that namespace, a kind refused altogether is left out, and every
refusal is kept so that the answer says what it could not see.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from operators.api.features import KubernetesVersion
from operators.kube.api import ApiError, KubeAPI, NotFoundError
from operators.simulate.snapshot import KINDS, Document, InputError, Source

FORBIDDEN = 403


@dataclasses.dataclass(frozen=True)
class Refusal:
    """A read the API server refused (403): the verb, the resource and where."""

    verb: str
    resource: str
    namespace: str | None = None
    message: str = ""

    def __str__(self) -> str:
        where = f"in namespace {self.namespace}" if self.namespace else "cluster-wide"
        return f"{self.verb} {self.resource} {where}"


def is_forbidden(error: ApiError) -> bool:
    return error.status == FORBIDDEN


@dataclasses.dataclass
class ClusterRead:
    documents: list[Document]
    version: KubernetesVersion
    refused: list[Refusal] = dataclasses.field(default_factory=list)


class Reader:
    """Reads through ``api``, keeping what the API server refused (403) instead of failing,
    so that a caller can answer from what it could read and say what it could not."""

    def __init__(self, api: KubeAPI) -> None:
        self.api = api
        self.refused: list[Refusal] = []

    async def items(
        self,
        kind: str,
        namespace: str | None = None,
        *,
        field_selector: str | None = None,
        label_selector: str | None = None,
    ) -> list[dict[str, Any]] | None:
        """The kind's objects (see ``items_of``); [] where the cluster does not serve it (a
        DeviceTaintRule, a PodGroup where its gates are off); None where listing was refused."""
        try:
            if namespace is None and field_selector is None and label_selector is None:
                listing = await self.api.list(kind)
            else:
                listing = await self.api.list(
                    kind, namespace, field_selector=field_selector, label_selector=label_selector
                )
        except NotFoundError:
            return []
        except ApiError as e:
            if not is_forbidden(e):
                raise
            self.refused.append(
                Refusal("list", self.api.resource(kind).plural, namespace, e.message)
            )
            return None
        return items_of(listing, kind)


async def read_cluster(api: KubeAPI, *, namespace: str | None = None) -> ClusterRead:
    """Every kind of ``KINDS``; see the module docstring for ``namespace``. Sets
    ``api.release`` to the cluster's."""
    try:
        version = KubernetesVersion.from_version_info(await api.version_info())
    except (ApiError, ValueError) as e:
        raise InputError(f"cluster: /version: {e}") from None
    api.release = version.release  # DeviceTaintRules from v1 on 1.37, v1beta2 on 1.36
    reader = Reader(api)
    read = ClusterRead([], version, reader.refused)
    for kind in KINDS.values():
        try:
            items = await reader.items(kind.name)
            if items is None and namespace is None:
                refusal = reader.refused[-1]
                raise InputError(f"cluster: {refusal} is forbidden: {refusal.message}")
            if items is None and kind.namespaced:
                items = await reader.items(kind.name, namespace)
        except ApiError as e:
            raise InputError(f"cluster: listing {kind.name}: {e}") from None
        read.documents += [Document(Source("cluster"), i) for i in items or []]
    return read


def items_of(listing: dict[str, Any], kind: str) -> list[dict[str, Any]]:
    """A List's items as ``kubectl get -o yaml`` shows them: with apiVersion and kind, without
    managedFields."""
    items: list[dict[str, Any]] = listing.get("items") or []
    for item in items:
        item.setdefault("apiVersion", listing.get("apiVersion"))
        item.setdefault("kind", kind)
        (item.get("metadata") or {}).pop("managedFields", None)
    return items
