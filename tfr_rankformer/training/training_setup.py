"""A neural run's compiled model, losses and callbacks; reloading a trained feature-vector
run; a run's evaluator over a converted dataset.
"""

from __future__ import annotations

import json
import os

import tensorflow as tf

from tfr_rankformer.core.multi_worker import SharedValidation, WorkerRole
from tfr_rankformer.core.run_layout import (
    BACKUP_NAME,
    BEST_WEIGHTS,
    CONFIG_NAME,
    HISTORY_NAME,
    LOGS_NAME,
)
from tfr_rankformer.inputs.empty_splits import empty_split_error, empty_splits
from tfr_rankformer.inputs.manifest import Manifest, load_manifest
from tfr_rankformer.inputs.record_checks import check_split_files
from tfr_rankformer.model.models import build_model, ranker_of
from tfr_rankformer.ranking.evaluation import RunEvaluator
from tfr_rankformer.ranking.losses import OrdinalListLoss, get_score_loss
from tfr_rankformer.training.optimizers import build_optimizer
from tfr_rankformer.training.precision import precision_policy
from tfr_rankformer.training.train_config import TrainConfig
from tfr_rankformer.training.training_callbacks import BestWeights, ProgressLines, Throughput


def item_levels(config: TrainConfig, manifest: Manifest) -> int | None:
    """Label levels of the item-level logits the loss needs (``None``: plain scores)."""
    if get_score_loss(config.loss).output == "item_levels":
        return manifest.label_levels
    return None


def build_run_model(config: TrainConfig, manifest: Manifest) -> tf.keras.Model:
    """The run's untrained model (a list head only when alpha > 0)."""
    levels = manifest.label_levels if config.uses_list_head else None
    items = item_levels(config, manifest)
    return build_model(config.model, manifest, config.architecture, levels, item_levels=items)


def run_losses(config: TrainConfig, levels: int) -> tuple[dict, dict]:
    """The run's losses and weights by output: the score loss, and alpha times the list
    head's ordinal loss."""
    score_loss = get_score_loss(config.loss)
    losses = {score_loss.output: score_loss.build(levels, config.loss_scaling)}
    weights = {score_loss.output: 1.0}
    if config.uses_list_head:
        level_mean = config.loss_scaling == "released"
        losses["list_quality"] = OrdinalListLoss(levels, level_mean=level_mean)
        weights["list_quality"] = config.alpha
    return losses, weights


def build_compiled_model(
    config: TrainConfig, manifest: Manifest, *, steps_per_epoch: int, xla: bool
) -> tuple[tf.keras.Model, tf.keras.Model]:
    """The model, and its ranker compiled for training (inside a strategy scope)."""
    model = build_run_model(config, manifest)
    ranker = ranker_of(model)
    losses, weights = run_losses(config, manifest.label_levels)
    optimizer = build_optimizer(config, steps_per_epoch)
    ranker.compile(optimizer=optimizer, loss=losses, loss_weights=weights, jit_compile=xla)
    return model, ranker


def run_callbacks(
    config: TrainConfig,
    model: tf.keras.Model,
    validation: tf.keras.callbacks.Callback | None,
    *,
    lists: int,
    steps: int,
    strategy: tf.distribute.Strategy,
    worker: WorkerRole,
    progress_lines: bool,
    progress_seconds: float,
) -> tuple[list[tf.keras.callbacks.Callback], str]:
    """Every family's training callbacks, and the logged value that picks the best weights:
    validation NDCG_y@10 with ``validation`` (the family's callback), else the loss.
    """
    callbacks = [Throughput(lists, steps)]
    if validation is not None:
        callbacks.append(validation)
        if worker.multi_worker:
            callbacks.append(SharedValidation(strategy))
    monitor, mode = ("val_ndcg_y@10", "max") if validation is not None else ("loss", "min")
    last = config.keep_weights == "last"
    callbacks.append(
        BestWeights(
            model,
            os.path.join(config.model_dir, BEST_WEIGHTS),
            monitor=None if last else monitor,
            mode=mode,
            history=os.path.join(config.model_dir, HISTORY_NAME),
            worker=worker,
            strategy=strategy,
        )
    )
    if not last:
        callbacks.append(
            tf.keras.callbacks.EarlyStopping(monitor=monitor, mode=mode, patience=config.patience)
        )
    # Multi-worker: every worker restores from the chief's backup/chief/.
    callbacks.append(
        tf.keras.callbacks.BackupAndRestore(os.path.join(config.model_dir, BACKUP_NAME))
    )
    if worker.is_chief:
        callbacks += [
            tf.keras.callbacks.CSVLogger(os.path.join(config.model_dir, HISTORY_NAME), append=True),
            tf.keras.callbacks.TensorBoard(os.path.join(config.model_dir, LOGS_NAME)),
        ]
        if progress_lines:
            # Last, so that its epoch line shows the validation metrics.
            callbacks.append(ProgressLines(lists, steps, every_seconds=progress_seconds))
    return callbacks, monitor


def load_run(model_dir: str) -> tuple[TrainConfig, Manifest, tf.keras.Model]:
    """A trained feature-vector run's settings, manifest and float32 model with the best
    weights; ``FileNotFoundError`` for no run, ``ValueError`` for a checkpoint that does
    not match."""
    config_path = os.path.join(model_dir, CONFIG_NAME)
    weights = os.path.join(model_dir, BEST_WEIGHTS)
    if not os.path.isfile(config_path) or not tf.io.gfile.exists(weights + ".index"):
        raise FileNotFoundError(
            f"{model_dir} is not a trained run: it needs {CONFIG_NAME} and {BEST_WEIGHTS}.* "
            "(written by tfr-train)"
        )
    with open(config_path, encoding="utf-8") as f:
        config = TrainConfig.from_json(json.load(f))
    manifest = load_manifest(config.data)
    with precision_policy("float32"):
        model = build_run_model(config, manifest)
    try:
        # Every variable must come from the checkpoint: a mismatch must not pass silently.
        status = model.load_weights(weights)
        status.assert_existing_objects_matched()
        status.expect_partial()  # the checkpoint also holds the optimizer's state
    except AssertionError as e:
        raise ValueError(
            f"{model_dir}: the checkpoint does not match the {config.model!r} model this "
            f"version builds (retrain, or use the version that trained it): {e}"
        ) from None
    return config, manifest, model


def data_evaluator(
    trained_on: str, num_features: int, data_dir: str | None, evaluate, limit=None
) -> RunEvaluator:
    """A ``RunEvaluator`` over ``data_dir`` (default: ``trained_on``) with
    ``evaluate(data_dir, manifest, split)``, refusing another feature count or lists over
    ``limit``."""
    data_dir = data_dir or trained_on
    manifest = load_manifest(data_dir)
    if manifest.num_features != num_features:
        raise ValueError(
            f"{data_dir} has {manifest.num_features} features; the model was trained on "
            f"{num_features}"
        )
    empty = empty_splits(manifest)

    def check(splits: list[str]) -> None:
        # An empty split, or a shard cut short, is named before any metric is written.
        for split in (s for s in splits if s in empty):
            then = "there is nothing to evaluate"
            raise empty_split_error(manifest, split, data_dir=data_dir, then=then)
        check_split_files(data_dir, manifest, splits)
        for split in splits if limit else ():
            where = f"the {split!r} split of {data_dir}"
            limit.check(manifest.split(split).longest_or(1), where=where)

    splits = [split for split in manifest.splits if split not in empty]
    return RunEvaluator(
        trained_on, data_dir, splits, lambda s: evaluate(data_dir, manifest, s), check
    )
