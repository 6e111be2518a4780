"""What the driver's identity may write, checked before it serves anything.

Since Kubernetes 1.36 (DRAResourceClaimGranularStatusAuthorization) a write of a claim's
``status.devices`` is authorized per driver on the synthetic subresource
``resourceclaims/driver`` (resource name: the driver), with a verb that says where the claim
is: ``associated-node:<verb>`` for a claim allocated on the node the caller's pod-bound token
names, ``arbitrary-node:<verb>`` for any claim. A node's driver needs only the first; holding
the second, a compromised node could rewrite the device status of every other node's claims.
So the driver asks the API server (SelfSubjectAccessReview) and refuses to start when it holds
an ``arbitrary-node`` verb, unless told it may (a development run with an admin kubeconfig).

The review is cluster-wide (namespace ""): a grant in a RoleBinding of one namespace is not
seen by it.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Final

from operators.kube.api import KubeAPI

GROUP: Final = "resource.k8s.io"
STATUS_VERBS: Final = ("patch", "update")
ARBITRARY_NODE: Final = "arbitrary-node:"
ASSOCIATED_NODE: Final = "associated-node:"
REVIEWS: Final = "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews"


class IdentityError(Exception):
    """The driver's identity may write more than its own node's claims."""


@dataclasses.dataclass(frozen=True)
class StatusRights:
    """Which node-scoped status verbs the identity holds for one driver name."""

    driver: str
    arbitrary_node: tuple[str, ...]
    associated_node: tuple[str, ...]

    def problem(self) -> str | None:
        """Why this identity must not run a node's driver, or None."""
        if not self.arbitrary_node:
            return None
        return (
            f"this identity may write the device status of claims on any node "
            f"(resourceclaims/driver {', '.join(self.arbitrary_node)} for driver "
            f"{self.driver}): a node's driver needs only the associated-node: verbs. Give it "
            "the manifests' ServiceAccount (a pod-bound token), or start it with "
            "--allow-arbitrary-node-status (development only)"
        )

    def warning(self) -> str | None:
        """A gap that does not stop the driver (device status is informational), or None."""
        missing = [v for v in STATUS_VERBS if ASSOCIATED_NODE + v not in self.associated_node]
        if not missing or self.arbitrary_node:
            return None
        verbs = ", ".join(ASSOCIATED_NODE + v for v in missing)
        return (
            f"no resourceclaims/driver {verbs} for driver {self.driver}: the device status of "
            "this node's claims cannot be written"
        )


def _review(verb: str, driver: str) -> dict[str, Any]:
    return {
        "apiVersion": "authorization.k8s.io/v1",
        "kind": "SelfSubjectAccessReview",
        "spec": {
            "resourceAttributes": {
                "group": GROUP,
                "resource": "resourceclaims",
                "subresource": "driver",
                "name": driver,
                "verb": verb,
            }
        },
    }


async def _allowed(api: KubeAPI, verb: str, driver: str) -> bool:
    answer = await api.call("POST", REVIEWS, body=_review(verb, driver))
    return bool(((answer or {}).get("status") or {}).get("allowed"))


async def status_rights(api: KubeAPI, driver: str) -> StatusRights:
    """Ask the API server which node-scoped status verbs this identity holds for ``driver``."""
    arbitrary = [v for v in STATUS_VERBS if await _allowed(api, ARBITRARY_NODE + v, driver)]
    associated = [v for v in STATUS_VERBS if await _allowed(api, ASSOCIATED_NODE + v, driver)]
    return StatusRights(
        driver,
        tuple(ARBITRARY_NODE + v for v in arbitrary),
        tuple(ASSOCIATED_NODE + v for v in associated),
    )
