"""Every kind of write is applied. ``actions.Write`` names the types planning may return, and
``Applier._send`` dispatches on them by type: a type it does not know raises TypeError only at
its first write, in a cluster. Each write goes to its endpoint once, with the timeout the fence
gave, and not at all when the fence refuses."""

from __future__ import annotations

import typing
from typing import Any, cast

import pytest

from operators.api.keys import ObjectKey
from operators.kube.api import KubeAPI
from operators.runtime.actions import Bind, Create, Delete, Patch, Replace, ReplaceStatus, Write
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
