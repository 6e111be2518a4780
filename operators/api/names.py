"""Well-known names of the Kubernetes API that several components must spell the same way.

One definition each: a finalizer spelled differently by the scheduler and the reservation
cleanup would leave claims that can never be deleted.
"""

from __future__ import annotations

from typing import Final

# The finalizer the scheduler puts on claims it allocates, and the cleanup takes off once a
# claim being deleted is no longer allocated (resourceapi.Finalizer upstream).
DELETE_PROTECTION_FINALIZER: Final = "resource.kubernetes.io/delete-protection"
# On template-generated claims: the pod's spec.resourceClaims[].name the claim was made for.
POD_CLAIM_NAME_ANNOTATION: Final = "resource.kubernetes.io/pod-claim-name"
#: On claims kube-scheduler makes for extended resources backed by DRA.
EXTENDED_RESOURCE_CLAIM_ANNOTATION: Final = "resource.kubernetes.io/extended-resource-claim"
# A namespace label that permits adminAccess requests in it.
ADMIN_ACCESS_NAMESPACE_LABEL: Final = "resource.kubernetes.io/admin-access"
# Pod phases after which a pod never runs again and releases its claims.
TERMINAL_PHASES: Final = frozenset({"Succeeded", "Failed"})
