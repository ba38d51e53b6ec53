"""Reloading a trained run from its ``model_dir``: settings, model and best weights."""

from __future__ import annotations

import json
import os

import tensorflow as tf

from tfr_rankformer import data, gbdt
from tfr_rankformer.config_io import write_json
from tfr_rankformer.evaluation import evaluate_model
from tfr_rankformer.gbdt_booster import evaluate_arrays, is_gbdt_run, load_booster, score_arrays
from tfr_rankformer.list_arrays import read_split
from tfr_rankformer.record_checks import check_split_files
from tfr_rankformer.training import (
    BEST_WEIGHTS,
    CONFIG_NAME,
    METRICS_NAME,
    TrainConfig,
    build_run_model,
)

__all__ = ["load_run", "evaluate_run"]


def load_run(model_dir: str) -> tuple[TrainConfig, dict, tf.keras.Model]:
    """The run's settings, its training manifest, and its model with the best weights.

    The model is built from the training data's manifest, so it normalises
    features with the statistics it was trained with.

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


def _gbdt_evaluator(model_dir: str):
    with open(os.path.join(model_dir, gbdt.CONFIG_NAME), encoding="utf-8") as f:
        config = json.load(f)
    booster = load_booster(model_dir)

    def evaluate(data_dir: str, manifest: dict, split: str) -> dict:
        arrays = read_split(data_dir, manifest, split)
        scores = score_arrays(booster, arrays)
        return evaluate_arrays(scores, arrays, max_label=data.label_levels(manifest))

    return config["data"], booster.num_feature(), evaluate


def _neural_evaluator(model_dir: str):
    config, train_manifest, model = load_run(model_dir)

    def evaluate(data_dir: str, manifest: dict, split: str) -> dict:
        dataset = data.evaluation_dataset(
            data_dir,
            manifest,
            split=split,
            batch_size=config.eval_batch_size,
            batch_items=config.evaluation_batch_items(),
        )
        return evaluate_model(
            model, dataset, max_label=data.label_levels(manifest), list_head=config.uses_list_head
        )

    return config.data, train_manifest["num_features"], evaluate


def evaluate_run(
    model_dir: str, *, data_dir: str | None = None, splits: list[str] | None = None
) -> dict:
    """Evaluates a trained run (neural, GBDT or the text Listformer) on ``splits`` of
    ``data_dir`` (default: its training data).

    The results are merged into ``model_dir/metrics.json`` (a different dataset
    is recorded under ``"<split>@<data_dir>"``) and returned.

    Raises:
      ValueError: the manifest does not parse, or a shard is cut short or
        corrupt (``record_checks.RecordFileError``, naming file and record).
    """
    from tfr_rankformer.text_runs import is_text_run, text_run_evaluator

    if is_text_run(model_dir):
        trained_on, available, evaluate = text_run_evaluator(model_dir, data_dir)
        data_dir = data_dir or trained_on
        manifest = None
    else:
        evaluator = _gbdt_evaluator if is_gbdt_run(model_dir) else _neural_evaluator
        trained_on, num_features, evaluate = evaluator(model_dir)
        data_dir = data_dir or trained_on
        manifest = data.load_manifest(data_dir)
        if manifest["num_features"] != num_features:
            raise ValueError(
                f"{data_dir} has {manifest['num_features']} features; the model was trained on "
                f"{num_features}"
            )
        available = list(manifest["splits"])
    splits = splits or available
    if manifest is not None:
        # A shard cut short is named here, before any metric is computed or written.
        check_split_files(data_dir, manifest, splits)
    same_data = os.path.abspath(data_dir) == os.path.abspath(trained_on)
    results = {}
    for split in splits:
        key = split if same_data else f"{split}@{data_dir}"
        results[key] = evaluate(data_dir, manifest, split)
    path = os.path.join(model_dir, METRICS_NAME)
    stored = {}
    if os.path.isfile(path):
        with open(path, encoding="utf-8") as f:
            stored = json.load(f)
    stored.update(results)
    write_json(path, stored)
    return results
