"""Every kind of write is applied. ``actions.Write`` names the types planning may return, and
``Applier._send`` dispatches on them by type: a type it does not know raises TypeError only at
its first write, in a cluster. Each write goes to its endpoint once, with the timeout the fence
gave, and not at all when the fence refuses; a write's precondition goes with it, and a write
without one (a patch says ``NO_PRECONDITION`` where it takes none) is refused when built."""

from __future__ import annotations

import typing
from typing import Any, cast

import pytest

from operators.api.keys import ObjectKey
from operators.kube.api import KubeAPI
from operators.runtime.actions import (
    NO_PRECONDITION,
    Bind,
    Create,
    Delete,
    Patch,
    Replace,
    ReplaceStatus,
    Write,
)
from operators.runtime.apply import Applier
from operators.runtime.errors import NotLeaderError
from operators.runtime.events import EventRecorder

_META = {"name": "c", "namespace": "ns", "resourceVersion": "7"}
_KEY = ObjectKey("ns", "c")
# One write of each type, and the KubeAPI method it must be sent with.
SAMPLES: dict[type, tuple[Write, str]] = {
    Create: (Create(body={"kind": "ResourceClaim", "metadata": _META}), "create"),
    Replace: (Replace(body={"kind": "ResourceClaim", "metadata": _META}), "replace"),
    ReplaceStatus: (
        ReplaceStatus(body={"kind": "ResourceClaim", "metadata": _META}),
        "replace_status",
    ),
    Patch: (Patch(kind="ResourceClaim", key=_KEY, patch={}, resource_version="7"), "patch"),
    Delete: (Delete(kind="ResourceClaim", key=_KEY, uid="u"), "delete"),
    Bind: (Bind(pod=_KEY, uid="u", node="node-0"), "post_subresource"),
}


class RecordingAPI:
    """The write methods of KubeAPI, each recording its name and request timeout."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, float | None]] = []
        self.arguments: list[tuple[tuple[Any, ...], dict[str, Any]]] = []

    def __getattr__(self, name: str) -> Any:
        if name not in {
            "create",
            "replace",
            "replace_status",
            "patch",
            "delete",
            "post_subresource",
        }:
            raise AttributeError(name)

        async def send(*args: Any, request_timeout: float | None = None, **kw: Any) -> Any:
            self.calls.append((name, request_timeout))
            self.arguments.append((args, kw))
            return {}

        return send


def _applier(api: RecordingAPI, fence: typing.Callable[[], float | None]) -> Applier:
    return Applier(cast(KubeAPI, api), cast(EventRecorder, None), fence)


def test_there_is_a_sample_of_every_write() -> None:
    assert set(SAMPLES) == set(typing.get_args(Write))


@pytest.mark.parametrize("kind", list(SAMPLES), ids=lambda k: k.__name__)
async def test_every_write_is_sent_once_with_the_fences_timeout(kind: type) -> None:
    action, method = SAMPLES[kind]
    api = RecordingAPI()
    await _applier(api, lambda: 7.5).apply(action)
    assert api.calls == [(method, 7.5)]


async def test_a_write_the_fence_refuses_is_not_sent() -> None:
    def fence() -> float | None:
        raise NotLeaderError("lease lost")

    api = RecordingAPI()
    with pytest.raises(NotLeaderError):
        await _applier(api, fence).apply(SAMPLES[Bind][0])
    assert api.calls == []


@pytest.mark.parametrize("missing", [None, ""])
def test_a_patch_or_delete_without_its_precondition_is_refused(missing: Any) -> None:
    with pytest.raises(ValueError, match="NO_PRECONDITION"):
        Patch(kind="Pod", key=_KEY, patch={}, resource_version=missing)
    with pytest.raises(ValueError, match="uid"):
        Delete(kind="Pod", key=_KEY, uid=missing)


@pytest.mark.parametrize("patch_type", ["merge", "strategic", "apply"])
async def test_a_patch_carries_its_resource_version_inline_unless_it_takes_none(
    patch_type: str,
) -> None:
    patch = {"metadata": {"labels": {"a": "b"}}, "status": {"x": 1}}
    api = RecordingAPI()
    applier = _applier(api, lambda: 1.0)
    await applier.apply(
        Patch(kind="Pod", key=_KEY, patch=patch, resource_version="7", patch_type=patch_type)
    )
    await applier.apply(
        Patch(
            kind="Pod",
            key=_KEY,
            patch=patch,
            resource_version=NO_PRECONDITION,
            patch_type=patch_type,
        )
    )
    (conditional, _), (unconditional, _) = api.arguments
    assert conditional[2] == {
        "metadata": {"labels": {"a": "b"}, "resourceVersion": "7"},
        "status": {"x": 1},
    }
    assert unconditional[2] == patch


async def test_a_delete_sends_its_uid_and_version() -> None:
    api = RecordingAPI()
    applier = _applier(api, lambda: 1.0)
    await applier.apply(Delete(kind="Pod", key=_KEY, uid="u"))
    await applier.apply(Delete(kind="Pod", key=_KEY, uid="u", resource_version="7"))
    (_, first), (_, second) = api.arguments
    assert (first["uid"], first["resource_version"]) == ("u", None)
    assert (second["uid"], second["resource_version"]) == ("u", "7")
