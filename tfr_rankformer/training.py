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

import dataclasses
import logging
import math
import os
import time

import numpy as np
import tensorflow as tf

from tfr_rankformer import data
from tfr_rankformer.config_io import from_dict, require_positive_ints, write_json
from tfr_rankformer.evaluation import EvaluationCallback, evaluate_model
from tfr_rankformer.losses import OrdinalListLoss, get_score_loss
from tfr_rankformer.models import (
    DEFAULT_ALPHA,
    MODELS,
    ModelConfig,
    build_model,
    has_list_head,
    normalization_of,
    ranker_of,
)
from tfr_rankformer.multi_worker import SharedValidation, WorkerRole, worker_role
from tfr_rankformer.training_callbacks import BestWeights, Throughput

__all__ = [
    "TrainConfig",
    "InverseSqrtDecay",
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


@dataclasses.dataclass(frozen=True)
class TrainConfig:
    """Settings of one training run; defaults follow the paper (Sec. 6.2).

    Attributes:
      model: a key of ``models.MODELS``.
      data: a converted dataset (``tfr-convert --output``).
      model_dir: where everything is written.
      epochs: maximum epochs (paper: 200).
      batch_size: lists per batch (paper: 2048), over all replicas and workers
        together; each of ``n`` workers takes ``batch_size / n`` lists per step.
      list_size: items per training list; ``None``: the simulation's sample
        size for simulated data, else 200 (240 for ``context_aware``, its
        paper's). Longer lists are sampled (cut to their first items when the
        model has a positional encoding, so the input order stays).
      alpha: weight of the listwide loss; ``None``: 0.25 for the RankFormer
        (the paper tries 0, 0.25 and 1), 0 for the others.
      loss: the item-score loss (see ``losses.SCORE_LOSSES``).
      learning_rate: AdamW's rate (paper: 1e-3).
      weight_decay: AdamW's decoupled weight decay (paper: 0.1).
      decay_after_epoch: the rate decays as ``1/sqrt(step)`` after this epoch (paper: 20).
      include_empty_lists: train on lists whose list label t is 0; ``None``: the
        paper's policy (only the RankFormer with alpha > 0 does).
      patience: epochs without a better validation NDCG_y@10 before stopping.
      mixed_precision: float16 compute; ``None``: on when a GPU is visible.
      xla: compile with XLA; ``None``: on when a GPU is visible.
      eval_batch_size: lists per evaluation batch.
      seed: seed of initialisation, shuffling and dropout.
      architecture: the model's settings.
    """

    model: str = "rankformer"
    data: str = ""
    model_dir: str = ""
    epochs: int = 200
    batch_size: int = 2048
    list_size: int | None = None
    alpha: float | None = None
    loss: str = "softmax"
    learning_rate: float = 1e-3
    weight_decay: float = 0.1
    decay_after_epoch: int = 20
    include_empty_lists: bool | None = None
    patience: int = 20
    mixed_precision: bool | None = None
    xla: bool | None = None
    eval_batch_size: int = 256
    seed: int = 0
    architecture: ModelConfig = ModelConfig()

    def __post_init__(self):
        if self.model not in MODELS:
            raise ValueError(f"Unknown model {self.model!r}; choose from {sorted(MODELS)}")
        if not self.data or not self.model_dir:
            raise ValueError("`data` and `model_dir` must be given")
        require_positive_ints(self, "epochs", "batch_size", "eval_batch_size", "patience")
        require_positive_ints(self, "list_size", optional=True)
        get_score_loss(self.loss)  # an unknown name fails here
        if self.alpha is None:
            object.__setattr__(self, "alpha", DEFAULT_ALPHA.get(self.model, 0.0))
        if self.alpha < 0:
            raise ValueError(f"`alpha` must be >= 0, got {self.alpha}")
        if self.alpha > 0 and not has_list_head(self.model):
            raise ValueError(f"`alpha` > 0 needs a list head; {self.model!r} has none")
        if isinstance(self.architecture, dict):
            object.__setattr__(self, "architecture", ModelConfig(**self.architecture))
        object.__setattr__(self, "architecture", self.architecture.resolved(self.model))

    @property
    def uses_list_head(self) -> bool:
        return has_list_head(self.model) and self.alpha > 0

    def training_includes_empty_lists(self) -> bool:
        """The paper's policy unless overridden: t = 0 lists only feed the list head."""
        if self.include_empty_lists is not None:
            return self.include_empty_lists
        return self.uses_list_head

    def to_json(self) -> dict:
        return dataclasses.asdict(self)

    @classmethod
    def from_json(cls, values: dict) -> TrainConfig:
        nested = {"architecture": ModelConfig}
        return from_dict(cls, values, nested=nested, what="training settings")


@tf.keras.utils.register_keras_serializable(package="tfr_rankformer")
class InverseSqrtDecay(tf.keras.optimizers.schedules.LearningRateSchedule):
    """Constant rate, then ``rate * sqrt(start / step)`` from step ``start`` on (the paper's)."""

    def __init__(self, learning_rate: float, start_step: int):
        self.learning_rate = learning_rate
        self.start_step = start_step

    def __call__(self, step):
        step = tf.cast(step, tf.float32)
        start = tf.cast(max(self.start_step, 1), tf.float32)
        factor = tf.minimum(1.0, tf.sqrt(start / tf.maximum(step, 1.0)))
        return self.learning_rate * factor

    def get_config(self):
        return {"learning_rate": self.learning_rate, "start_step": self.start_step}


def choose_strategy() -> tf.distribute.Strategy:
    """MultiWorkerMirrored when ``TF_CONFIG`` names several training workers (chief
    included), Mirrored on several GPUs, else the default strategy."""
    if worker_role().multi_worker:
        return tf.distribute.MultiWorkerMirroredStrategy()
    if len(tf.config.list_physical_devices("GPU")) > 1:
        return tf.distribute.MirroredStrategy()
    return tf.distribute.get_strategy()


def _resolve_list_size(config: TrainConfig, manifest: dict) -> int:
    if config.list_size is not None:
        return config.list_size
    if manifest.get("label_kind") == "simulated_implicit":
        return int(manifest["parameters"]["clicks"]["sample_size"])
    return 240 if config.model == "context_aware" else 200


def item_levels(config: TrainConfig, manifest: dict) -> int | None:
    """Label levels of the item-level logits the loss needs (``None``: plain scores)."""
    if get_score_loss(config.loss).output == "item_levels":
        return data.label_levels(manifest)
    return None


def build_compiled_model(
    config: TrainConfig, manifest: dict, *, steps_per_epoch: int, xla: bool
) -> tuple[tf.keras.Model, tf.keras.Model]:
    """The model, and its ranker compiled with the losses, AdamW and the paper's schedule.

    Training fits the ranker (normalised features); the model wraps it with the
    normalisation (raw features). Call inside a strategy scope.
    """
    levels = data.label_levels(manifest)
    model = build_model(
        config.model,
        manifest,
        config.architecture,
        levels,
        item_levels=item_levels(config, manifest),
    )
    ranker = ranker_of(model)
    score_loss = get_score_loss(config.loss)
    losses = {score_loss.output: score_loss.build(levels)}
    weights = {score_loss.output: 1.0}
    if has_list_head(config.model):
        losses["list_quality"] = OrdinalListLoss(levels)
        weights["list_quality"] = config.alpha
    schedule = InverseSqrtDecay(config.learning_rate, config.decay_after_epoch * steps_per_epoch)
    optimizer = tf.keras.optimizers.AdamW(learning_rate=schedule, weight_decay=config.weight_decay)
    ranker.compile(optimizer=optimizer, loss=losses, loss_weights=weights, jit_compile=xla)
    return model, ranker


def _callbacks(
    config: TrainConfig,
    model: tf.keras.Model,
    manifest: dict,
    *,
    lists: int,
    strategy: tf.distribute.Strategy,
    worker: WorkerRole,
) -> tuple[list[tf.keras.callbacks.Callback], str]:
    """The training callbacks, and the logged value that picks the best weights.

    Every worker evaluates, stops early and backs up alike; only the chief
    gets the callbacks that write (history, TensorBoard).
    """
    callbacks = [Throughput(lists, config.batch_size)]
    has_vali = "vali" in manifest["splits"]
    if has_vali:
        vali = data.evaluation_dataset(
            config.data, manifest, split="vali", batch_size=config.eval_batch_size
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
    callbacks += [
        BestWeights(
            model,
            best,
            monitor=monitor,
            mode=mode,
            history=history_csv,
            worker=worker,
            strategy=strategy,
        ),
        tf.keras.callbacks.EarlyStopping(monitor=monitor, mode=mode, patience=config.patience),
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
    return callbacks, monitor


def _start_run_dir(config: TrainConfig) -> None:
    """The chief's ``model_dir``: the resolved settings, and a fresh history unless resuming."""
    os.makedirs(config.model_dir, exist_ok=True)
    write_json(os.path.join(config.model_dir, CONFIG_NAME), config.to_json())
    backup = os.path.join(config.model_dir, BACKUP_NAME)
    history_csv = os.path.join(config.model_dir, HISTORY_NAME)
    resuming = os.path.isdir(backup) and bool(os.listdir(backup))
    if not resuming and os.path.exists(history_csv):
        os.remove(history_csv)  # a fresh run starts a fresh history


def _evaluate_splits(config: TrainConfig, manifest: dict, model: tf.keras.Model) -> dict:
    return {
        split: evaluate_model(
            model,
            data.evaluation_dataset(
                config.data, manifest, split=split, batch_size=config.eval_batch_size
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
) -> dict:
    """Trains, keeps the best weights, evaluates every split; returns ``metrics.json``'s content.

    Args:
      config: the run's settings.
      verbose: ``fit``'s progress output.
      final_weights: if given, this worker also writes the weights it ended
        training with (before the best ones are reloaded) to this ``.npz`` file,
        one array per model weight in ``model.get_weights()`` order.
      callbacks: extra Keras callbacks, run after the training loop's own (so
        their logs hold the epoch's ``val_*`` metrics), e.g. a tuner's pruning.

    Returns:
      The metrics; ``{}`` on a multi-worker job's non-chief workers, which
      train alongside the chief but neither evaluate nor write the run.
    """
    # First: MultiWorkerMirroredStrategy must set up the cluster before
    # TensorFlow's runtime starts.
    strategy = choose_strategy()
    worker = worker_role()
    tf.keras.utils.set_random_seed(config.seed)
    manifest = data.load_manifest(config.data)
    gpu = bool(tf.config.list_physical_devices("GPU"))
    mixed = gpu if config.mixed_precision is None else config.mixed_precision
    xla = gpu if config.xla is None else config.xla
    if worker.is_chief:
        _start_run_dir(config)

    include_empty = config.training_includes_empty_lists()
    list_size = _resolve_list_size(config, manifest)
    lists = data.count_training_lists(manifest, "train", include_empty_lists=include_empty)
    if lists == 0:
        raise ValueError(f"{config.data}: no training list passes the training-list policy")
    steps = math.ceil(lists / config.batch_size)
    # The precision policy applies to the layers built under it, then is restored.
    policy = tf.keras.mixed_precision.global_policy()
    if mixed:
        tf.keras.mixed_precision.set_global_policy("mixed_float16")
    try:
        with strategy.scope():
            model, ranker = build_compiled_model(config, manifest, steps_per_epoch=steps, xla=xla)
    finally:
        tf.keras.mixed_precision.set_global_policy(policy)
    train_data = data.training_dataset(
        config.data,
        manifest,
        batch_size=config.batch_size,
        list_size=list_size,
        include_empty_lists=include_empty,
        with_list_head=has_list_head(config.model),
        with_item_levels=item_levels(config, manifest) is not None,
        keep_order=config.architecture.positional_encoding != "none",
        seed=config.seed,
        normalize=normalization_of(model),
        worker=worker,
    )
    extra = list(callbacks or [])
    callbacks, monitor = _callbacks(
        config, model, manifest, lists=lists, strategy=strategy, worker=worker
    )
    callbacks += extra
    logger.info(
        "training %s on %d lists/epoch (list size %d, %s t = 0 lists), %d steps/epoch, "
        "strategy %s (worker %d of %d), mixed precision %s, XLA %s",
        config.model,
        lists,
        list_size,
        "with" if include_empty else "without",
        steps,
        type(strategy).__name__,
        worker.index,
        worker.count,
        mixed,
        xla,
    )
    started = time.perf_counter()
    history = ranker.fit(train_data, epochs=config.epochs, callbacks=callbacks, verbose=verbose)
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
