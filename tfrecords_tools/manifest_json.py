"""Writing manifests as JSON that stays readable with thousands of numbers inside."""

from __future__ import annotations

import json

__all__ = ["dumps"]


def _is_flat_list(value) -> bool:
    # Manifest lists are homogeneous: the first element decides.
    return isinstance(value, list) and (not value or not isinstance(value[0], (list, dict)))


def dumps(value, indent: int = 1, _level: int = 0) -> str:
    """Like ``json.dumps(value, indent=indent)``, but lists of scalars stay on one line."""
    if isinstance(value, dict) and value:
        pad = " " * (indent * (_level + 1))
        items = (f"{pad}{json.dumps(k)}: {dumps(v, indent, _level + 1)}" for k, v in value.items())
        return "{\n" + ",\n".join(items) + "\n" + " " * (indent * _level) + "}"
    if isinstance(value, list) and value and not _is_flat_list(value):
        pad = " " * (indent * (_level + 1))
        items = (pad + dumps(v, indent, _level + 1) for v in value)
        return "[\n" + ",\n".join(items) + "\n" + " " * (indent * _level) + "]"
    return json.dumps(value)
