"""``tfr-train``'s library function: the paper's training protocol with tf.distribute.

``model_dir/`` receives ``config.json`` (the resolved settings), ``checkpoints/``
(the weights with the best validation NDCG_y@10), ``backup/`` (for resuming a
killed run), ``logs/`` (TensorBoard), ``history.csv`` (one row per epoch) and
``metrics.json`` (the final evaluation of every split).

The ranker (the model without its normalisation layer) is what ``fit`` trains,
on features normalised once per list in the input pipeline; evaluation and the
checkpoints use the whole model on raw features.

With a multi-worker ``TF_CONFIG`` every worker runs ``train`` with the same
settings and ``model_dir`` (shared storage, so a restarted job resumes from
the chief's backup); each reads its own shard of the training files, and only
the chief writes into ``model_dir``.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import shutil
import tempfile
import time

import numpy as np
import tensorflow as tf

from tfr_rankformer import compiled_ops, data, packed_items
from tfr_rankformer.command_names import KEEP_WEIGHTS, LR_SCHEDULES, OPTIMIZERS
from tfr_rankformer.config_io import write_json
from tfr_rankformer.evaluation import EvaluationCallback, evaluate_model
from tfr_rankformer.losses import OrdinalListLoss, get_score_loss
from tfr_rankformer.models import (
    build_model,
    normalization_of,
    ranker_of,
)
from tfr_rankformer.multi_worker import SharedValidation, WorkerRole, worker_role
from tfr_rankformer.optimizers import (
    EpochSchedule,
    InverseSqrtDecay,
    build_optimizer,
    learning_rate_schedule,
)
from tfr_rankformer.run_directory import check_run_directory, run_session
from tfr_rankformer.run_plan import RunPlan, check_memory, plan_run, shuffle_lists
from tfr_rankformer.train_config import TrainConfig
from tfr_rankformer.training_callbacks import (
    BestWeights,
    ProgressLines,
    Throughput,
    attached_to_terminal,
)

__all__ = [
    "TrainConfig",
    "InverseSqrtDecay",
    "EpochSchedule",
    "LR_SCHEDULES",
    "KEEP_WEIGHTS",
    "OPTIMIZERS",
    "build_optimizer",
    "learning_rate_schedule",
    "build_run_model",
    "choose_strategy",
    "train",
    "build_compiled_model",
    "BEST_WEIGHTS",
]

logger = logging.getLogger(__name__)

BEST_WEIGHTS = os.path.join("checkpoints", "best")
CONFIG_NAME = "config.json"
METRICS_NAME = "metrics.json"
HISTORY_NAME = "history.csv"
BACKUP_NAME = "backup"


def choose_strategy() -> tf.distribute.Strategy:
    """MultiWorkerMirrored when ``TF_CONFIG`` names several training workers (chief
    included), Mirrored on several GPUs, else the default strategy."""
    if worker_role().multi_worker:
        return tf.distribute.MultiWorkerMirroredStrategy()
    if len(tf.config.list_physical_devices("GPU")) > 1:
        return tf.distribute.MirroredStrategy()
    return tf.distribute.get_strategy()


def item_levels(config: TrainConfig, manifest: dict) -> int | None:
    """Label levels of the item-level logits the loss needs (``None``: plain scores)."""
    if get_score_loss(config.loss).output == "item_levels":
        return data.label_levels(manifest)
    return None


def build_run_model(config: TrainConfig, manifest: dict) -> tf.keras.Model:
    """The run's model (normalisation and ranker), untrained: a list head only when
    alpha > 0, item-level logits when the loss reads them."""
    levels = data.label_levels(manifest)
    return build_model(
        config.model,
        manifest,
        config.architecture,
        levels if config.uses_list_head else None,
        item_levels=item_levels(config, manifest),
    )


def build_compiled_model(
    config: TrainConfig, manifest: dict, *, steps_per_epoch: int, xla: bool
) -> tuple[tf.keras.Model, tf.keras.Model]:
    """The model, and its ranker compiled with the losses, the optimizer and its schedule.

    Training fits the ranker (normalised features); the model wraps it with the
    normalisation (raw features). Call inside a strategy scope.
    """
    levels = data.label_levels(manifest)
    model = build_run_model(config, manifest)
    ranker = ranker_of(model)
    score_loss = get_score_loss(config.loss)
    losses = {score_loss.output: score_loss.build(levels, config.loss_scaling)}
    weights = {score_loss.output: 1.0}
    if config.uses_list_head:
        level_mean = config.loss_scaling == "released"
        losses["list_quality"] = OrdinalListLoss(levels, level_mean=level_mean)
        weights["list_quality"] = config.alpha
    optimizer = build_optimizer(config, steps_per_epoch)
    ranker.compile(optimizer=optimizer, loss=losses, loss_weights=weights, jit_compile=xla)
    return model, ranker


def _callbacks(
    config: TrainConfig,
    model: tf.keras.Model,
    manifest: dict,
    *,
    lists: int,
    steps: int,
    strategy: tf.distribute.Strategy,
    worker: WorkerRole,
    progress_lines: bool,
    progress_seconds: float,
) -> tuple[list[tf.keras.callbacks.Callback], str]:
    """The training callbacks, and the logged value that picks the best weights.

    Every worker evaluates, stops early and backs up alike; only the chief
    gets the callbacks that write (history, TensorBoard) and progress lines.
    """
    callbacks = [Throughput(lists, steps)]
    has_vali = "vali" in manifest["splits"]
    if has_vali:
        vali = data.evaluation_dataset(
            config.data,
            manifest,
            split="vali",
            batch_size=config.eval_batch_size,
            batch_items=config.evaluation_batch_items(),
        )
        levels = data.label_levels(manifest)
        callbacks.append(
            EvaluationCallback(vali, max_label=levels, list_head=config.uses_list_head, model=model)
        )
        if worker.multi_worker:
            callbacks.append(SharedValidation(strategy))
    monitor = "val_ndcg_y@10" if has_vali else "loss"
    mode = "max" if has_vali else "min"
    best = os.path.join(config.model_dir, BEST_WEIGHTS)
    history_csv = os.path.join(config.model_dir, HISTORY_NAME)
    last = config.keep_weights == "last"
    callbacks.append(
        BestWeights(
            model,
            best,
            monitor=None if last else monitor,
            mode=mode,
            history=history_csv,
            worker=worker,
            strategy=strategy,
        )
    )
    if not last:
        callbacks.append(
            tf.keras.callbacks.EarlyStopping(monitor=monitor, mode=mode, patience=config.patience)
        )
    callbacks += [
        # Under MultiWorkerMirroredStrategy Keras itself has the chief write
        # backup/chief/ and the others a backup/workertemp_<i>/ they delete;
        # every worker restores from backup/chief/.
        tf.keras.callbacks.BackupAndRestore(os.path.join(config.model_dir, BACKUP_NAME)),
    ]
    if worker.is_chief:
        callbacks += [
            tf.keras.callbacks.CSVLogger(history_csv, append=True),
            tf.keras.callbacks.TensorBoard(os.path.join(config.model_dir, "logs")),
        ]
        if progress_lines:
            # Last, so that its epoch line shows the validation metrics.
            callbacks.append(ProgressLines(lists, steps, every_seconds=progress_seconds))
    return callbacks, monitor


def recorded_metrics(config: TrainConfig) -> dict:
    """A complete run's ``metrics.json`` (what ``--resume`` of it returns)."""
    with open(os.path.join(config.model_dir, METRICS_NAME), encoding="utf-8") as f:
        return json.load(f)


