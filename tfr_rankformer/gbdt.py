"""LightGBM GBDT rankers: the paper's tabular baseline and the distilled student.

``tfr-train --model gbdt`` (or ``gbdt-1k``/``gbdt-10k``) fits LightGBM's
``lambdarank`` on the converted TFRecords of a dataset, with the same
training-list policy as the neural baselines (lists with ``t > 0``), stops
early on the validation split's NDCG@10, and evaluates every split with the
shared metrics (``ranking_metrics.evaluate_rankings``).

``model_dir/`` receives ``config.json``, ``model.txt`` (LightGBM's text model,
loadable by any LightGBM), ``history.csv`` (validation NDCG@10 per tree) and
``metrics.json``.

Features are used raw: trees split on thresholds, so the normalisation the
neural models apply would change nothing but the thresholds' values.
"""

from __future__ import annotations

import csv
import dataclasses
import logging
import os
import time

import lightgbm as lgb
import numpy as np

from tfr_rankformer import data
from tfr_rankformer.command_names import GBDT_MODELS
from tfr_rankformer.config_io import from_dict, require_positive_ints, write_json
from tfr_rankformer.list_arrays import ListArrays, read_split
from tfr_rankformer.ranking_metrics import evaluate_rankings

__all__ = [
    "GBDT_MODELS",
    "PRESETS",
    "GBDTConfig",
    "MODEL_FILE",
    "canonical_params",
    "fit_booster",
    "train_gbdt",
    "load_booster",
    "save_booster",
    "is_gbdt_run",
    "score_arrays",
    "evaluate_arrays",
]

logger = logging.getLogger(__name__)

MODEL_FILE = "model.txt"
CONFIG_NAME = "config.json"
METRICS_NAME = "metrics.json"

# The paper's Table 5: the tuned LightGBM settings of its two GBDT baselines.
PRESETS = {
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
    # No built-in metric: early stopping watches the shared NDCG_y@10 (see fit_booster).
    "metric": "None",
    # Same data, seed and thread count give the same trees.
    "deterministic": True,
    "force_col_wise": True,
    "verbosity": 1,
}


