"""Both claim controllers behind one pod watch and one claim watch, as kube-controller-manager's
single resourceclaim controller has them.

Separately, each process decodes every pod and claim event; here one informer per kind
(``runtime.informer``, past kopf's per-event dispatch) feeds both controllers' stores. Each
controller keeps its queue, its Lease and its writes, so this process and the separate
``claim-templates`` and ``reservations`` ones can replace each other (the Leases are the
same, so never two write at once).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import kopf

from operators.controllers.claim_templates.handlers import ClaimTemplateController
from operators.controllers.claims.settings import ClaimsSettings
from operators.controllers.reservations.handlers import ReservationController
from operators.runtime import memory
from operators.runtime.clock import SYSTEM_CLOCK, Clock
from operators.runtime.controller import register_lifecycle
from operators.runtime.informer import EventFeed, Feeds
from operators.runtime.serving import Endpoints, Server
from operators.settings import SettingsError

COMPONENT = "claims"


class ClaimsController:
    """The two controllers, their shared event handlers, and this process's endpoints."""

    def __init__(self, settings: ClaimsSettings, *, clock: Clock = SYSTEM_CLOCK) -> None:
        self.settings = settings
        self.templates = ClaimTemplateController(settings.templates(), clock=clock)
        self.reservations = ReservationController(settings.reservations(), clock=clock)
        self.server = Server(settings, self.endpoints())
        self.feeds = self._feeds()
        self._feeding = False

    def endpoints(self) -> Endpoints:
        """Both controllers' metrics and checks (names prefixed by their component)."""
        parts = [c.endpoints() for c in (self.templates, self.reservations)]
        registries = list(dict.fromkeys(r for p in parts for r in p.registries))
        components = (self.templates.component, self.reservations.component)
        return Endpoints(
            registries,
            liveness={
                f"{c}-{name}": check
                for c, p in zip(components, parts, strict=True)
                for name, check in p.liveness.items()
            },
            readiness={
                f"{c}-{name}": check
                for c, p in zip(components, parts, strict=True)
                for name, check in p.readiness.items()
            },
        )

    def register(self, registry: kopf.OperatorRegistry) -> None:
        register_lifecycle(registry, self)

    def _feeds(self) -> Feeds:
        """One informer per kind, feeding both controllers."""
        templates, reservations = self.templates, self.reservations

        def on_pod(kw: Mapping[str, Any]) -> None:
            templates.on_pod(kw)
            reservations.on_pod(kw)

        def on_claim(kw: Mapping[str, Any]) -> None:
            templates.on_claim(kw)
            reservations.on_claim(kw)

        feeds: dict[str, EventFeed] = {
            "Pod": on_pod,
            "ResourceClaim": on_claim,
            "ResourceClaimTemplate": templates.on_template,
        }
        # 1.37's PodGroup claims: both watch PodGroups (their settings share the gates).
        if templates.group_claims:

            def on_podgroup(kw: Mapping[str, Any]) -> None:
                templates.on_podgroup(kw)
                reservations.on_podgroup(kw)

            feeds["PodGroup"] = on_podgroup
        return Feeds(feeds)

    async def start(self) -> None:
        """Probes first; each controller's start is idempotent, so kopf may retry this."""
        try:
            await self.server.start()
        except SettingsError as e:
            raise kopf.PermanentError(str(e)) from None
        await self.templates.start()
        await self.reservations.start()
        if not self._feeding:
            await self.feeds.start(self.templates.api)
            self._feeding = True
            memory.listed()

    async def stop(self) -> None:
        """Never raises (each controller's stop does not)."""
        await self.feeds.stop()
        await self.reservations.stop()
        await self.templates.stop()
        await self.server.stop()
