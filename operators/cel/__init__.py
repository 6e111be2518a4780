"""The DRA CEL environment: Kubernetes-compatible device selectors (pure).

Public API (see environment.py for the usage sketch):
- :class:`CELEnvironment`: ``compile()``, ``matches()``, ``device_view()``, ``forget_slice()``;
  ``CELEnvironment(kubernetes="1.36")`` speaks that minor's CEL (:data:`KUBERNETES_MINORS`,
  default :data:`DEFAULT_KUBERNETES`)
- :func:`check_selector`: the API server's verdict on a new selector (for input validation)
- :func:`install_zone_loader`: IANA time zone names for timestamp getters (the CLI's zoneinfo)
- :class:`CompiledSelector`: ``evaluate(view, context=..., interrupt=...)``, ``expression``,
  ``estimated_cost``
- :class:`SliceKey`, :class:`DeviceView`, :func:`build_device_view`
- errors: :class:`InvalidSelectorError` (reason InvalidSelector),
  :class:`SelectorEvaluationError` (reason SelectorEvaluationError), base :class:`SelectorError`;
  :class:`EvaluationInterrupted` when the caller's interrupt stopped a long evaluation

How it works: syntax.py parses as cel-go does, checker.py type-checks against the DRA
declarations (library/), cost.py estimates, planner.py turns the checked tree into closures
that evaluate and charge cost as cel-go's interpreter does (runtime.py, values.py).
"""

from .compiler import DEFAULT_COST_LIMIT, MAX_EXPRESSION_LENGTH, check_selector
from .device import DeviceLike, DeviceView, build_device_view, split_qualified_name
from .environment import CacheStats, CELEnvironment, CompiledDerived, CompiledSelector, SliceKey
from .errors import InvalidSelectorError, SelectorError, SelectorEvaluationError
from .library.timestamps import install_zone_loader
from .release import DEFAULT_KUBERNETES, KUBERNETES_MINORS, NEWEST_KUBERNETES
from .runtime import EvaluationInterrupted
from .values import CIDRValue, IPValue, QuantityValue, SemverValue, URLValue

__all__ = [
    "DEFAULT_COST_LIMIT",
    "DEFAULT_KUBERNETES",
    "KUBERNETES_MINORS",
    "MAX_EXPRESSION_LENGTH",
    "NEWEST_KUBERNETES",
    "CELEnvironment",
    "CIDRValue",
    "CacheStats",
    "CompiledDerived",
    "CompiledSelector",
    "DeviceLike",
    "DeviceView",
    "EvaluationInterrupted",
    "IPValue",
    "InvalidSelectorError",
    "QuantityValue",
    "SelectorError",
    "SelectorEvaluationError",
    "SemverValue",
    "SliceKey",
    "URLValue",
    "build_device_view",
    "check_selector",
    "install_zone_loader",
    "split_qualified_name",
]
