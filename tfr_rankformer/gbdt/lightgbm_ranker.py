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

This module holds the run: ``train_gbdt`` and the files of its directory. The
run's settings (``GBDTConfig``, the presets) are in ``gbdt_config``; fitting,
saving, loading and scoring a booster in ``gbdt_booster``. Their public names
are re-exported here (``gbdt.GBDTConfig``, ``gbdt.load_booster``, ...).
"""

from __future__ import annotations

import json
import logging
import os
import time

import lightgbm as lgb

from tfr_rankformer.core.config_io import write_json
from tfr_rankformer.core.run_directory import run_session
from tfr_rankformer.gbdt.gbdt_booster import (
    MODEL_FILE,
    evaluate_arrays,
    fit_booster,
    integer_labels,
    is_gbdt_run,
    load_booster,
    save_booster,
    score_arrays,
)
from tfr_rankformer.gbdt.gbdt_config import PRESETS, GBDTConfig, canonical_params
from tfr_rankformer.inputs import data
from tfr_rankformer.inputs.empty_splits import without_empty_splits
from tfr_rankformer.inputs.list_arrays import read_split

__all__ = [
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

CONFIG_NAME = "config.json"
METRICS_NAME = "metrics.json"


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
    # Before the run directory opens: an empty train split is refused, empty
    # vali and test splits are left out (with a warning).
    manifest = without_empty_splits(data.load_manifest(config.data), data_dir=config.data)
    with run_session(config.model_dir, config.to_json(), existing=existing, resumable=False) as s:
        if s == "complete":
            with open(os.path.join(config.model_dir, METRICS_NAME), encoding="utf-8") as f:
                return json.load(f)
        return _train_gbdt(config, manifest, callbacks)


def _train_gbdt(config: GBDTConfig, manifest, callbacks: list | None) -> dict:
    write_json(os.path.join(config.model_dir, CONFIG_NAME), config.to_json())
    splits = {split: read_split(config.data, manifest, split) for split in manifest.splits}
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
        integer_labels(train, "train"),
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
    logger.info("trained in %.0f s; evaluating every split", seconds)
    metrics = _evaluate_splits(booster, splits, manifest.label_levels, params["num_threads"])
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


def _evaluate_splits(booster: lgb.Booster, splits: dict, max_label: int, threads: int) -> dict:
    """Each split's metrics, scored on the training's ``threads``: LightGBM's default
    (every core) can be far slower on a machine that other work keeps busy."""
    started = time.perf_counter()
    metrics = {
        split: evaluate_arrays(
            score_arrays(booster, arrays, num_threads=threads), arrays, max_label=max_label
        )
        for split, arrays in splits.items()
    }
    logger.info("evaluated in %.0f s", time.perf_counter() - started)
    return metrics
