"""The one base class for Kubernetes wire objects.

Upstream kinds keep unknown fields (``extra="allow"``) so that writing an object back never
drops what a newer API server added; our own CRDs forbid them (``OwnModel``). Dumps use the
camelCase aliases and only the fields that were set, so ``model_validate(obj).dump() == obj``.
"""

from __future__ import annotations

from typing import Any, Self

from pydantic import BaseModel, ConfigDict
from pydantic.alias_generators import to_camel


class KubeModel(BaseModel):
    """A Kubernetes object or sub-object of an upstream API (unknown fields are kept)."""

    model_config = ConfigDict(
        alias_generator=to_camel,
        populate_by_name=True,
        extra="allow",
        validate_assignment=False,
        protected_namespaces=(),
        ser_json_inf_nan="strings",
    )

    def dump(self) -> dict[str, Any]:
        """The camelCase JSON dict of what was set, as the API server would receive it."""
        return self.model_dump(mode="json", by_alias=True, exclude_unset=True)

    @classmethod
    def load(cls, obj: Any) -> Self:
        """Parse a JSON-like dict (from the API server, YAML, or kopf's body)."""
        return cls.model_validate(obj)


class OwnModel(KubeModel):
    """A model of one of our own CRDs: unknown fields are an error, not data."""

    model_config = ConfigDict(extra="forbid")