def _evaluate_splits(config: TrainConfig, manifest: dict, model: tf.keras.Model) -> dict:
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
            max_label=data.label_levels(manifest),
            list_head=config.uses_list_head,
        )
        for split in manifest["splits"]
    }


def train(
    config: TrainConfig,
    *,
    verbose: int = 1,
    final_weights: str | None = None,
    callbacks: list | None = None,
    progress_seconds: float = 30.0,
    existing: str = "refuse",
) -> dict:
    """Trains, keeps the best weights, evaluates every split; returns ``metrics.json``'s content.

    Args:
      config: the run's settings.
      verbose: ``fit``'s progress output. Where standard output or error is
        not a terminal, ``1`` (the progress bar) becomes a progress line every
        ``progress_seconds`` seconds and at each epoch's end (INFO log records):
        step, lists/s and the epoch's ETA.
      final_weights: if given, this worker also writes the weights it ended
        training with (before the best ones are reloaded) to this ``.npz`` file,
        one array per model weight in ``model.get_weights()`` order.
      callbacks: extra Keras callbacks, run after the training loop's own (so
        their logs hold the epoch's ``val_*`` metrics), e.g. a tuner's pruning.
      progress_seconds: see ``verbose``.
      existing: what to do with a run already in ``model_dir`` (``refuse``,
        ``resume``, ``overwrite``: see ``run_directory``).

    Returns:
      The metrics; ``{}`` on a multi-worker job's non-chief workers, which
      train alongside the chief but neither evaluate nor write the run.
    """
    if config.is_text:
        from tfr_rankformer.text_training import train_text

        # Text runs log one line per epoch where no terminal shows the bar.
        text_verbose = 2 if verbose == 1 and not attached_to_terminal() else verbose
        return train_text(
            config, verbose=text_verbose, final_weights=final_weights, existing=existing
        )
    # First: MultiWorkerMirroredStrategy must set up the cluster before
    # TensorFlow's runtime starts.
    strategy = choose_strategy()
    worker = worker_role()
    tf.keras.utils.set_random_seed(config.seed)
    manifest = data.load_manifest(config.data)
    gpu = bool(tf.config.list_physical_devices("GPU"))
    mixed = gpu if config.mixed_precision is None else config.mixed_precision
    xla = gpu if config.xla is None else config.xla

    run = plan_run(config, manifest, data_dir=config.data, worker=worker)
    if run.batches.lists == 0:
        raise ValueError(f"{config.data}: no training list passes the training-list policy")
    logger.info("plan: %s", run.describe())
    settings = config.to_json()
    if worker.is_chief:  # refusals come before anything is written
        check_run_directory(config.model_dir, settings, existing=existing)
    check_memory(run, config)
    session = (
        run_session(config.model_dir, settings, existing=existing)
        if worker.is_chief
        else contextlib.nullcontext("resume")
    )
    with session as start:
        if start == "complete":
            logger.info("%s is complete: nothing left to train", config.model_dir)
            return recorded_metrics(config)
        if worker.is_chief:
            write_json(os.path.join(config.model_dir, CONFIG_NAME), settings)
        return _train(
            config,
            manifest,
            run,
            strategy,
            worker,
            mixed=mixed,
            xla=xla,
            verbose=verbose,
            final_weights=final_weights,
            callbacks=callbacks,
            progress_seconds=progress_seconds,
        )


