"""Render kustomizations of plain ``resources`` and apply them server-side, like
``kubectl apply --server-side -k``.

kopf-dra's kustomizations use no transformers (no namePrefix, patches, generators), so the
render is "load every listed file, recurse into every listed directory". Anything else in a
kustomization.yaml is refused rather than silently ignored: the render here and kustomize's
must never differ.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, Final

import yaml

from operators.kube.api import KubeAPI, resource_of

KUSTOMIZATION: Final = "kustomization.yaml"
ALLOWED_KEYS: Final = frozenset({"apiVersion", "kind", "resources"})
FIELD_MANAGER: Final = "kopf-dra"


class ManifestError(ValueError):
    """A kustomization this renderer cannot reproduce, or a file that is not a manifest."""


def load_documents(path: Path) -> list[dict[str, Any]]:
    """Every non-empty YAML document of one file."""
    docs = []
    for doc in yaml.safe_load_all(path.read_text()):
        if doc is None:
            continue
        if not isinstance(doc, dict) or "kind" not in doc or "apiVersion" not in doc:
            raise ManifestError(f"{path}: not a Kubernetes object: {str(doc)[:80]!r}")
        docs.append(doc)
    return docs


def render(directory: Path) -> list[dict[str, Any]]:
    """The objects of the kustomization in ``directory``, in its resources' order."""
    directory = directory.resolve()
    kustomization = directory / KUSTOMIZATION
    if not kustomization.is_file():
        raise ManifestError(f"{directory}: no {KUSTOMIZATION}")
    spec = yaml.safe_load(kustomization.read_text()) or {}
    unknown = set(spec) - ALLOWED_KEYS
    if unknown:
        raise ManifestError(f"{kustomization}: unsupported keys {sorted(unknown)}")
    objects: list[dict[str, Any]] = []
    for entry in spec.get("resources") or []:
        target = (directory / entry).resolve()
        if target.is_dir():
            objects.extend(render(target))
        elif target.is_file():
            objects.extend(load_documents(target))
        else:
            raise ManifestError(f"{kustomization}: resource {entry!r} does not exist")
    seen: set[tuple[str, str, str | None]] = set()
    for obj in objects:
        key = (obj["kind"], obj["metadata"]["name"], obj["metadata"].get("namespace"))
        if key in seen:
            raise ManifestError(f"{kustomization}: {key} is listed twice")
        seen.add(key)
    return objects


def load_directory(directory: Path) -> list[dict[str, Any]]:
    """A kustomization if there is one, else every ``*.yaml`` file in name order."""
    if (directory / KUSTOMIZATION).is_file():
        return render(directory)
    docs: list[dict[str, Any]] = []
    for path in sorted(directory.glob("*.yaml")):
        docs.extend(load_documents(path))
    return docs


def apply_order(objects: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Namespaces and CRDs first, workloads last, as kubectl orders them; stable otherwise."""
    first = {"Namespace": 0, "CustomResourceDefinition": 1, "ServiceAccount": 2}
    last = {"Pod": 9, "Deployment": 8, "DaemonSet": 8}
    return sorted(
        (dict(o) for o in objects), key=lambda o: first.get(o["kind"], last.get(o["kind"], 5))
    )


async def apply(
    api: KubeAPI, objects: Iterable[Mapping[str, Any]], *, dry_run: bool = False
) -> list[dict[str, Any]]:
    """Server-side apply each object (created or updated; unchanged objects stay unchanged)."""
    applied = []
    for obj in apply_order(objects):
        meta = obj["metadata"]
        namespace = meta.get("namespace") if resource_of(obj["kind"]).namespaced else None
        if dry_run:
            applied.append(await api.create(obj, dry_run=True))
            continue
        applied.append(
            await api.patch(
                obj["kind"],
                meta["name"],
                obj,
                namespace,
                patch_type="apply",
                field_manager=FIELD_MANAGER,
            )
        )
    return applied
