"""Validation, JSON loading and JSON writing shared by the commands."""

from __future__ import annotations

import dataclasses
import json

from tfr_rankformer.core.atomic_files import atomic_write

__all__ = ["require_positive_ints", "from_dict", "write_json"]


def write_json(path: str, values: dict) -> None:
    """Writes ``values`` as JSON under a temporary name, then renames it into place."""
    with atomic_write(path) as f:
        json.dump(values, f, indent=1, sort_keys=True)
        f.write("\n")


def require_positive_ints(config, *names: str, optional: bool = False) -> None:
    """Raises ``ValueError`` unless each named field is an int >= 1 (or ``None`` if optional)."""
    for name in names:
        value = getattr(config, name)
        if optional and value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"`{name}` must be a positive int, got {value!r}")


def from_dict(cls, values: dict, *, nested: dict | None = None, what: str = "settings"):
    """Builds the dataclass ``cls`` from JSON-like ``values``.

    Args:
      cls: a dataclass.
      values: field values; nested dataclasses may be given as dicts.
      nested: field name -> dataclass of that field.
      what: how errors name these settings.

    Raises:
      ValueError: naming keys that are not fields of ``cls``.
    """
    values = dict(values)
    for name, field_cls in (nested or {}).items():
        if isinstance(values.get(name), dict):
            values[name] = field_cls(**values[name])
    unknown = set(values) - {f.name for f in dataclasses.fields(cls)}
    if unknown:
        raise ValueError(f"Unknown {what} {sorted(unknown)}")
    return cls(**values)
