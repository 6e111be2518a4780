"""Reservation cleanup (KEP-4381): stale reservedFor entries, deallocation, generated claims."""
