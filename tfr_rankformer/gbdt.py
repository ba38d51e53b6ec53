"""LightGBM GBDT rankers: the paper's tabular baseline and the distilled student.

``tfr-train --model gbdt`` (LightGBM's usual lambdarank settings) or
``gbdt-1k``/``gbdt-10k`` (the paper's Table 5) fits LightGBM's ``lambdarank``
on the converted TFRecords of a dataset, with the same training-list policy as
the neural baselines (lists with ``t > 0``), grows the preset's whole tree
budget (early stopping on the validation split's NDCG@10 only when asked),
and evaluates every split with the shared metrics
(``ranking_metrics.evaluate_rankings``).

``model_dir/`` receives ``config.json``, ``model.txt`` (LightGBM's text model,
loadable by any LightGBM), ``history.csv`` (validation NDCG@10 every
``eval_every`` trees, every tree with early stopping) and
``metrics.json``.

Features are used raw: trees split on thresholds, so the normalisation the
neural models apply would change nothing but the thresholds' values.
"""

from __future__ import annotations

import csv
import dataclasses
import json
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
from tfr_rankformer.run_directory import run_session

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
      model: ``"gbdt"`` (``"gbdt-1k"`` and ``"gbdt-10k"`` name their preset).
      preset: a key of ``PRESETS``.
      data: a converted dataset (``tfr-convert --output``).
      model_dir: where everything is written.
      params: LightGBM parameters over the preset's (any name or alias LightGBM
        knows; ``num_iterations`` is the number of trees).
      early_stopping_rounds: stop when validation NDCG@10 has not improved for
        this many trees, and keep the best tree count (0: never, the whole
        budget is grown and kept; only with a ``vali`` split).
      include_empty_lists: train on lists whose list label ``t`` is 0 too (the
        paper's policy for baselines: no).
      num_threads: LightGBM threads; ``None``: one per core.
      seed: LightGBM's seed.
      log_every: log validation NDCG@10 every this many trees.
      eval_every: without early stopping, compute validation NDCG@10 (for
        ``history.csv``) every this many trees and after the last; with early
        stopping, after every tree.
    """

    model: str = "gbdt"
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
        require_positive_ints(self, "log_every", "eval_every")
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
        self.grown = 0
        self.started = time.perf_counter()

    def __call__(self, env):
        trees = self.grown = env.iteration + 1
        if not env.evaluation_result_list:
            return
        _, self.metric, value, _ = env.evaluation_result_list[0]
        if np.isnan(value):
            return  # a tree between two evaluations (see _validation_ndcg)
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


def _validation_ndcg(vali: ListArrays, labels: np.ndarray, name: str, *, every: int, trees: int):
    """A LightGBM ``feval``: the shared metrics' NDCG@10 (x 100) of ``vali`` on ``labels``.

    LightGBM's own ``ndcg`` metric counts a list whose labels are all 0 as a
    perfect 1; this follows the paper's convention, the one every model reports.
    It is computed after every ``every``-th tree and the last (``trees``); other
    trees get NaN, which costs nothing.
    """
    padded_labels = vali.padded(labels.astype(np.float32), 0.0)
    mask = vali.mask()
    calls = [0]

    def feval(predictions, _dataset):
        calls[0] += 1
        if calls[0] % every and calls[0] != trees:
            return name, float("nan"), True
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
    eval_every: int = 1,
    callbacks: list | None = None,
) -> tuple[lgb.Booster, _History]:
    """Fits LightGBM on ``train`` items with ``targets``, optionally stopping early on ``vali``.

    ``params["objective"]`` decides how targets are read: a ranking objective
    (lambdarank) takes integer grades within each list, and early stopping
    watches the shared NDCG@10 of ``vali`` on ``vali_targets`` (default: its
    labels, i.e. NDCG_y@10); a regression takes values, and early stopping
    watches ``params["metric"]`` (e.g. ``l2``) on ``vali_targets``. With
    ``early_stopping_rounds`` 0 the booster keeps every tree it grew (its
    ``best_iteration`` is 0), and the validation score is computed every
    ``eval_every`` trees (NaN in between). ``callbacks`` are extra LightGBM
    callbacks (e.g. a tuner's pruning), called after every tree. LightGBM's log
    goes to this module's logger.
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
    extra = list(callbacks or [])
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
            # Early stopping needs every tree's score; otherwise a sample is enough.
            every = 1 if early_stopping_rounds else eval_every
            feval = (
                _validation_ndcg(vali, vali_targets, name, every=every, trees=trees)
                if ranking
                else None
            )
    if valid_sets and early_stopping_rounds:
        callbacks.append(
            lgb.early_stopping(early_stopping_rounds, first_metric_only=True, verbose=True)
        )
    callbacks += extra
    booster = lgb.train(
        params,
        train_set,
        num_boost_round=trees,
        valid_sets=valid_sets,
        valid_names=["vali"] if valid_sets else None,
        feval=feval,
        callbacks=callbacks,
    )
    if not (valid_sets and early_stopping_rounds):
        # Without early stopping the whole budget is the model: nothing may cut it.
        booster.best_iteration = 0
    # LightGBM hands back an early-stopped booster already cut to its best
    # iteration; the history counts the trees that were grown.
    grown = max(history.grown, booster.current_iteration())
    if grown < trees and not booster.best_iteration:
        logger.warning(
            "LightGBM grew %d of %d trees: no further split met its requirements", grown, trees
        )
    elif booster.best_iteration:
        logger.info(
            "early stopping after %d of %d trees kept the best %d",
            grown,
            trees,
            booster.best_iteration,
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


def train_gbdt(
    config: GBDTConfig, *, callbacks: list | None = None, existing: str = "refuse"
) -> dict:
    """Trains, evaluates every split; returns ``metrics.json``'s content.

    Args:
      config: the run's settings.
      callbacks: extra LightGBM callbacks, called after every tree (e.g. a
        tuner's pruning, which may raise to end the run).
      existing: what to do with a run already in ``model_dir`` (see
        ``run_directory``; a GBDT run is replaced, never resumed).
    """
    with run_session(config.model_dir, config.to_json(), existing=existing, resumable=False) as s:
        if s == "complete":
            with open(os.path.join(config.model_dir, METRICS_NAME), encoding="utf-8") as f:
                return json.load(f)
        return _train_gbdt(config, callbacks)


def _train_gbdt(config: GBDTConfig, callbacks: list | None) -> dict:
    manifest = data.load_manifest(config.data)
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
        eval_every=config.eval_every,
        callbacks=callbacks,
    )
    seconds = time.perf_counter() - started
    kept = booster.best_iteration or booster.current_iteration()
    save_booster(booster, config.model_dir)
    history.write(os.path.join(config.model_dir, "history.csv"))
    max_label = data.label_levels(manifest)
    # Scoring on the training threads: LightGBM's default (every core) can be far
    # slower on a machine that other work keeps busy.
    threads = params["num_threads"]
    metrics = {
        split: evaluate_arrays(
            score_arrays(booster, arrays, num_threads=threads), arrays, max_label=max_label
        )
        for split, arrays in splits.items()
    }
    metrics["training"] = {
        "trees": kept,
        "trees_grown": max(history.grown, booster.current_iteration()),
        "trees_budget": int(params["num_iterations"]),
        "early_stopping_rounds": config.early_stopping_rounds,
        "seconds": seconds,
        "lists": train.num_lists,
        "items": int(len(train.label)),
        "lightgbm_params": params,
        "lightgbm_version": lgb.__version__,
    }
    metrics["settings"] = config.to_json()
    write_json(os.path.join(config.model_dir, METRICS_NAME), metrics)
    return metrics
