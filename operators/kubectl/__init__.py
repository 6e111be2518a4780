"""``kubectl dra``: a kubectl plugin that shows Dynamic Resource Allocation as users ask about it.

``pip install kopf-dra`` puts ``kubectl-dra`` (and ``kubectl_complete-dra``, kubectl's plugin
completion) on PATH. It reads the API alone, with the user's kubeconfig, so it needs no
kopf-dra component and works beside kube-scheduler too:

- ``claims [POD]``: ResourceClaims with their devices, reservations, binding conditions and
  device status (``claims``);
- ``pools``: every pool's devices, allocated and available, counters and shared capacity
  used, taints (``pools``; ``--watch`` refreshes);
- ``why POD``: kopf-dra's scheduling answer for a pending pod, per node, with its scheduling
  Events; the devices a bound pod holds (``why``, on ``kopf-dra simulate``'s engine).

Reading (``connect``, ``cli``) is apart from the views, which are pure. A read RBAC forbids
is named, and the answer is given from what could be read.

Exit codes:

- 0: answered (``why``: the pod is bound, or fits now);
- 1: ``why``: the pod fits nowhere, waits, or cannot be answered;
- 2: usage or bad input: an unknown flag or pod, a bad ``--feature-gates``;
- 3: the cluster cannot be reached: no usable kubeconfig, no connection, credentials refused
  (401), or a read the answer cannot do without forbidden (403).
"""
