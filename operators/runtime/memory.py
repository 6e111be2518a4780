"""Python's cyclic garbage collector, tuned for processes that keep the cluster in memory.

Our stores hold every pod, claim, node and slice as parsed JSON, and a cycle allocates many
short-lived objects. With CPython's default thresholds (700, 10, 10) the collector ran every
700 net allocations and, as the stores grew, traversed the whole heap again and again: on a
large cluster, collections took a large share of the scheduler's and the claim controllers' CPU
(bench/README.md has the figures).
Our objects are acyclic JSON and models, freed by reference counting; the collector is
only needed for the rare cycle (a task and its exception), which a younger generation
catches. So:

- young collections every 10,000 allocations, not 700 (a full one is then considered every
  million, and still only once the heap grew by a quarter, CPython's own rule);
- once a controller has listed the cluster (``listed``), what it holds is moved out of the
  collector's sight (``gc.freeze``): a large cluster's initial state is never traversed again.
  Reference counting still frees it as objects are replaced.

Only the processes ``kopf-dra run`` starts do this (``tune``); an operator run in-process
(tests) leaves the host's collector alone.
"""

from __future__ import annotations

import gc

THRESHOLDS = (10_000, 10, 10)

_tuned = False


def tune() -> None:
    """This process runs one component: collect less often (see the module docstring)."""
    global _tuned
    gc.set_threshold(*THRESHOLDS)
    _tuned = True


def listed() -> None:
    """A controller's stores are filled: freeze what the process holds (when ``tune``d)."""
    if _tuned:
        gc.collect()
        gc.freeze()
