"""What a ``tfr-train`` run is made of: its losses, its model compiled for training, its
callbacks and the final evaluation of every split.

``training.train`` (the one loop) takes the callbacks from here; the
feature-vector family (``feature_family``) its model and final evaluation,
the text family (``text.text_family``) the loss assembly (``run_losses``).
The run's file names are ``run_layout``'s.
"""

from __future__ import annotations

import os

import tensorflow as tf

from tfr_rankformer.core.multi_worker import SharedValidation, WorkerRole
from tfr_rankformer.core.run_layout import (
    BACKUP_NAME,
    BEST_WEIGHTS,
    CONFIG_NAME,
    HISTORY_NAME,
    LOGS_NAME,
    METRICS_NAME,
)
from tfr_rankformer.inputs import data
from tfr_rankformer.inputs.manifest import Manifest
from tfr_rankformer.model.models import build_model, ranker_of
from tfr_rankformer.ranking.evaluation import evaluate_model
from tfr_rankformer.ranking.losses import OrdinalListLoss, get_score_loss
from tfr_rankformer.training.optimizers import build_optimizer
from tfr_rankformer.training.train_config import TrainConfig
from tfr_rankformer.training.training_callbacks import BestWeights, ProgressLines, Throughput

__all__ = [
    "run_losses",
    "weight_keeping",
    "BEST_WEIGHTS",
    "CONFIG_NAME",
    "METRICS_NAME",
    "HISTORY_NAME",
    "BACKUP_NAME",
    "item_levels",
    "build_run_model",
    "build_compiled_model",
    "run_callbacks",
    "evaluate_splits",
]


def item_levels(config: TrainConfig, manifest: Manifest) -> int | None:
    """Label levels of the item-level logits the loss needs (``None``: plain scores)."""
    if get_score_loss(config.loss).output == "item_levels":
        return manifest.label_levels
    return None


def build_run_model(config: TrainConfig, manifest: Manifest) -> tf.keras.Model:
    """The run's model (normalisation and ranker), untrained: a list head only when
    alpha > 0, item-level logits when the loss reads them."""
    levels = manifest.label_levels
    return build_model(
        config.model,
        manifest,
        config.architecture,
        levels if config.uses_list_head else None,
        item_levels=item_levels(config, manifest),
    )


def run_losses(config: TrainConfig, levels: int) -> tuple[dict, dict]:
    """The run's losses and their weights, by model output: the score loss, and the
    list head's ordinal loss weighted by alpha when the model has that head."""
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
    """The model, and its ranker compiled with the losses, the optimizer and its schedule.

    Training fits the ranker (normalised features); the model wraps it with the
    normalisation (raw features). Call inside a strategy scope.
    """
    levels = manifest.label_levels
    model = build_run_model(config, manifest)
    ranker = ranker_of(model)
    losses, weights = run_losses(config, levels)
    optimizer = build_optimizer(config, steps_per_epoch)
    ranker.compile(optimizer=optimizer, loss=losses, loss_weights=weights, jit_compile=xla)
    return model, ranker


def weight_keeping(
    config: TrainConfig,
    model: tf.keras.Model,
    *,
    has_vali: bool,
    worker: WorkerRole | None = None,
    strategy: tf.distribute.Strategy | None = None,
) -> tuple[list[tf.keras.callbacks.Callback], str]:
    """The callbacks that keep the run's weights and stop early, and the logged value
    they follow: validation NDCG_y@10 with a ``vali`` split, else the training loss.

    ``keep_weights="best"`` keeps the best epoch's weights and stops after
    ``patience`` epochs without a better one; ``"last"`` keeps every epoch's
    last weights and never stops early. ``worker`` and ``strategy``: see
    ``training_callbacks.BestWeights`` (multi-worker runs).
    """
    monitor, mode = ("val_ndcg_y@10", "max") if has_vali else ("loss", "min")
    last = config.keep_weights == "last"
    callbacks = [
        BestWeights(
            model,
            os.path.join(config.model_dir, BEST_WEIGHTS),
            monitor=None if last else monitor,
            mode=mode,
            history=os.path.join(config.model_dir, HISTORY_NAME),
            worker=worker,
            strategy=strategy,
        )
    ]
    if not last:
        callbacks.append(
            tf.keras.callbacks.EarlyStopping(monitor=monitor, mode=mode, patience=config.patience)
        )
    return callbacks, monitor


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
    """The training callbacks of every family, and the logged value that picks the best
    weights.

    ``validation`` (the family's, ``None`` without a ``vali`` split) adds the
    ``val_*`` metrics, before the callbacks that read them. Every worker
    evaluates, stops early and backs up alike; only the chief gets the callbacks
    that write (history, TensorBoard) and progress lines.
    """
    callbacks = [Throughput(lists, steps)]
    if validation is not None:
        callbacks.append(validation)
        if worker.multi_worker:
            callbacks.append(SharedValidation(strategy))
    kept, monitor = weight_keeping(
        config, model, has_vali=validation is not None, worker=worker, strategy=strategy
    )
    callbacks += kept
    callbacks += [
        # Under MultiWorkerMirroredStrategy Keras itself has the chief write
        # backup/chief/ and the others a backup/workertemp_<i>/ they delete;
        # every worker restores from backup/chief/.
        tf.keras.callbacks.BackupAndRestore(os.path.join(config.model_dir, BACKUP_NAME)),
    ]
    if worker.is_chief:
        callbacks += [
            tf.keras.callbacks.CSVLogger(os.path.join(config.model_dir, HISTORY_NAME), append=True),
            tf.keras.callbacks.TensorBoard(os.path.join(config.model_dir, LOGS_NAME)),
        ]
        if progress_lines:
            # Last, so that its epoch line shows the validation metrics.
            callbacks.append(ProgressLines(lists, steps, every_seconds=progress_seconds))
    return callbacks, monitor


def evaluate_splits(
    config: TrainConfig, manifest: Manifest, model: tf.keras.Model, splits=None
) -> dict:
    """The metrics of the whole model (raw features) on ``splits`` of the run's data
    (``None``: every split)."""
    return {
        split: evaluate_model(
            model,
            data.evaluation_dataset(
                config.data,
                manifest,
                split=split,
                batch_size=config.eval_batch_size,
                batch_items=config.evaluation_batch_items(),
            ),
            max_label=manifest.label_levels,
            list_head=config.uses_list_head,
        )
        for split in (manifest.splits if splits is None else splits)
    }
