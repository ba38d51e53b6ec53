"""``tfr-tune``'s search spaces: default ranges per model family, JSON overrides, sampling.

A JSON file replaces any range, or drops a setting from the search with ``null``::

    {"num_iterations": {"low": 100, "high": 2000, "log": true},
     "ff_dim": {"choices": [128, 256]},
     "cegb_tradeoff": null}
"""

from __future__ import annotations

import dataclasses

from tfr_rankformer.core import model_families
from tfr_rankformer.core.config_io import read_settings


@dataclasses.dataclass(frozen=True)
class Range:
    """One searched setting: ``[low, high]`` (on a log scale, of integers) or ``choices``."""

    low: float | None = None
    high: float | None = None
    log: bool = False
    integer: bool = False
    choices: tuple | None = None

    def __post_init__(self):
        if self.choices is not None:
            if not self.choices or self.low is not None or self.high is not None:
                raise ValueError("give either non-empty `choices` or `low` and `high`")
            object.__setattr__(self, "choices", tuple(self.choices))
            return
        for bound in (self.low, self.high):
            if isinstance(bound, bool) or not isinstance(bound, (int, float)):
                raise ValueError(f"`low` and `high` must be numbers, got {bound!r}")
            if self.integer and bound != int(bound):
                raise ValueError(f"this setting takes integers, got {bound!r}")
        if not self.low < self.high:
            raise ValueError(f"`low` ({self.low}) must be below `high` ({self.high})")
        if self.log and self.low <= 0:
            raise ValueError(f"a log scale needs `low` > 0, got {self.low}")

    def to_json(self) -> dict:
        if self.choices is not None:
            return {"choices": list(self.choices)}
        return {"low": self.low, "high": self.high, "log": self.log}

    def describe(self) -> str:
        if self.choices is not None:
            return "{" + ", ".join(str(c) for c in self.choices) + "}"
        low, high = (int(self.low), int(self.high)) if self.integer else (self.low, self.high)
        return f"[{low}, {high}]" + (" log" if self.log else "")


# Brackets the paper's Table 5 settings (it publishes the tuned values, not its ranges).
GBDT_SPACE = {
    "num_leaves": Range(8, 1024, log=True, integer=True),
    "min_data_in_leaf": Range(5, 500, log=True, integer=True),
    "learning_rate": Range(0.01, 0.5, log=True),
    "cegb_tradeoff": Range(0.01, 2.0, log=True),
    "num_iterations": Range(100, 10000, log=True, integer=True),
}
# Around the paper's neural settings; ``alpha`` only for models with a list head.
NEURAL_SPACE = {
    "learning_rate": Range(1e-4, 1e-2, log=True),
    "weight_decay": Range(1e-3, 0.3, log=True),
    "dropout": Range(0.0, 0.5),
    "num_layers": Range(1, 4, integer=True),
    "num_heads": Range(choices=(1, 2, 4)),
    "ff_dim": Range(choices=(128, 256, 512, 1024)),
    "alpha": Range(0.0, 4.0),
}
_ENCODER_KEYS = ("num_layers", "num_heads", "ff_dim")


def default_space(model: str, *, gbdt: bool, width: int | None = None) -> dict[str, Range]:
    """``model``'s default space; ``num_heads`` takes ``width``'s divisors up to 8."""
    if gbdt:
        return dict(GBDT_SPACE)
    space = dict(NEURAL_SPACE)
    if not model_families.get_model(model).attention:  # pointwise: no encoder
        for key in _ENCODER_KEYS:
            del space[key]
    elif width:
        space["num_heads"] = Range(choices=tuple(h for h in range(1, 9) if width % h == 0))
    if not model_families.get_model(model).has_list_head:
        del space["alpha"]
    return space


def _range_from_json(value, default: Range, where: str) -> Range:
    if not isinstance(value, dict):
        raise ValueError(f"{where}: a range must be an object or null, got {value!r}")
    unknown = set(value) - {"low", "high", "log", "choices"}
    if unknown:
        raise ValueError(f"{where}: unknown keys {sorted(unknown)} (low, high, log, choices)")
    try:
        if "choices" in value:
            if set(value) != {"choices"} or not isinstance(value["choices"], list):
                raise ValueError("`choices` must be a list and come alone")
            return Range(choices=tuple(value["choices"]))
        if not {"low", "high"} <= set(value):
            raise ValueError("an interval needs `low` and `high`")
        log = value.get("log", False)
        if not isinstance(log, bool):
            raise ValueError(f"`log` must be true or false, got {log!r}")
        return Range(low=value["low"], high=value["high"], log=log, integer=default.integer)
    except ValueError as e:
        raise ValueError(f"{where}: {e}") from None


def load_space(path: str | None, defaults: dict[str, Range], *, what: str) -> dict[str, Range]:
    """``defaults`` with the ranges of the JSON file ``path``; errors name file and setting."""
    if path is None:
        return dict(defaults)
    given = read_settings(path)
    space = dict(defaults)
    for key, value in given.items():
        if key not in defaults:
            raise ValueError(
                f"{path}: {key!r} is not searched for {what}; choose from {sorted(defaults)}"
            )
        if value is None:
            del space[key]
        else:
            space[key] = _range_from_json(value, defaults[key], f"{path}: {key!r}")
    if not space:
        raise ValueError(f"{path}: leaves nothing to search")
    return space


def space_to_json(space: dict[str, Range]) -> dict:
    """The space as JSON (the format ``load_space`` reads)."""
    return {key: r.to_json() for key, r in space.items()}


def describe_space(space: dict[str, Range]) -> str:
    """``name [low, high] log; ...`` for ``--help``."""
    return "; ".join(f"{key} {r.describe()}" for key, r in space.items())


def suggest(trial, space: dict[str, Range]) -> dict:
    """One value per setting of ``space``, drawn by the Optuna ``trial``."""
    values = {}
    for key, r in space.items():
        if r.choices is not None:
            values[key] = trial.suggest_categorical(key, list(r.choices))
        elif r.integer:
            values[key] = trial.suggest_int(key, int(r.low), int(r.high), log=r.log)
        else:
            values[key] = trial.suggest_float(key, float(r.low), float(r.high), log=r.log)
    return values