def _train(
    config: TrainConfig,
    manifest: dict,
    run: RunPlan,
    strategy: tf.distribute.Strategy,
    worker: WorkerRole,
    *,
    mixed: bool,
    xla: bool,
    verbose: int,
    final_weights: str | None,
    callbacks: list | None,
    progress_seconds: float,
) -> dict:
    """``train``'s work inside the run directory."""
    lists, steps = run.batches.lists, run.batches.steps
    include_empty = config.training_includes_empty_lists()
    # The precision policy applies to the layers built under it, then is restored.
    policy = tf.keras.mixed_precision.global_policy()
    if mixed:
        tf.keras.mixed_precision.set_global_policy("mixed_float16")
    try:
        with strategy.scope():
            model, ranker = build_compiled_model(config, manifest, steps_per_epoch=steps, xla=xla)
    finally:
        tf.keras.mixed_precision.set_global_policy(policy)
    # Lists too large to cache in memory are cached on disk for the run.
    cache_dir = tempfile.mkdtemp(prefix="tfr-train-cache-")
    train_data = data.training_dataset(
        config.data,
        manifest,
        plan=run.batches,
        list_cap=run.cap,
        include_empty_lists=include_empty,
        with_list_head=config.uses_list_head,
        with_item_levels=item_levels(config, manifest) is not None,
        keep_order=config.architecture.positional_encoding != "none",
        seed=config.seed,
        shuffle_buffer=shuffle_lists(manifest),
        normalize=normalization_of(model),
        cache_file=os.path.join(cache_dir, "train"),
        worker=worker,
        pad_to_longest=not config.length_buckets,
    )
    extra = list(callbacks or [])
    lines = verbose == 1 and not attached_to_terminal()
    callbacks, monitor = _callbacks(
        config,
        model,
        manifest,
        lists=lists,
        steps=steps,
        strategy=strategy,
        worker=worker,
        progress_lines=lines,
        progress_seconds=progress_seconds,
    )
    callbacks += extra
    logger.info(
        "training %s on %d lists/epoch (%s t = 0 lists), %d steps/epoch, "
        "strategy %s (worker %d of %d), mixed precision %s, XLA %s",
        config.model,
        lists,
        "with" if include_empty else "without",
        steps,
        type(strategy).__name__,
        worker.index,
        worker.count,
        mixed,
        xla,
    )
    started = time.perf_counter()
    # XLA's compiled pieces compile once per batch shape: worth it for one shape
    # (one bucket; batches padded to their longest list take a shape each).
    # Batches of many shapes carry padding instead: their encoder layers run the
    # item-wise parts on the valid items alone (packed_items).
    buckets = sum(1 for count in run.batches.counts if count)
    one_shape = buckets == 1 and config.length_buckets
    try:
        with compiled_ops.default(one_shape), packed_items.default(not one_shape):
            history = ranker.fit(
                train_data,
                epochs=config.epochs,
                callbacks=callbacks,
                verbose=0 if lines else verbose,
            )
    finally:
        shutil.rmtree(cache_dir, ignore_errors=True)
    seconds = time.perf_counter() - started
    try:
        os.rmdir(os.path.join(config.model_dir, BACKUP_NAME))  # emptied once training completes
    except OSError:
        pass  # absent, or still holding a backup another worker has not cleared yet
    if final_weights:
        np.savez(final_weights, *model.get_weights())
    if not worker.is_chief:
        return {}
    best = os.path.join(config.model_dir, BEST_WEIGHTS)
    if tf.io.gfile.exists(best + ".index"):
        model.load_weights(best)
    metrics = _evaluate_splits(config, manifest, model)
    metrics["training"] = {
        "epochs_completed": history.epoch[-1] + 1 if history.epoch else 0,
        "epochs_this_run": len(history.epoch),
        "seconds": seconds,
        "lists_per_epoch": lists,
        "steps_per_epoch": steps,
        "items_per_epoch": run.items,
        "padded_items_per_epoch": run.batches.padded_items(),
        "items_left_out_per_epoch": run.sampled_out,
        "buckets": {
            str(e): {"lists": c, "lists_per_batch": b}
            for e, b, c in zip(run.batches.edges, run.batches.lists_per_batch, run.batches.counts)
            if c
        },
        "estimated_peak_bytes": run.memory.peak,
        "lists_per_sec": history.history.get("lists_per_sec", [None])[-1],
        "monitor": monitor,
        "strategy": type(strategy).__name__,
        "workers": worker.count,
        "mixed_precision": mixed,
        "xla": xla,
    }
    metrics["settings"] = config.to_json()
    write_json(os.path.join(config.model_dir, METRICS_NAME), metrics)
    return metrics
