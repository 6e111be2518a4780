"""kube-scheduler's default-profile plugins beyond the node and the pod's devices, pure: each
module is one upstream plugin (``pkg/scheduler/framework/plugins/<name>``) with its messages.

Each plugin is a ``pre_filter`` (the pod against the whole snapshot, once per cycle) that
returns its state, ``None`` when it has nothing to check for this pod (upstream's Skip), or
``Unresolvable`` when no node can take the pod; and a ``filter`` that gives the reason a node
cannot take the pod, in kube-scheduler's words, or None.
"""

from __future__ import annotations

import dataclasses


@dataclasses.dataclass(frozen=True)
class Unresolvable:
    """PreFilter rejected the pod: no node can take it, whatever preemption frees.
    ``error``: upstream's Error status (the pod's input is bad, e.g. a selector that does not
    parse), not Unschedulable: the attempt fails with the message as it is."""

    message: str
    error: bool = False
