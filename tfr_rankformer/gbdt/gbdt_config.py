"""``GBDTConfig``, a GBDT run's settings, with LightGBM presets and canonical parameter names."""

from __future__ import annotations

import dataclasses
import os

import lightgbm as lgb

from tfr_rankformer.core import model_families
from tfr_rankformer.core.config_io import from_dict, require_positive_ints

# The model a GBDT run records; ``gbdt-1k`` and ``gbdt-10k`` name its preset.
_RUN_MODEL = "gbdt"

# ``gbdt``: LightGBM's usual lambdarank settings (a strong simple baseline);
# ``gbdt-1k``/``gbdt-10k``: the paper's Table 5, its two tuned GBDT baselines.
PRESETS = {
    "gbdt": {
        "num_iterations": 1000,
        "num_leaves": 63,
        "min_data_in_leaf": 50,
        "learning_rate": 0.05,
    },
    "gbdt-1k": {
        "num_iterations": 1000,
        "num_leaves": 507,
        "min_data_in_leaf": 255,
        "learning_rate": 0.46,
        "cegb_tradeoff": 0.13,
    },
    "gbdt-10k": {
        "num_iterations": 10000,
        "num_leaves": 271,
        "min_data_in_leaf": 376,
        "learning_rate": 0.32,
        "cegb_tradeoff": 1.65,
    },
}

# Our defaults under every preset; ``params`` overrides any of them.
_BASE_PARAMS = {
    "objective": "lambdarank",
    # No built-in metric: early stopping watches the shared NDCG_y@10 (see
    # gbdt_booster.fit_booster).
    "metric": "None",
    # Same data, seed and thread count give the same trees.
    "deterministic": True,
    "force_col_wise": True,
    "verbosity": 1,
}


def canonical_params(params: dict) -> dict:
    """``params`` under LightGBM's canonical names; ``ValueError`` for a name it does not know."""
    table = lgb.basic._ConfigAliases._get_all_param_aliases()
    canonical = {alias: name for name, aliases in table.items() for alias in aliases}
    out = {}
    for key, value in params.items():
        if key not in canonical:
            raise ValueError(f"unknown LightGBM parameter {key!r}")
        if canonical[key] in out:
            raise ValueError(f"LightGBM parameter {canonical[key]!r} is given twice (as {key!r})")
        out[canonical[key]] = value
    return out


@dataclasses.dataclass(frozen=True)
class GBDTConfig:
    """Settings of one GBDT run.

    Attributes:
      model: ``"gbdt"`` (``"gbdt-1k"`` and ``"gbdt-10k"`` name their preset).
      preset: a key of ``PRESETS``.
      params: LightGBM parameters (names or aliases) over the preset's.
      early_stopping_rounds: stop when validation NDCG@10 has not improved for
        this many trees and keep the best (0: never).
      include_empty_lists: train on lists whose list label ``t`` is 0 too.
      num_threads: LightGBM threads; ``None``: one per core.
      log_every: log validation NDCG@10 every this many trees.
      eval_every: without early stopping, compute validation NDCG@10 (for
        ``history.csv``) every this many trees.
    """

    model: str = _RUN_MODEL
    preset: str = "gbdt"
    data: str = ""
    model_dir: str = ""
    params: dict = dataclasses.field(default_factory=dict)
    early_stopping_rounds: int = 0
    include_empty_lists: bool = False
    num_threads: int | None = None
    seed: int = 0
    log_every: int = 50
    eval_every: int = 10

    def __post_init__(self):
        if not model_families.is_gbdt(self.model):
            raise ValueError(f"a GBDT run needs model {_RUN_MODEL!r}, got {self.model!r}")
        if self.model != _RUN_MODEL:  # "gbdt-10k" names its preset; the run records "gbdt"
            object.__setattr__(self, "preset", self.model)
            object.__setattr__(self, "model", _RUN_MODEL)
        if self.preset not in PRESETS:
            raise ValueError(f"Unknown preset {self.preset!r}; choose from {sorted(PRESETS)}")
        if not self.data or not self.model_dir:
            raise ValueError("`data` and `model_dir` must be given")
        require_positive_ints(self, "log_every", "eval_every")
        require_positive_ints(self, "num_threads", optional=True)
        if self.early_stopping_rounds < 0:
            raise ValueError(
                f"`early_stopping_rounds` must be >= 0, got {self.early_stopping_rounds}"
            )
        object.__setattr__(self, "params", canonical_params(self.params))

    def lightgbm_params(self) -> dict:
        """The preset's parameters under our defaults, with ``params`` on top."""
        threads = self.num_threads or os.cpu_count() or 1
        params = {**_BASE_PARAMS, **PRESETS[self.preset], "seed": self.seed, "num_threads": threads}
        return {**params, **self.params}

    def to_json(self) -> dict:
        return dataclasses.asdict(self)

    @classmethod
    def from_json(cls, values: dict) -> GBDTConfig:
        return from_dict(cls, values, what="GBDT settings")
