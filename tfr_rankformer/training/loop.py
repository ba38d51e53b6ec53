"""The one training loop of every neural model, with tf.distribute: the family object
supplies what differs; the loop does the memory refusal, the run directory, the callbacks,
the fit and the final evaluation. Under a multi-worker ``TF_CONFIG`` the chief writes.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import os
import tempfile
import time
from typing import Any

import numpy as np
import tensorflow as tf

from tfr_rankformer.core.config_io import write_json
from tfr_rankformer.core.model_spec import RunFamily
from tfr_rankformer.core.multi_worker import WorkerRole, worker_role
from tfr_rankformer.core.run_directory import check_run_directory, run_session
from tfr_rankformer.core.run_layout import BACKUP_NAME, BEST_WEIGHTS, CONFIG_NAME, METRICS_NAME
from tfr_rankformer.training.precision import (
    cpu_precision_warning,
    native_bf16_cpu,
    precision_policy,
    resolve_precision,
)
from tfr_rankformer.training.run_plan import check_memory
from tfr_rankformer.training.train_config import TrainConfig
from tfr_rankformer.training.training_callbacks import attached_to_terminal
from tfr_rankformer.training.training_setup import run_callbacks

logger = logging.getLogger(__name__)


def choose_strategy() -> tf.distribute.Strategy:
    """MultiWorkerMirrored for several workers, Mirrored on several GPUs, else the default."""
    if worker_role().multi_worker:
        return tf.distribute.MultiWorkerMirroredStrategy()
    if len(tf.config.list_physical_devices("GPU")) > 1:
        return tf.distribute.MirroredStrategy()
    return tf.distribute.get_strategy()


@dataclasses.dataclass(frozen=True)
class PreparedRun:
    """What a family's ``prepare`` settled before the run directory opens.

    Attributes:
      config: the resolved settings ``config.json`` records (a pretrained start's sizes).
      plan: the batches and the memory estimate (``run_plan.RunPlan``).
      levels: label levels above 0 the losses and metrics use.
      splits: the data's splits, ``train`` first.
      data: the family's view of the data (a ``Manifest``, a ``TextData`` ...).
      extra: whatever else the family needs later (vocabulary, tokenizer ...).
      memory_hints: ``run_plan.check_memory``'s options for the family's flags.
    """

    config: Any
    plan: Any
    levels: int
    splits: tuple[str, ...]
    data: Any
    extra: Any = None
    memory_hints: dict = dataclasses.field(default_factory=dict)


@dataclasses.dataclass(frozen=True)
class _Run:
    """What ``train`` settled before opening the run directory, with its options."""

    family: RunFamily
    prepared: PreparedRun
    strategy: tf.distribute.Strategy
    worker: WorkerRole
    precision: str
    xla: bool
    options: dict  # train's keyword options


def train(
    config: TrainConfig,
    family: RunFamily,
    *,
    verbose: int = 1,
    final_weights: str | None = None,
    callbacks: list | None = None,
    progress_seconds: float = 30.0,
    existing: str = "refuse",
) -> dict:
    """Trains a neural model, keeps the best weights, evaluates every split; returns
    ``metrics.json``'s content (``{}`` on non-chief workers).

    ``verbose`` 1 without a terminal logs progress lines every ``progress_seconds``;
    ``final_weights``: also write the last weights to this ``.npz``; ``callbacks`` run
    after the loop's own; ``existing``: ``refuse``, ``resume`` or ``overwrite`` a run.
    ``run_plan.MemoryLimitError`` refuses a run that would not fit, before its first step.
    """
    chief = worker_role().is_chief
    if chief and existing == "refuse":  # refused before the data is read
        check_run_directory(config.model_dir, config.to_json(), existing=existing)
    # First: MultiWorkerMirroredStrategy must set up the cluster before the runtime starts.
    strategy = choose_strategy()
    worker = worker_role()
    tf.keras.utils.set_random_seed(config.seed)
    prepared = family.prepare(config, worker=worker)
    if prepared.plan.batches.lists == 0:
        raise ValueError(
            f"{config.data}: no training list passes the training-list policy "
            "(--include-empty-lists trains on lists without a relevant item)"
        )
    logger.info("plan: %s", prepared.plan.describe())
    gpu = bool(tf.config.list_physical_devices("GPU"))
    precision = _precision(config, family.record.mixed_precision, gpu=gpu)
    xla = gpu if config.xla is None else config.xla
    options = dict(verbose=verbose, final_weights=final_weights, callbacks=callbacks)
    options.update(progress_seconds=progress_seconds)
    run = _Run(family, prepared, strategy, worker, precision, xla, options)
    settings = prepared.config.to_json()  # resolved: a pretrained start's sizes
    if worker.is_chief:  # refusals come before anything is written
        check_run_directory(config.model_dir, settings, existing=existing)
    check_memory(prepared.plan, prepared.config, **prepared.memory_hints)
    session = (
        run_session(config.model_dir, settings, existing=existing)
        if worker.is_chief
        else contextlib.nullcontext("resume")
    )
    with session as start:
        if start == "complete":
            logger.info("%s is complete: nothing left to train", config.model_dir)
            with open(os.path.join(config.model_dir, METRICS_NAME), encoding="utf-8") as f:
                return json.load(f)
        if worker.is_chief:  # the settings, and the files the family adds
            write_json(os.path.join(config.model_dir, CONFIG_NAME), settings)
            family.write_start(prepared)
        return _train(run)


def _precision(config: TrainConfig, mixed: bool, *, gpu: bool) -> str:
    """The run's precision (``mixed``: whether the family may), warning if slow here."""
    precision = resolve_precision(config.precision, config.mixed_precision, gpu=gpu and mixed)
    warning = cpu_precision_warning(precision, gpu=gpu, native_bf16=gpu or native_bf16_cpu())
    if warning:
        logger.warning(warning)
    return precision


def _train(run: _Run) -> dict:
    config, worker, plan, options = run.prepared.config, run.worker, run.prepared.plan, run.options
    # The precision policy applies to the layers built under it, then is restored.
    with precision_policy(run.precision), run.strategy.scope():
        model, fitted = run.family.build(
            run.prepared, steps_per_epoch=plan.batches.steps, xla=run.xla
        )
    lines = options["verbose"] == 1 and not attached_to_terminal()
    has_vali = "vali" in run.prepared.splits
    validation = run.family.validation(run.prepared, model) if has_vali else None
    callbacks, monitor = run_callbacks(
        config,
        model,
        validation,
        lists=plan.batches.lists,
        steps=plan.batches.steps,
        strategy=run.strategy,
        worker=worker,
        progress_lines=lines,
        progress_seconds=options["progress_seconds"],
    )
    callbacks += list(options["callbacks"] or [])
    logger.info(
        "training %s on %d lists/epoch (%s t = 0 lists), %d steps/epoch, "
        "strategy %s (worker %d of %d), precision %s, XLA %s",
        config.model,
        plan.batches.lists,
        "with" if config.training_includes_empty_lists() else "without",
        plan.batches.steps,
        type(run.strategy).__name__,
        worker.index,
        worker.count,
        run.precision,
        run.xla,
    )
    with tempfile.TemporaryDirectory(prefix="tfr-train-cache-", ignore_cleanup_errors=True) as d:
        train_data = run.family.training_data(run.prepared, model, d)
        started = time.perf_counter()
        with run.family.fitting(run.prepared):
            verbose = 0 if lines else options["verbose"]
            history = fitted.fit(
                train_data, epochs=config.epochs, callbacks=callbacks, verbose=verbose
            )
    seconds = time.perf_counter() - started
    with contextlib.suppress(OSError):  # absent, or holding another worker's backup still
        os.rmdir(os.path.join(config.model_dir, BACKUP_NAME))  # emptied once training completes
    if options["final_weights"]:
        np.savez(options["final_weights"], *model.get_weights())
    if not worker.is_chief:
        return {}
    best = os.path.join(config.model_dir, BEST_WEIGHTS)
    if tf.io.gfile.exists(best + ".index"):
        model.load_weights(best)
    splits = config.final_splits(run.prepared.splits)
    logger.info("trained in %.0f s; evaluating %s", seconds, ", ".join(splits) or "no split")
    evaluating = time.perf_counter()
    metrics = run.family.evaluate(run.prepared, model, splits)
    logger.info("evaluated in %.0f s", time.perf_counter() - evaluating)
    metrics["training"] = _training_summary(run, history, seconds, monitor)
    metrics["settings"] = config.to_json()
    write_json(os.path.join(config.model_dir, METRICS_NAME), metrics)
    return metrics


def _training_summary(run: _Run, history, seconds: float, monitor: str) -> dict:
    """``metrics.json``'s ``training`` entry: what the run did and how fast."""
    plan = run.prepared.plan
    batches = plan.batches
    return {
        "epochs_completed": history.epoch[-1] + 1 if history.epoch else 0,
        "epochs_this_run": len(history.epoch),
        "seconds": seconds,
        "lists_per_epoch": batches.lists,
        "steps_per_epoch": batches.steps,
        "items_per_epoch": plan.items,
        "padded_items_per_epoch": batches.padded_items(),
        "items_left_out_per_epoch": plan.sampled_out,
        "buckets": {
            str(e): {"lists": c, "lists_per_batch": b}
            for e, b, c in zip(batches.edges, batches.lists_per_batch, batches.counts)
            if c
        },
        "estimated_peak_bytes": plan.memory.peak,
        "lists_per_sec": history.history.get("lists_per_sec", [None])[-1],
        "monitor": monitor,
        "strategy": type(run.strategy).__name__,
        "workers": run.worker.count,
        "precision": run.precision,
        "mixed_precision": run.precision != "float32",
        "xla": run.xla,
        **run.family.summary(run.prepared),
    }
