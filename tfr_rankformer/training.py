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
from tfr_rankformer.command_names import ADAM_EPSILONS, KEEP_WEIGHTS, LR_SCHEDULES, OPTIMIZERS
from tfr_rankformer.config_io import from_dict, require_positive_ints, write_json
from tfr_rankformer.evaluation import EvaluationCallback, evaluate_model
from tfr_rankformer.losses import OrdinalListLoss, check_scaling, get_score_loss
from tfr_rankformer.models import (
    MODELS,
    TEXT_MODEL_NAMES,
    ModelConfig,
    build_model,
    has_list_head,
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
from tfr_rankformer.text_data import TextConfig
from tfr_rankformer.training_callbacks import BestWeights, Throughput

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


# Settings whose default depends on the model: the RankFormer family follows the
# authors' released code; context_aware follows allRank's published
# configurations (Adam at 1e-3 without weight decay, x0.1 after half of 100
# epochs, batches of 64 lists, per-list sums as allRank's ListNet averages).
_RELEASED = dict(
    loss="softmax",
    eval_batch_size=256,
    epochs=200,
    batch_size=2048,
    loss_scaling="released",
    optimizer="adamw",
    weight_decay=0.1,
    lr_schedule="epoch_inverse_sqrt",
)
_MODEL_DEFAULTS = {
    "rankformer": _RELEASED,
    "transformer": _RELEASED,
    "mlp": _RELEASED,
    "summary_token_ranker": _RELEASED,
    # The Listformer, trained from scratch on text lists: ApproxNDCG (the
    # thesis's loss); batches, epochs and weight decay sized for a small model.
    "listformer": dict(
        loss="approx_ndcg",
        eval_batch_size=16,
        epochs=20,
        batch_size=16,
        loss_scaling="released",
        optimizer="adamw",
        weight_decay=0.01,
        lr_schedule="epoch_inverse_sqrt",
    ),
    "context_aware": dict(
        loss="softmax",
        eval_batch_size=256,
        epochs=100,
        batch_size=64,
        loss_scaling="paper",
        optimizer="adam",
        weight_decay=0.0,
        lr_schedule="step_decay",
    ),
}
# The listwide loss's weight when none is given, per loss scaling: the
# released code's own script uses strength 1, which its README equates with
# the paper's alpha 0.25 (the paper's best). The Listformer's head is optional.
_DEFAULT_ALPHA = {"released": {"rankformer": 1.0}, "paper": {"rankformer": 0.25}}


@dataclasses.dataclass(frozen=True)
class TrainConfig:
    """Settings of one training run; fields left ``None`` take the model's defaults.

    The RankFormer family (``rankformer``, ``transformer``, ``mlp``,
    ``summary_token_ranker``) defaults to the authors' released code;
    ``context_aware`` to allRank's configurations; the ``listformer`` (text) to
    ApproxNDCG with small batches. The resolved values are what ``config.json``
    records.

    Attributes:
      model: a key of ``models.MODELS``.
      data: a converted dataset (``tfr-convert --output``).
      model_dir: where everything is written.
      epochs: maximum epochs (RankFormer: 200; allRank: 100).
      batch_size: lists per batch (RankFormer: 2048; allRank: 64), over all
        replicas and workers together; each of ``n`` workers takes
        ``batch_size / n`` lists per step.
      list_size: items per training list; ``None``: the simulation's sample
        size for simulated data, else 200 (240 for ``context_aware``, its
        paper's; 100 documents for the ``listformer``). Longer lists are
        sampled (cut to their first items when the model has a positional
        encoding, so the input order stays).
      alpha: weight of the listwide loss, on the scale of ``loss_scaling``:
        under ``released`` it is the released code's ``list_pred_strength``
        (default 1, which its README equates with the paper's alpha 0.25),
        under ``paper`` the paper's alpha (default 0.25). 0 for the others.
      loss: the item-score loss (see ``losses.SCORE_LOSSES``); ``None``:
        ``softmax``, ``approx_ndcg`` for the ``listformer``.
      loss_scaling: ``released`` or ``paper`` (see ``losses.LOSS_SCALINGS``).
      optimizer: ``adamw`` (decoupled weight decay) or ``adam``.
      adam_epsilon: where Adam's epsilon is added: ``pytorch`` (to the
        bias-corrected root of the second moment, as ``torch.optim`` and so
        both reference implementations) or ``keras`` (Keras's placement,
        this project's before); see ``optimizers``.
      learning_rate: the optimizer's rate (1e-3 for both families).
      weight_decay: AdamW's decoupled weight decay (RankFormer: 0.1).
      lr_schedule: ``epoch_inverse_sqrt``: constant, then from epoch
        ``decay_after_epoch`` on ``(epoch - decay_after_epoch + 1) ** -0.5``,
        per epoch (the released code); ``step_inverse_sqrt``: ``sqrt(start /
        step)`` per step after that epoch; ``step_decay``: x0.1 every
        ``decay_after_epoch`` epochs (allRank's StepLR).
      decay_after_epoch: where the schedule starts decaying; ``None``: 20 for
        the inverse-square-root schedules, half of ``epochs`` for ``step_decay``.
      include_empty_lists: train on lists whose list label t is 0; ``None``:
        under ``released`` every list (the released code; their softmax loss is
        zero and left out of the mean), under ``paper`` the paper's policy (only
        a model with a list head and alpha > 0 sees them).
      keep_weights: ``best``: the weights with the best validation NDCG_y@10
        (with early stopping after ``patience`` epochs); ``last``: the weights
        after the last epoch, no early stopping (the released code's protocol).
      patience: epochs without a better validation NDCG_y@10 before stopping.
      mixed_precision: float16 compute; ``None``: on when a GPU is visible.
      xla: compile with XLA; ``None``: on when a GPU is visible.
      eval_batch_size: lists per evaluation batch; ``None``: 256, 16 for the
        ``listformer`` (whose evaluation batches hold every document's tokens).
      seed: seed of initialisation, shuffling and dropout.
      architecture: the model's settings.
      text: the ``listformer``'s text settings (features, token caps, vocabulary).
    """

    model: str = "rankformer"
    data: str = ""
    model_dir: str = ""
    epochs: int | None = None
    batch_size: int | None = None
    list_size: int | None = None
    alpha: float | None = None
    loss: str | None = None
    loss_scaling: str | None = None
    optimizer: str | None = None
    adam_epsilon: str = "pytorch"
    learning_rate: float = 1e-3
    weight_decay: float | None = None
    lr_schedule: str | None = None
    decay_after_epoch: int | None = None
    include_empty_lists: bool | None = None
    keep_weights: str = "best"
    patience: int = 20
    mixed_precision: bool | None = None
    xla: bool | None = None
    eval_batch_size: int | None = None
    seed: int = 0
    architecture: ModelConfig = ModelConfig()
    text: TextConfig = TextConfig()

    def __post_init__(self):
        if self.model not in MODELS and self.model not in TEXT_MODEL_NAMES:
            choices = sorted([*MODELS, *TEXT_MODEL_NAMES])
            raise ValueError(f"Unknown model {self.model!r}; choose from {choices}")
        if isinstance(self.text, dict):
            object.__setattr__(self, "text", TextConfig(**self.text))
        if not self.data or not self.model_dir:
            raise ValueError("`data` and `model_dir` must be given")
        self._resolve_model_defaults()
        require_positive_ints(self, "epochs", "batch_size", "eval_batch_size", "patience")
        require_positive_ints(self, "list_size", "decay_after_epoch", optional=True)
        get_score_loss(self.loss)  # an unknown name fails here
        for name, choices in (
            ("optimizer", OPTIMIZERS),
            ("adam_epsilon", ADAM_EPSILONS),
            ("lr_schedule", LR_SCHEDULES),
            ("keep_weights", KEEP_WEIGHTS),
        ):
            if getattr(self, name) not in choices:
                raise ValueError(
                    f"`{name}` must be one of {list(choices)}, got {getattr(self, name)!r}"
                )
        if not self.learning_rate > 0:
            raise ValueError(f"`learning_rate` must be > 0, got {self.learning_rate!r}")
        if self.weight_decay < 0:
            raise ValueError(f"`weight_decay` must be >= 0, got {self.weight_decay!r}")
        if self.weight_decay > 0 and self.optimizer != "adamw":
            raise ValueError("`weight_decay` > 0 needs the adamw optimizer")
        if self.alpha < 0:
            raise ValueError(f"`alpha` must be >= 0, got {self.alpha}")
        if self.alpha > 0 and not has_list_head(self.model):
            raise ValueError(f"`alpha` > 0 needs a list head; {self.model!r} has none")
        self._resolve_architecture()
        if self.is_text:
            positions = self.architecture.max_positions
            for name in ("max_query_tokens", "max_document_tokens"):
                if getattr(self.text, name) >= positions:
                    raise ValueError(
                        f"`{name}` {getattr(self.text, name)} needs `max_positions` above it, "
                        f"got {positions}"
                    )

    @property
    def is_text(self) -> bool:
        """Whether the model ranks text lists (the ``listformer``)."""
        return self.model in TEXT_MODEL_NAMES

    def _resolve_model_defaults(self) -> None:
        defaults = _MODEL_DEFAULTS[self.model]
        for name, value in defaults.items():
            if getattr(self, name) is None:
                object.__setattr__(self, name, value)
        check_scaling(self.loss_scaling)
        if self.alpha is None:
            alpha = _DEFAULT_ALPHA[self.loss_scaling].get(self.model, 0.0)
            object.__setattr__(self, "alpha", alpha)
        if self.decay_after_epoch is None:
            start = max(self.epochs // 2, 1) if self.lr_schedule == "step_decay" else 20
            object.__setattr__(self, "decay_after_epoch", start)

    def _resolve_architecture(self) -> None:
        architecture = self.architecture
        if isinstance(architecture, dict):
            architecture = ModelConfig(**architecture)
        if self.model == "rankformer" and architecture.cls_token is None:
            # The released code builds [CLS] only with a list head.
            architecture = dataclasses.replace(architecture, cls_token=self.uses_list_head)
        architecture = architecture.resolved(self.model, self.loss)
        if self.uses_list_head and not architecture.cls_token:
            raise ValueError(
                "alpha > 0: the list head reads the [CLS] token, so `cls_token` is needed"
            )
        object.__setattr__(self, "architecture", architecture)

    @property
    def uses_list_head(self) -> bool:
        return has_list_head(self.model) and self.alpha > 0

    def training_includes_empty_lists(self) -> bool:
        """Whether t = 0 lists are trained on (see ``include_empty_lists``)."""
        if self.include_empty_lists is not None:
            return self.include_empty_lists
        return self.loss_scaling == "released" or self.uses_list_head

    def to_json(self) -> dict:
        return dataclasses.asdict(self)

    @classmethod
    def from_json(cls, values: dict) -> TrainConfig:
        nested = {"architecture": ModelConfig, "text": TextConfig}
        return from_dict(cls, values, nested=nested, what="training settings")


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
    if config.is_text:
        from tfr_rankformer.text_training import train_text

        return train_text(config, verbose=verbose, final_weights=final_weights)
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
        with_list_head=config.uses_list_head,
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