def canonical_params(params: dict) -> dict:
    """``params`` with LightGBM's aliases replaced by canonical names.

    Raises:
      ValueError: for a name LightGBM does not know, so a typo is not ignored.
    """
    try:
        table = lgb.basic._ConfigAliases._get_all_param_aliases()
    except AttributeError:  # a LightGBM without the table: pass names through
        return dict(params)
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
      model: ``"gbdt"``.
      preset: a key of ``PRESETS`` (the paper's Table 5).
      data: a converted dataset (``tfr-convert --output``).
      model_dir: where everything is written.
      params: LightGBM parameters over the preset's (any name or alias LightGBM
        knows; ``num_iterations`` is the number of trees).
      early_stopping_rounds: stop when validation NDCG@10 has not improved for
        this many trees (0: never; only with a ``vali`` split).
      include_empty_lists: train on lists whose list label ``t`` is 0 too (the
        paper's policy for baselines: no).
      num_threads: LightGBM threads; ``None``: one per core.
      seed: LightGBM's seed.
      log_every: log validation NDCG@10 every this many trees.
    """

    model: str = "gbdt"
    preset: str = "gbdt-1k"
    data: str = ""
    model_dir: str = ""
    params: dict = dataclasses.field(default_factory=dict)
    early_stopping_rounds: int = 100
    include_empty_lists: bool = False
    num_threads: int | None = None
    seed: int = 0
    log_every: int = 50

    def __post_init__(self):
        if self.model in GBDT_MODELS and self.model != "gbdt":
            # "gbdt-10k" names its preset.
            object.__setattr__(self, "preset", GBDT_MODELS[self.model])
            object.__setattr__(self, "model", "gbdt")
        if self.model != "gbdt":
            raise ValueError(f"a GBDT run needs model 'gbdt', got {self.model!r}")
        if self.preset not in PRESETS:
            raise ValueError(f"Unknown preset {self.preset!r}; choose from {sorted(PRESETS)}")
        if not self.data or not self.model_dir:
            raise ValueError("`data` and `model_dir` must be given")
        require_positive_ints(self, "log_every")
        require_positive_ints(self, "num_threads", optional=True)
        if self.early_stopping_rounds < 0:
            raise ValueError(
                f"`early_stopping_rounds` must be >= 0, got {self.early_stopping_rounds}"
            )
        object.__setattr__(self, "params", canonical_params(self.params))

    def lightgbm_params(self) -> dict:
        """The preset's parameters under our defaults, with ``params`` on top."""
        params = {**_BASE_PARAMS, **PRESETS[self.preset]}
        params["seed"] = self.seed
        params["num_threads"] = self.num_threads or os.cpu_count() or 1
        params.update(self.params)
        return params

    def to_json(self) -> dict:
        return dataclasses.asdict(self)

    @classmethod
    def from_json(cls, values: dict) -> GBDTConfig:
        return from_dict(cls, values, what="GBDT settings")


def is_gbdt_run(model_dir: str) -> bool:
    """Whether ``model_dir`` holds a GBDT (``model.txt``) rather than a neural run."""
    return os.path.isfile(os.path.join(model_dir, MODEL_FILE))


def _integer_labels(arrays: ListArrays, what: str) -> np.ndarray:
    labels = np.rint(arrays.label)
    if not np.array_equal(labels, arrays.label):
        raise ValueError(f"{what}: lambdarank needs integer labels")
    return labels.astype(np.int32)


class _History:
    """A LightGBM callback: records the first validation metric of every tree and logs
    it every ``every`` trees."""

    def __init__(self, every: int):
        self.every = every
        self.metric = "metric"
        self.rows: list[tuple[int, float]] = []
        self.started = time.perf_counter()

    def __call__(self, env):
        if not env.evaluation_result_list:
            return
        _, self.metric, value, _ = env.evaluation_result_list[0]
        trees = env.iteration + 1
        self.rows.append((trees, value))
        if trees % self.every == 0 or trees == env.end_iteration:
            rate = trees / max(time.perf_counter() - self.started, 1e-9)
            logger.info(
                "tree %d/%d: validation %s %.4f (%.1f trees/s)",
                trees,
                env.end_iteration,
                self.metric,
                value,
                rate,
            )

    def write(self, path: str) -> None:
        with open(path, "w", newline="", encoding="utf-8") as f:
            writer = csv.writer(f)
            writer.writerow(["trees", f"val_{self.metric}"])
            writer.writerows(self.rows)


def _counted_lists(labels: np.ndarray, arrays: ListArrays) -> int:
    """Lists whose ``labels`` are not all equal (those NDCG is averaged over)."""
    starts = arrays.offsets[:-1][arrays.sizes > 0]
    if not starts.size:
        return 0
    highest = np.maximum.reduceat(labels, starts)
    return int(np.count_nonzero(highest > np.minimum.reduceat(labels, starts)))


def _validation_ndcg(vali: ListArrays, labels: np.ndarray, name: str):
    """A LightGBM ``feval``: the shared metrics' NDCG@10 (x 100) of ``vali`` on ``labels``.

    LightGBM's own ``ndcg`` metric counts a list whose labels are all 0 as a
    perfect 1; this follows the paper's convention, the one every model reports.
    """
    padded_labels = vali.padded(labels.astype(np.float32), 0.0)
    mask = vali.mask()

    def feval(predictions, _dataset):
        scores = vali.padded(predictions.astype(np.float32), 0.0)
        metrics = evaluate_rankings(scores, padded_labels, padded_labels, mask, ks=(10,))
        return name, metrics["ndcg_y@10"], True

    return feval


def fit_booster(
    params: dict,
    train: ListArrays,
    targets: np.ndarray,
    *,
    vali: ListArrays | None,
    vali_targets: np.ndarray | None = None,
    early_stopping_rounds: int,
    log_every: int,
) -> tuple[lgb.Booster, _History]:
    """Fits LightGBM on ``train`` items with ``targets``, stopping early on ``vali``.

    ``params["objective"]`` decides how targets are read: a ranking objective
    (lambdarank) takes integer grades within each list, and early stopping
    watches the shared NDCG@10 of ``vali`` on ``vali_targets`` (default: its
    labels, i.e. NDCG_y@10); a regression takes values, and early stopping
    watches ``params["metric"]`` (e.g. ``l2``) on ``vali_targets``. LightGBM's
    log goes to this module's logger.
    """
    lgb.register_logger(logger)
    params = dict(params)
    trees = int(params.pop("num_iterations"))
    ranking = params.get("objective") in ("lambdarank", "rank_xendcg")
    train_set = lgb.Dataset(
        train.features,
        label=targets,
        # Query groups only for ranking: with them LightGBM demands integer targets.
        group=train.sizes if ranking else None,
        feature_name=[f"f{i}" for i in range(1, train.features.shape[1] + 1)],
        free_raw_data=True,
    )
    history = _History(log_every)
    callbacks = [history]
    valid_sets = []
    feval = None
    if vali is not None and vali.num_lists:
        if vali_targets is None:
            vali_targets = _integer_labels(vali, "vali")
            name = "ndcg_y@10"
        else:
            name = "ndcg@10"
        if ranking and not _counted_lists(vali_targets, vali):
            logger.warning("no validation list has targets that differ: no early stopping")
        else:
            valid_sets.append(
                lgb.Dataset(
                    vali.features,
                    label=vali_targets,
                    group=vali.sizes if ranking else None,
                    reference=train_set,
                )
            )
            feval = _validation_ndcg(vali, vali_targets, name) if ranking else None
    if valid_sets and early_stopping_rounds:
        callbacks.append(
            lgb.early_stopping(early_stopping_rounds, first_metric_only=True, verbose=True)
        )
    booster = lgb.train(
        params,
        train_set,
        num_boost_round=trees,
        valid_sets=valid_sets,
        valid_names=["vali"] if valid_sets else None,
        feval=feval,
        callbacks=callbacks,
    )
    return booster, history


def save_booster(booster: lgb.Booster, model_dir: str) -> None:
    """Writes ``model_dir/model.txt`` (up to the best iteration) under a temporary name first."""
    os.makedirs(model_dir, exist_ok=True)
    partial = os.path.join(model_dir, MODEL_FILE + ".partial")
    booster.save_model(partial, num_iteration=booster.best_iteration or None)
    os.replace(partial, os.path.join(model_dir, MODEL_FILE))


def load_booster(model_dir: str) -> lgb.Booster:
    """The LightGBM model of a GBDT run (or a distilled student).

    Raises:
      FileNotFoundError: if ``model_dir`` holds none.
    """
    path = os.path.join(model_dir, MODEL_FILE)
    if not os.path.isfile(path):
        raise FileNotFoundError(
            f"{model_dir} holds no {MODEL_FILE} (written by tfr-train --model gbdt)"
        )
    try:
        return lgb.Booster(model_file=path)
    except lgb.basic.LightGBMError as e:
        raise ValueError(f"{path} is not a LightGBM model: {e}") from None


def score_arrays(
    booster: lgb.Booster, arrays: ListArrays, *, num_threads: int | None = None
) -> np.ndarray:
    """Per-item scores ``[num_items]`` float32 (``num_threads``: LightGBM's default if None)."""
    if not arrays.features.shape[0]:
        return np.zeros(0, np.float32)
    expected = booster.num_feature()
    if arrays.features.shape[1] != expected:
        raise ValueError(
            f"the data has {arrays.features.shape[1]} features; the GBDT was trained on {expected}"
        )
    options = {} if num_threads is None else {"num_threads": num_threads}
    # At the best iteration when early stopping set one, else every tree.
    return booster.predict(arrays.features, **options).astype(np.float32)


def evaluate_arrays(scores: np.ndarray, arrays: ListArrays, *, max_label: int) -> dict:
    """The shared ranking metrics for per-item ``scores`` of ``arrays``' lists."""
    return evaluate_rankings(
        arrays.padded(scores, 0.0),
        arrays.padded(arrays.label, 0.0),
        arrays.padded(arrays.relevance, 0.0),
        arrays.mask(),
        max_label=max_label,
    )


def train_gbdt(config: GBDTConfig) -> dict:
    """Trains, evaluates every split; returns ``metrics.json``'s content."""
    manifest = data.load_manifest(config.data)
    os.makedirs(config.model_dir, exist_ok=True)
    write_json(os.path.join(config.model_dir, CONFIG_NAME), config.to_json())
    splits = {split: read_split(config.data, manifest, split) for split in manifest["splits"]}
    train = splits["train"]
    if not config.include_empty_lists:
        train = train.select(train.list_labels() > 0)
    if not train.num_lists:
        raise ValueError(f"{config.data}: no training list passes the training-list policy")
    params = config.lightgbm_params()
    logger.info(
        "training LightGBM %s (%s) on %d lists, %d items (%s t = 0 lists), %d threads",
        params["objective"],
        config.preset,
        train.num_lists,
        len(train.label),
        "with" if config.include_empty_lists else "without",
        params["num_threads"],
    )
    started = time.perf_counter()
    booster, history = fit_booster(
        params,
        train,
        _integer_labels(train, "train"),
        vali=splits.get("vali"),
        early_stopping_rounds=config.early_stopping_rounds,
        log_every=config.log_every,
    )
    seconds = time.perf_counter() - started
    best = booster.best_iteration or booster.current_iteration()
    save_booster(booster, config.model_dir)
    history.write(os.path.join(config.model_dir, "history.csv"))
    max_label = data.label_levels(manifest)
    metrics = {
        split: evaluate_arrays(score_arrays(booster, arrays), arrays, max_label=max_label)
        for split, arrays in splits.items()
    }
    metrics["training"] = {
        "trees": best,
        "trees_grown": len(history.rows) or best,
        "seconds": seconds,
        "lists": train.num_lists,
        "items": int(len(train.label)),
        "lightgbm_params": params,
        "lightgbm_version": lgb.__version__,
    }
    metrics["settings"] = config.to_json()
    write_json(os.path.join(config.model_dir, METRICS_NAME), metrics)
    return metrics
