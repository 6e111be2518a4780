"""Allocator errors: bad input (permanent) versus a failure of one node.

Messages start with coordinates (``claim ns/a, request gpu: ...``) so they can go into a pod
condition unchanged; ``reason`` is a CamelCase word for conditions, Events and metrics.
"Does not fit" is not an error: ``allocate`` returns it as a value with reasons.
"""

from __future__ import annotations


class AllocatorError(Exception):
    """Base of everything the allocator raises or reports."""

    reason: str = "AllocationFailed"

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class InvalidInputError(AllocatorError):
    """The claims or classes are wrong; retrying on another node cannot help."""

    reason = "InvalidInput"


class ClassNotFoundError(InvalidInputError):
    reason = "ClassNotFound"


class InvalidSelectorError(InvalidInputError):
    """A CEL selector failed to compile or to evaluate."""

    reason = "InvalidSelector"


class FeatureDisabledError(InvalidInputError):
    reason = "FeatureDisabled"


class InvalidRequestError(InvalidInputError):
    reason = "InvalidRequest"


class UnsupportedAttributeError(InvalidInputError):
    """1.38: a constraint met an attribute value the allocator cannot hold (none, an empty
    list, a version that does not parse, a list without DRAListTypeAttributes): upstream ends
    the allocation rather than quietly skip the device."""

    reason = "UnsupportedAttribute"


class TooManyDevicesError(InvalidInputError):
    """More results than an AllocationResult may hold (resource.k8s.io limit)."""

    reason = "TooManyDevices"


class InvalidNodeSelectorError(InvalidInputError):
    reason = "InvalidNodeSelector"


class NodeAllocationError(AllocatorError):
    """This node cannot be used right now (invalid or incomplete pools); others may be.

    Upstream wraps these in ErrFailedAllocationOnNode: the scheduler reports them only when
    no node fits.
    """

    reason = "NodeAllocationFailed"


class InvalidPoolError(NodeAllocationError):
    reason = "InvalidPool"


class IncompletePoolError(NodeAllocationError):
    reason = "IncompletePool"


class OutOfTimeError(AllocatorError):
    """The attempt's time budget ran out (upstream: DRASchedulerFilterTimeout): the node is
    not known to fit or not; the caller decides whether to try again."""

    reason = "TimedOut"
