"""Reloading a trained feature-vector run (neural or GBDT) and evaluating it.

The text runs' counterpart is ``text_runs``; ``runner.evaluate`` picks between
them (``run_layout.is_text_run``) and runs the evaluator either gives.
"""

from __future__ import annotations

import json
import os

import tensorflow as tf

from tfr_rankformer.core.run_layout import BEST_WEIGHTS, CONFIG_NAME
from tfr_rankformer.gbdt import lightgbm_ranker as gbdt
from tfr_rankformer.gbdt.gbdt_booster import evaluate_arrays, load_booster, score_arrays
from tfr_rankformer.inputs import data
from tfr_rankformer.inputs.empty_splits import empty_split_error, empty_splits
from tfr_rankformer.inputs.list_arrays import read_split
from tfr_rankformer.inputs.manifest import Manifest
from tfr_rankformer.inputs.record_checks import check_split_files
from tfr_rankformer.ranking.evaluation import RunEvaluator, evaluate_model
from tfr_rankformer.training.precision import precision_policy
from tfr_rankformer.training.train_config import TrainConfig
from tfr_rankformer.training.training_setup import build_run_model

__all__ = ["load_run", "feature_run_evaluator", "gbdt_run_evaluator"]


def load_run(model_dir: str) -> tuple[TrainConfig, dict, tf.keras.Model]:
    """The run's settings, its training manifest, and its model with the best weights.

    The model is built from the training data's manifest, so it normalises
    features with the statistics it was trained with, and in float32 whatever
    the run's ``precision`` (its weights are float32 in any case).

    Raises:
      FileNotFoundError: if ``model_dir`` is not a trained run.
    """
    config_path = os.path.join(model_dir, CONFIG_NAME)
    weights = os.path.join(model_dir, BEST_WEIGHTS)
    if not os.path.isfile(config_path) or not tf.io.gfile.exists(weights + ".index"):
        raise FileNotFoundError(
            f"{model_dir} is not a trained run: it needs {CONFIG_NAME} and {BEST_WEIGHTS}.* "
            "(written by tfr-train)"
        )
    with open(config_path, encoding="utf-8") as f:
        config = TrainConfig.from_json(json.load(f))
    manifest = data.load_manifest(config.data)
    with precision_policy("float32"):  # a mixed-precision run is reloaded to compute in float32
        model = build_run_model(config, manifest)
    try:
        # Every variable of the model must come from the checkpoint: a mismatch
        # (a run saved by a different model structure) must not pass silently.
        status = model.load_weights(weights)
        status.assert_existing_objects_matched()
        status.expect_partial()  # the checkpoint also holds the optimizer's state
    except AssertionError as e:
        raise ValueError(
            f"{model_dir}: the checkpoint does not match the {config.model!r} model this "
            f"version builds (retrain, or use the version that trained it): {e}"
        ) from None
    return config, manifest, model


def _evaluator(trained_on: str, num_features: int, data_dir: str | None, evaluate):
    """A ``RunEvaluator`` over the converted dataset ``data_dir`` (default: ``trained_on``),
    refusing one of another feature count; ``evaluate(data_dir, manifest, split)``."""
    data_dir = data_dir or trained_on
    manifest = data.load_manifest(data_dir)
    if manifest.num_features != num_features:
        raise ValueError(
            f"{data_dir} has {manifest.num_features} features; the model was trained on "
            f"{num_features}"
        )
    empty = empty_splits(manifest)

    def check(splits: list[str]) -> None:
        # A split without lists, or a shard cut short, is named before any
        # metric is computed or written.
        for split in (s for s in splits if s in empty):
            raise empty_split_error(
                manifest, split, data_dir=data_dir, then="there is nothing to evaluate"
            )
        check_split_files(data_dir, manifest, splits)

    return RunEvaluator(
        trained_on=trained_on,
        data_dir=data_dir,
        # Every split holding lists (tfr-train left the empty ones out too).
        splits=[split for split in manifest.splits if split not in empty],
        evaluate=lambda split: evaluate(data_dir, manifest, split),
        check=check,
    )


def feature_run_evaluator(model_dir: str, data_dir: str | None) -> RunEvaluator:
    """The evaluator of a trained neural feature-vector run on ``data_dir`` (default:
    its training data)."""
    config, train_manifest, model = load_run(model_dir)

    def evaluate(directory: str, manifest: Manifest, split: str) -> dict:
        dataset = data.evaluation_dataset(
            directory,
            manifest,
            split=split,
            batch_size=config.eval_batch_size,
            batch_items=config.evaluation_batch_items(),
        )
        return evaluate_model(
            model, dataset, max_label=manifest.label_levels, list_head=config.uses_list_head
        )

    return _evaluator(config.data, train_manifest.num_features, data_dir, evaluate)


def gbdt_run_evaluator(model_dir: str, data_dir: str | None) -> RunEvaluator:
    """The evaluator of a trained GBDT run on ``data_dir`` (default: its training data)."""
    with open(os.path.join(model_dir, gbdt.CONFIG_NAME), encoding="utf-8") as f:
        config = json.load(f)
    booster = load_booster(model_dir)

    def evaluate(directory: str, manifest: Manifest, split: str) -> dict:
        arrays = read_split(directory, manifest, split)
        scores = score_arrays(booster, arrays)
        return evaluate_arrays(scores, arrays, max_label=manifest.label_levels)

    return _evaluator(config["data"], booster.num_feature(), data_dir, evaluate)
