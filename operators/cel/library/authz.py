"""Kubernetes' authorizer library: declared, as in the base environment, so that selectors
type-check as upstream's do; a device selector has no authorizer, so no call can succeed."""

from __future__ import annotations

from ._registry import declare

_A = "kubernetes.authorization.Authorizer"
_P = "kubernetes.authorization.PathCheck"
_G = "kubernetes.authorization.GroupCheck"
_R = "kubernetes.authorization.ResourceCheck"
_D = "kubernetes.authorization.Decision"

declare("path", f"authorizer_path {_A}.(string) -> {_P}")
declare("group", f"authorizer_group {_A}.(string) -> {_G}")
declare("serviceAccount", f"authorizer_serviceaccount {_A}.(string, string) -> {_A}")
declare("resource", f"groupcheck_resource {_G}.(string) -> {_R}")
declare("subresource", f"resourcecheck_subresource {_R}.(string) -> {_R}")
declare("namespace", f"resourcecheck_namespace {_R}.(string) -> {_R}")
declare("name", f"resourcecheck_name {_R}.(string) -> {_R}")
declare(
    "check", f"pathcheck_check {_P}.(string) -> {_D}", f"resourcecheck_check {_R}.(string) -> {_D}"
)
declare("errored", f"decision_errored {_D}.() -> bool")
declare("error", f"decision_error {_D}.() -> string")
declare("allowed", f"decision_allowed {_D}.() -> bool")
declare("reason", f"decision_reason {_D}.() -> string")
declare("fieldSelector", f"authorizer_fieldselector {_R}.(string) -> {_R}")
declare("labelSelector", f"authorizer_labelselector {_R}.(string) -> {_R}")
