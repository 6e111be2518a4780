"""``kopf-dra run claims``: its flags reach the controller they belong to."""

from __future__ import annotations

from operators.controllers.claims.settings import ClaimsSettings


def test_each_controller_gets_its_own_flags_and_the_shared_ones() -> None:
    settings = ClaimsSettings(
        kubeconfig="/k",
        lease_namespace="kopf-dra",
        lease_name="templates",
        workers=2,
        all_pods=True,
        reservation_workers=3,
        reservations_lease_name="reservations",
        metrics_bind_address=":9090",
    )
    templates, reservations = settings.templates(), settings.reservations()
    assert (templates.lease_name, templates.workers, templates.all_pods) == ("templates", 2, True)
    assert (reservations.lease_name, reservations.workers) == ("reservations", 3)
    for part in (templates, reservations):
        assert (part.kubeconfig, part.lease_namespace) == ("/k", "kopf-dra")
        assert part.metrics_bind_address == ""  # the claims process serves the endpoints


def test_by_default_it_holds_the_leases_of_the_separate_components() -> None:
    settings = ClaimsSettings()
    assert settings.templates().lease_name == "kopf-dra-claim-templates"
    assert settings.reservations().lease_name == "kopf-dra-reservations"
