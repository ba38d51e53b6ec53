"""LightGBM boosters: fitting, saving, loading, scoring and evaluating them."""

from __future__ import annotations

import csv
import logging
import os
import time
from collections.abc import Callable

import lightgbm as lgb
import numpy as np

from tfr_rankformer.core.atomic_files import atomic_path, atomic_write
from tfr_rankformer.inputs.list_arrays import ListArrays
from tfr_rankformer.ranking.ranking_metrics import evaluate_rankings

logger = logging.getLogger(__name__)

MODEL_FILE = "model.txt"


def is_gbdt_run(model_dir: str) -> bool:
    """Whether ``model_dir`` holds a GBDT (``model.txt``) rather than a neural run."""
    return os.path.isfile(os.path.join(model_dir, MODEL_FILE))


def integer_labels(arrays: ListArrays, what: str) -> np.ndarray:
    """``arrays``' labels as int32 grades (lambdarank's targets); refuses other labels."""
    labels = np.rint(arrays.label)
    if not np.array_equal(labels, arrays.label):
        raise ValueError(f"{what}: lambdarank needs integer labels")
    return labels.astype(np.int32)


class _History:
    """A LightGBM callback recording the validation metric per tree and logging progress."""

    def __init__(
        self,
        every: int,
        *,
        every_seconds: float = 20.0,
        clock: Callable[[], float] = time.perf_counter,
    ):
        self.every = every
        self.every_seconds = every_seconds
        self.clock = clock
        self.metric = "metric"
        self.rows: list[tuple[int, float]] = []
        self.grown = 0
        self.started = self.logged = clock()

    def __call__(self, env):
        trees = self.grown = env.iteration + 1
        scored = False
        if env.evaluation_result_list:
            _, self.metric, value, _ = env.evaluation_result_list[0]
            # NaN: a tree between two evaluations (see _validation_ndcg).
            scored = not np.isnan(value)
            if scored:
                self.rows.append((trees, value))
        now = self.clock()
        counted = scored and (trees % self.every == 0 or trees == env.end_iteration)
        if not (counted or now - self.logged >= self.every_seconds):
            return
        self.logged = now
        line = f"tree {trees}/{env.end_iteration}"
        if self.rows:
            last, value = self.rows[-1]
            line += f": validation {self.metric} {value:.4f}"
            line += "" if last == trees else f" at tree {last}"
        rate = trees / max(now - self.started, 1e-9)
        logger.info("%s (%.1f trees/s)", line, rate)

    def write(self, path: str) -> None:
        with atomic_write(path, newline="") as f:
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
    """A LightGBM ``feval``: the shared NDCG@10 (LightGBM's counts all-0 lists as perfect)
    after every ``every``-th and the last tree, NaN after the others."""
    padded_labels = vali.padded(labels.astype(np.float32), 0.0)
    mask = vali.mask()
    calls = [0]

    def feval(predictions, _dataset):
        calls[0] += 1
        if calls[0] % every and calls[0] != trees:
            return name, float("nan"), True
        scores = vali.padded(predictions.astype(np.float32), 0.0)
        metrics = evaluate_rankings(scores, padded_labels, padded_labels, mask, ks=(10,))
        return name, metrics.get("ndcg_y@10", float("nan")), True

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
    """Fits LightGBM on ``train`` items with ``targets``, optionally stopping early on ``vali``
    (ranking: the shared NDCG@10 on ``vali_targets``, default its labels; else ``metric``)."""
    lgb.register_logger(logger)
    params = dict(params)
    trees = int(params.pop("num_iterations"))
    ranking = params.get("objective") in ("lambdarank", "rank_xendcg")
    history = _History(log_every)
    # Early stopping needs every tree's score; otherwise a sample is enough.
    every = 1 if early_stopping_rounds else eval_every
    train_set, valid_sets, feval = _datasets(
        train, targets, vali, vali_targets, ranking=ranking, every=every, trees=trees
    )
    stopping = valid_sets and early_stopping_rounds
    stop = [lgb.early_stopping(early_stopping_rounds, first_metric_only=True)] if stopping else []
    booster = lgb.train(
        params,
        train_set,
        num_boost_round=trees,
        valid_sets=valid_sets,
        valid_names=["vali"] if valid_sets else None,
        feval=feval,
        callbacks=[history, *stop, *(callbacks or [])],
    )
    if not stopping:
        # Without early stopping the whole budget is the model: nothing may cut it.
        booster.best_iteration = 0
    _log_growth(booster, history, trees)
    return booster, history


def _datasets(train, targets, vali, vali_targets, *, ranking: bool, every: int, trees: int):
    """``lgb.train``'s training set, ``valid_sets`` (``[]``: nothing to watch) and ``feval``."""
    train_set = lgb.Dataset(
        train.features,
        label=targets,
        # Query groups only for ranking: with them LightGBM demands integer targets.
        group=train.sizes if ranking else None,
        feature_name=[f"f{i}" for i in range(1, train.features.shape[1] + 1)],
        free_raw_data=True,
    )
    if vali is None or not vali.num_lists:
        return train_set, [], None
    name = "ndcg_y@10" if vali_targets is None else "ndcg@10"
    vali_targets = integer_labels(vali, "vali") if vali_targets is None else vali_targets
    if ranking and not _counted_lists(vali_targets, vali):
        logger.warning("no validation list has targets that differ: no early stopping")
        return train_set, [], None
    valid_set = lgb.Dataset(
        vali.features,
        label=vali_targets,
        group=vali.sizes if ranking else None,
        reference=train_set,
    )
    feval = (
        _validation_ndcg(vali, vali_targets, name, every=every, trees=trees) if ranking else None
    )
    return train_set, [valid_set], feval


def _log_growth(booster: lgb.Booster, history: _History, trees: int) -> None:
    """Logs when LightGBM grew fewer than ``trees`` trees, or stopped early."""
    # An early-stopped booster is already cut to its best tree; the history counts all grown.
    grown, best = max(history.grown, booster.current_iteration()), booster.best_iteration
    if best:
        logger.info("early stopping after %d of %d trees kept the best %d", grown, trees, best)
    elif grown < trees:
        logger.warning(
            "LightGBM grew %d of %d trees: no further split met its requirements", grown, trees
        )


def save_booster(booster: lgb.Booster, model_dir: str) -> None:
    """Writes ``model_dir/model.txt``, up to the best iteration."""
    os.makedirs(model_dir, exist_ok=True)
    with atomic_path(os.path.join(model_dir, MODEL_FILE)) as partial:
        booster.save_model(partial, num_iteration=booster.best_iteration or None)


def load_booster(model_dir: str) -> lgb.Booster:
    """The LightGBM model of a GBDT run or a distilled student (``FileNotFoundError``: none)."""
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
    """Per-item scores ``[num_items]`` float32, at the best iteration if early stopping set one."""
    if not arrays.features.shape[0]:
        return np.zeros(0, np.float32)
    expected = booster.num_feature()
    if arrays.features.shape[1] != expected:
        raise ValueError(
            f"the data has {arrays.features.shape[1]} features; the GBDT was trained on {expected}"
        )
    options = {} if num_threads is None else {"num_threads": num_threads}
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
