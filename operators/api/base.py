"""The one base class for Kubernetes wire objects.

Upstream kinds keep unknown fields (``extra="allow"``) so that writing an object back never
drops what a newer API server added; our own CRDs forbid them (``OwnModel``). Dumps use the
camelCase aliases and only the fields that were set, so ``model_validate(obj).dump() == obj``.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, ClassVar, Self, cast

from pydantic import BaseModel, ConfigDict, model_validator
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
    #: Wire names of the fields whose default is an empty list or dict.
    _collections: ClassVar[frozenset[str]] = frozenset()

    @classmethod
    def __pydantic_init_subclass__(cls, **kwargs: Any) -> None:
        super().__pydantic_init_subclass__(**kwargs)
        cls._collections = frozenset(
            name
            for field_name, info in cls.model_fields.items()
            if info.default_factory in (list, dict)
            for name in (field_name, info.alias or field_name)
        )

    @model_validator(mode="before")
    @classmethod
    def _null_is_empty(cls, data: Any) -> Any:
        """A null list or map is an empty one, as Go reads it: the API server writes Go's nil
        slices as null where a field has no omitempty (a device status's ``conditions``)."""
        if isinstance(data, dict) and cls._collections and None in data.values():
            return {k: v for k, v in data.items() if v is not None or k not in cls._collections}
        return data

    def dump(self) -> dict[str, Any]:
        """The camelCase JSON dict of what was set, as the API server would receive it.

        Fields left at their default but changed in place since (``meta.labels["a"] = "b"``
        on a defaulted dict, ``obj.status.allocation = ...`` on a defaulted status) count as
        set, so code that builds or edits objects never loses its changes on the wire.
        """
        _mark_modified(self)
        return self.model_dump(mode="json", by_alias=True, exclude_unset=True)

    @classmethod
    def load(cls, obj: Any) -> Self:
        """Parse a JSON-like dict (from the API server, YAML, or kopf's body)."""
        return cls.model_validate(obj)


class OwnModel(KubeModel):
    """A model of one of our own CRDs: unknown fields are an error, not data."""

    model_config = ConfigDict(extra="forbid")


def _mark_modified(model: BaseModel) -> bool:
    """Add to ``model_fields_set`` every unset field whose value left its default.

    Returns whether the model now has anything to dump (set fields or extras).
    """
    fields_set = model.__pydantic_fields_set__
    values = model.__dict__
    for name, factory, default in _defaults(type(model)):
        value = values[name]
        if isinstance(value, BaseModel):
            modified = _mark_modified(value)
        elif isinstance(value, (list, dict)):
            _visit(value)
            modified = bool(value)
        elif name in fields_set:
            continue
        else:
            modified = value != (factory() if factory is not None else default)
        if modified:
            fields_set.add(name)
    return bool(fields_set) or bool(model.__pydantic_extra__)


@functools.cache
def _defaults(cls: type[BaseModel]) -> tuple[tuple[str, Callable[[], Any] | None, Any], ...]:
    """Per field: its name, default factory and default (read once per class: a dump walks
    every nested model, and asking pydantic for each default was most of a dump's time)."""
    return tuple(
        (name, cast("Callable[[], Any] | None", info.default_factory), info.default)
        for name, info in cls.model_fields.items()
    )


def _visit(value: list[Any] | dict[Any, Any]) -> None:
    """Mark the models inside a list or map (at any depth)."""
    for item in value if isinstance(value, list) else value.values():
        if isinstance(item, BaseModel):
            _mark_modified(item)
        elif isinstance(item, (list, dict)):
            _visit(item)
