"""Unknown fields, as ``kubectl --validate=strict`` reports them.

The models keep unknown fields (``extra="allow"``: what a newer API server adds must survive a
round trip), so a typo such as ``deviceClasName`` parses fine and silently means nothing. Where
input comes from a person (``kopf-dra simulate -f``), every key is checked against the schema
of the release the input is for: a field that release does not serve (``api.fields``) is unknown
there, as its API server says.
"""

from __future__ import annotations

import types
import typing
from collections.abc import Iterator
from typing import Any, get_args, get_origin

from pydantic import BaseModel

from operators.api.features import Release
from operators.api.fields import unserved
from operators.api.quantity import Quantity

# Fields whose contents are free-form by the API's definition (opaque driver parameters).
FREE_FORM: frozenset[str] = frozenset({"parameters"})


def unknown_fields(
    model: type[BaseModel], data: Any, path: str = "", release: Release | None = None
) -> Iterator[str]:
    """The path of every key of ``data`` that ``model``'s schema does not know (in ``release``:
    None, every supported release's fields are known)."""
    if not isinstance(data, dict):
        return
    hidden = unserved(model, release) if release is not None else frozenset()
    fields = {
        key: info
        for name, info in model.model_fields.items()
        if (key := info.alias or name) not in hidden
    }
    for key, value in data.items():
        where = f"{path}.{key}" if path else str(key)
        info = fields.get(key)
        if info is None:
            yield where
            continue
        if key in FREE_FORM:
            continue
        yield from _check(info.annotation, value, where, release)


def _check(annotation: Any, value: Any, path: str, release: Release | None) -> Iterator[str]:
    origin = get_origin(annotation)
    if origin in (typing.Union, types.UnionType):
        options = [a for a in get_args(annotation) if a is not type(None)]
        if len(options) == 1:
            yield from _check(options[0], value, path, release)
        return  # a real union: the parser decided which it is; no strict check of branches
    if origin in (list, tuple) and isinstance(value, list):
        (item,) = get_args(annotation)[:1] or (Any,)
        for i, element in enumerate(value):
            yield from _check(item, element, f"{path}[{i}]", release)
        return
    if origin is dict and isinstance(value, dict):
        args = get_args(annotation)
        item = args[1] if len(args) == 2 else Any
        for key, element in value.items():
            yield from _check(item, element, f"{path}[{key}]", release)
        return
    if (
        isinstance(annotation, type)
        and issubclass(annotation, BaseModel)
        and not issubclass(annotation, Quantity)
    ):
        yield from unknown_fields(annotation, value, path, release)
