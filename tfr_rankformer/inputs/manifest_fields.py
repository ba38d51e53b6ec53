"""The manifest's JSON fields: :class:`JsonRecord` reads a frozen dataclass of :func:`typed`
fields from a JSON object and writes it back, keeping unknown keys and the keys' order.
"""

from __future__ import annotations

import dataclasses
import json
import types
from collections.abc import Callable, Mapping
from typing import Any

EMPTY: Mapping = types.MappingProxyType({})
_SCALARS = frozenset({int, float, str, bool, type(None)})


@dataclasses.dataclass(frozen=True)
class Origin:
    """Where a manifest comes from, for its errors: ``path: message hint``."""

    path: str = "manifest"
    hint: str = ""

    def error(self, message: str) -> ValueError:
        return ValueError(f"{self.path}: {message}{self.hint}")


def is_int(value) -> bool:
    """A JSON integer (``bool`` is not one)."""
    return isinstance(value, int) and not isinstance(value, bool)


def _is_strings(value) -> bool:
    return isinstance(value, (list, tuple)) and all(isinstance(v, str) for v in value)


def _is_counts(value) -> bool:
    return isinstance(value, Mapping) and all(is_int(v) for v in value.values())


# A field's kind: what the error calls it, and its check.
_KINDS: dict[str, tuple[str, Callable[[Any], bool]]] = {
    "int": ("integer", is_int),
    "str": ("string", lambda value: isinstance(value, str)),
    "object": ("object", lambda value: isinstance(value, Mapping)),
    "strings": ("array of strings", _is_strings),
    "counts": ("object of integers", _is_counts),
}


def typed(kind: str, *, default=None, read=None, **options) -> dataclasses.Field:
    """A field read from its JSON key and checked as ``kind`` (``read(value, origin, name)``
    replaces the check)."""
    metadata = {"kind": kind, "read": read, "default": default}
    if isinstance(default, Mapping):  # a dataclass default must be hashable
        return dataclasses.field(default_factory=lambda: default, metadata=metadata, **options)
    return dataclasses.field(default=default, metadata=metadata, **options)


def frozen(value):
    """A JSON value made read-only: objects as mapping proxies, arrays as tuples."""
    if isinstance(value, Mapping):
        return types.MappingProxyType({k: frozen(v) for k, v in value.items()})
    if isinstance(value, (list, tuple)):
        if all(type(v) in _SCALARS for v in value):
            return tuple(value)  # numbers: the statistics' long arrays
        return tuple(frozen(v) for v in value)
    return value


def thawed(value):
    """The JSON value of :func:`frozen`'s (and of a :class:`JsonRecord`)."""
    if isinstance(value, JsonRecord):
        return value.to_json()
    if isinstance(value, Mapping):
        return {k: thawed(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        if all(type(v) in _SCALARS for v in value):
            return list(value)
        return [thawed(v) for v in value]
    return value


def check_field(value, kind: str, origin: Origin, name: str):
    """``value`` if it is of ``kind``, else a ``ValueError`` naming the field."""
    what, accepts = _KINDS[kind]
    if accepts(value):
        return value
    raise origin.error(f"the manifest's {name!r} is not a JSON {what}")


class JsonRecord:
    """A frozen dataclass of :func:`typed` fields, ``extra`` (other keys) and ``key_order``."""

    extra: Mapping[str, Any]
    key_order: tuple[str, ...]

    @classmethod
    def typed_fields(cls) -> list[dataclasses.Field]:
        return [f for f in dataclasses.fields(cls) if "kind" in f.metadata]

    @classmethod
    def fields_of(cls, data: Mapping, origin: Origin, prefix: str = "") -> dict:
        """The constructor's arguments for the JSON object ``data`` (checked)."""
        values = {}
        for f in cls.typed_fields():
            if f.name not in data:
                continue
            value, read = data[f.name], f.metadata["read"]
            if value is not None and read is not None:
                value = read(value, origin, prefix + f.name)
            elif value is not None:
                value = check_field(value, f.metadata["kind"], origin, prefix + f.name)
            values[f.name] = value
        names = {f.name for f in cls.typed_fields()}
        values["extra"] = {k: v for k, v in data.items() if k not in names}
        values["key_order"] = tuple(data)
        return values

    def freeze(self) -> None:
        """Makes every field read-only (from ``__post_init__``)."""
        for f in dataclasses.fields(self):
            if f.name != "key_order":
                object.__setattr__(self, f.name, frozen(getattr(self, f.name)))
        object.__setattr__(self, "key_order", tuple(self.key_order))

    def to_json(self) -> dict:
        """The JSON object: the keys read, in order, then any field set since."""
        values = {}
        for f in self.typed_fields():
            value = getattr(self, f.name)
            if f.name in self.key_order or value != f.metadata["default"]:
                values[f.name] = thawed(value)
        values.update(thawed(self.extra))
        order = [k for k in self.key_order if k in values]
        seen = set(order)
        order += [k for k in values if k not in seen]
        return {k: values[k] for k in order}


def dumps(value, indent: int = 1, _level: int = 0) -> str:
    """Like ``json.dumps(value, indent=indent)``, but lists of scalars stay on one line."""
    pad, end = " " * (indent * (_level + 1)), " " * (indent * _level)
    if isinstance(value, dict) and value:
        items = (f"{pad}{json.dumps(k)}: {dumps(v, indent, _level + 1)}" for k, v in value.items())
        return "{\n" + ",\n".join(items) + f"\n{end}}}"
    # Manifest lists are homogeneous: the first element decides.
    if isinstance(value, list) and value and isinstance(value[0], (list, dict)):
        return "[\n" + ",\n".join(pad + dumps(v, indent, _level + 1) for v in value) + f"\n{end}]"
    return json.dumps(value)
