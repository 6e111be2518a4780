"""Structured-parameters allocator (pure): pools, candidates, counters, capacity, search.

Usage, once per scheduling cycle::

    state = AllocatedState.from_claims(allocated_and_in_flight_claims, features)
    allocator = Allocator(features, state, classes, slices, cel_engine, share_ids=uuid_source)
    outcome = allocator.allocate(node, claims_of_pod)   # per node
    outcome.status  # SUCCESS (outcome.results), UNSATISFIABLE (outcome.reasons), ERROR

``allocate`` raises InvalidInputError (and subclasses) only for bad claims or classes, and
OutOfTimeError once the caller's ``out_of_time`` says so.
"""

from operators.allocator.allocator import Allocator, NodeViewCache, Policy
from operators.allocator.errors import (
    AllocatorError,
    ClassNotFoundError,
    FeatureDisabledError,
    IncompletePoolError,
    InvalidInputError,
    InvalidNodeSelectorError,
    InvalidPoolError,
    InvalidRequestError,
    InvalidSelectorError,
    NodeAllocationError,
    OutOfTimeError,
    TooManyDevicesError,
    UnsupportedAttributeError,
)
from operators.allocator.features import Features
from operators.allocator.outcome import Outcome, Reason, Stats, Status
from operators.allocator.pools import Pool, gather_pools, validate_pools
from operators.allocator.selectors import SelectorEngine
from operators.allocator.state import AllocatedState

__all__ = [
    "AllocatedState",
    "Allocator",
    "AllocatorError",
    "ClassNotFoundError",
    "FeatureDisabledError",
    "Features",
    "IncompletePoolError",
    "InvalidInputError",
    "InvalidNodeSelectorError",
    "InvalidPoolError",
    "InvalidRequestError",
    "InvalidSelectorError",
    "NodeAllocationError",
    "NodeViewCache",
    "OutOfTimeError",
    "Outcome",
    "Policy",
    "Pool",
    "Reason",
    "SelectorEngine",
    "Stats",
    "Status",
    "TooManyDevicesError",
    "UnsupportedAttributeError",
    "gather_pools",
    "validate_pools",
]
