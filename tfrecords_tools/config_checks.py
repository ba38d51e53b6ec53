"""Validation shared by the configuration dataclasses."""

from __future__ import annotations

__all__ = ["require_positive_ints"]


def require_positive_ints(config, *names: str, optional: bool = False) -> None:
    """Raises ``ValueError`` unless each named field is an int >= 1 (or ``None`` if optional)."""
    for name in names:
        value = getattr(config, name)
        if optional and value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"`{name}` must be a positive int, got {value!r}")
