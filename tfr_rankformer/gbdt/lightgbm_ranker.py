"""A GBDT run: LightGBM's lambdarank on the lists with ``t > 0``, as the neural baselines, on
raw features (normalisation would only move the trees' thresholds)."""

from __future__ import annotations

import logging
import os
import time

import lightgbm as lgb

from tfr_rankformer.core.config_io import read_settings, write_json
from tfr_rankformer.core.run_directory import run_session
from tfr_rankformer.core.run_layout import CONFIG_NAME, HISTORY_NAME, METRICS_NAME
from tfr_rankformer.gbdt.gbdt_booster import (
    evaluate_arrays,
    fit_booster,
    integer_labels,
    save_booster,
    score_arrays,
)
from tfr_rankformer.gbdt.gbdt_config import GBDTConfig
from tfr_rankformer.inputs.empty_splits import without_empty_splits
from tfr_rankformer.inputs.feature_signal import varies_within_lists, warn_fixed_within_lists
from tfr_rankformer.inputs.list_arrays import read_split
from tfr_rankformer.inputs.manifest import load_manifest

logger = logging.getLogger(__name__)


def train_gbdt(
    config: GBDTConfig, *, callbacks: list | None = None, existing: str = "refuse"
) -> dict:
    """Trains, evaluates every split; returns ``metrics.json``'s content. ``callbacks``:
    extra LightGBM callbacks; ``existing``: see ``run_directory`` (never resumed)."""
    manifest = without_empty_splits(load_manifest(config.data), data_dir=config.data)
    with run_session(config.model_dir, config.to_json(), existing=existing, resumable=False) as s:
        if s == "complete":
            return read_settings(os.path.join(config.model_dir, METRICS_NAME))
        return _train_gbdt(config, manifest, callbacks)


def _train_gbdt(config: GBDTConfig, manifest, callbacks: list | None) -> dict:
    write_json(os.path.join(config.model_dir, CONFIG_NAME), config.to_json())
    splits = {split: read_split(config.data, manifest, split) for split in manifest.splits}
    train = splits["train"]
    if not config.include_empty_lists:
        train = train.select(train.list_labels() > 0)
    if not train.num_lists:
        raise ValueError(f"{config.data}: no training list passes the training-list policy")
    varies = varies_within_lists(train.features, train.offsets[:-1], train.sizes)
    warn_fixed_within_lists(manifest, varies, data_dir=config.data)
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
    history.write(os.path.join(config.model_dir, HISTORY_NAME))
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
