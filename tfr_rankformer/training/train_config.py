"""``TrainConfig``: the settings of one ``tfr-train`` run, with each model family's defaults.

Flat settings (an experiment's ``rankformer:num_layers=2``, a search's sampled
values, the command line's flags) become a ``TrainConfig`` in one place,
``TrainConfig.from_flat``, which sends each key to the section whose dataclass
has it (``ARCHITECTURE_FIELDS``, ``TEXT_FIELDS``).
"""

from __future__ import annotations

import dataclasses

import tensorflow as tf

from tfr_rankformer.core import model_families
from tfr_rankformer.core.builtin_families import (
    FALLBACK_TRAINING,
    PRETRAINED_TEXT_TRAINING,
    RELEASED_TRAINING,
)
from tfr_rankformer.core.command_names import ADAM_EPSILONS, KEEP_WEIGHTS, LR_SCHEDULES, OPTIMIZERS
from tfr_rankformer.core.config_io import from_dict, require_positive_ints
from tfr_rankformer.core.elwc_schema import SPLITS
from tfr_rankformer.model.model_config import ModelConfig
from tfr_rankformer.ranking.losses import check_scaling, get_score_loss
from tfr_rankformer.training.precision import check_precision
from tfr_rankformer.training.text_config import TextConfig

__all__ = ["TrainConfig", "ARCHITECTURE_FIELDS", "TEXT_FIELDS"]

# The settings of the nested sections, read from their dataclasses (in field order).
ARCHITECTURE_FIELDS = tuple(f.name for f in dataclasses.fields(ModelConfig))
TEXT_FIELDS = tuple(f.name for f in dataclasses.fields(TextConfig))
_SECTIONS = {"architecture": ARCHITECTURE_FIELDS, "text": TEXT_FIELDS}


# Settings whose default depends on the model are its ``model_families.ModelSpec``'s
# ``training`` (and ``alpha``): the RankFormer family follows the authors'
# released code, context_aware allRank's published configurations.


@dataclasses.dataclass(frozen=True)
class TrainConfig:
    """Settings of one training run; fields left ``None`` take the model's defaults.

    The RankFormer family (``rankformer``, ``transformer``, ``mlp``,
    ``summary_token_ranker``) defaults to the authors' released code;
    ``context_aware`` to allRank's configurations; the ``listformer`` (text) to
    ApproxNDCG with small batches. The resolved values are what ``config.json``
    records.

    Attributes:
      model: a neural model of ``model_families`` (feature vectors or text).
      data: a converted dataset (``tfr-convert --output``).
      model_dir: where everything is written.
      epochs: maximum epochs (RankFormer: 200; allRank: 100).
      batch_size: lists per batch, over all replicas and workers together
        (each of ``n`` workers takes ``batch_size / n`` lists per step). Set
        without ``batch_items``: exactly this many lists in every batch. Left
        ``None``: at most this many (RankFormer: 2048; allRank: 64) under the
        ``batch_items`` budget.
      batch_items: budget of padded items per batch: lists are grouped by
        length (see ``batching``) and each bucket's batches hold about this
        many items (RankFormer: 2048 x 16 = 32,768, the released batch of
        lists of 16; allRank: 64 x 240). ``None`` with ``batch_size`` set:
        fixed lists per batch.
      list_size: items a training list keeps at most; longer lists are
        sampled afresh each epoch (cut to their first items when the model has
        a positional encoding, so the input order stays), and the items left
        out are counted. ``None``: whole lists (the simulation's sample size
        for simulated data, whose lists are never longer; 240 for
        ``context_aware``, allRank's slates; 100 documents for the ``listformer``).
      memory_limit: GiB the run may use; ``None``: what the machine has
        available at the start. A run whose estimated peak is above it is
        refused before its first step.
      length_buckets: group lists by length (see ``batching``); off, every
        batch of ``batch_size`` lists in shuffled order is padded to its
        longest list (the baseline ``web30k_scale`` measures buckets against).
      lists_in_memory: parse and normalise the training lists once and serve
        every epoch from memory (``inputs.resident_lists``); off, the records
        are read every epoch (cached on disk after the first when large).
        ``None``: on only where a GPU is visible. A CPU step is far slower than
        reading the records, so holding them there costs memory and buys nothing.
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
      learning_rate: the optimizer's rate: 1e-3; 1e-4 for a ``listformer``
        started from a checkpoint (``text.init_from``), which also keeps 32
        documents per training list, batches 8,192 padded tokens, trains 10
        epochs and stops after 3 without a better validation NDCG.
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
      patience: epochs without a better validation NDCG_y@10 before stopping
        (20; 3 for a pretrained ``listformer``).
      precision: ``float32``, or mixed precision (float32 weights, float32
        outputs, losses and metrics) with ``bf16`` or ``float16`` compute (see
        ``precision``); ``None``: what ``mixed_precision`` says, else float16
        when a GPU is visible and float32 otherwise.
      mixed_precision: an alias: on is ``precision`` float16, off float32; it
        may be given beside ``precision`` only if they agree. ``None``: see
        ``precision``.
      xla: compile with XLA; ``None``: on when a GPU is visible.
      eval_batch_size: lists per evaluation batch; ``None``: 256, 16 for the
        ``listformer`` (whose evaluation batches hold every document's tokens).
      seed: seed of initialisation, shuffling and dropout.
      evaluate_splits: the splits evaluated into ``metrics.json`` once training
        ends (``None``: every split the data has; ``()``: none).
      architecture: the model's settings.
      text: the ``listformer``'s text settings (features, token caps, vocabulary,
        and ``init_from``, a pretrained checkpoint whose sizes replace the
        architecture's when training starts).
    """

    model: str = "rankformer"
    data: str = ""
    model_dir: str = ""
    epochs: int | None = None
    batch_size: int | None = None
    batch_items: int | None = None
    list_size: int | None = None
    memory_limit: float | None = None
    length_buckets: bool = True
    lists_in_memory: bool | None = None
    alpha: float | None = None
    loss: str | None = None
    loss_scaling: str | None = None
    optimizer: str | None = None
    adam_epsilon: str = "pytorch"
    learning_rate: float | None = None
    weight_decay: float | None = None
    lr_schedule: str | None = None
    decay_after_epoch: int | None = None
    include_empty_lists: bool | None = None
    keep_weights: str = "best"
    patience: int | None = None
    precision: str | None = None
    mixed_precision: bool | None = None
    xla: bool | None = None
    eval_batch_size: int | None = None
    seed: int = 0
    evaluate_splits: tuple[str, ...] | None = None
    architecture: ModelConfig = ModelConfig()
    text: TextConfig = TextConfig()

    def __post_init__(self):
        if not model_families.is_neural(self.model):
            choices = sorted(model_families.model_names(model_families.NEURAL_KINDS))
            raise ValueError(f"Unknown model {self.model!r}; choose from {choices}")
        if isinstance(self.text, dict):
            object.__setattr__(self, "text", TextConfig(**self.text))
        if not self.data or not self.model_dir:
            raise ValueError("`data` and `model_dir` must be given")
        self._resolve_model_defaults()
        self._check_batching()
        get_score_loss(self.loss)  # an unknown name fails here
        check_precision(self.precision, self.mixed_precision)
        self._check_evaluate_splits()
        self._check_optimization()
        if self.alpha < 0:
            raise ValueError(f"`alpha` must be >= 0, got {self.alpha}")
        if self.alpha > 0 and not model_families.has_list_head(self.model):
            raise ValueError(f"`alpha` > 0 needs a list head; {self.model!r} has none")
        self._resolve_architecture()
        self._check_family_settings()

    def _check_batching(self) -> None:
        """Counts, batching switches and the memory limit."""
        require_positive_ints(self, "epochs", "batch_size", "eval_batch_size", "patience")
        require_positive_ints(self, "list_size", "decay_after_epoch", "batch_items", optional=True)
        if not isinstance(self.length_buckets, bool):
            raise ValueError(f"`length_buckets` must be true or false, got {self.length_buckets!r}")
        if self.lists_in_memory is None:
            gpu = bool(tf.config.list_physical_devices("GPU"))
            object.__setattr__(self, "lists_in_memory", gpu)
        if not isinstance(self.lists_in_memory, bool):
            raise ValueError(
                f"`lists_in_memory` must be true or false, got {self.lists_in_memory!r}"
            )
        if not self.length_buckets and self.batch_items is not None:
            raise ValueError(
                "`length_buckets` off batches fixed lists: set `batch_size`, not `batch_items`"
            )
        if self.memory_limit is not None and not (
            isinstance(self.memory_limit, (int, float)) and self.memory_limit > 0
        ):
            raise ValueError(f"`memory_limit` must be > 0 (GiB), got {self.memory_limit!r}")

    def _check_optimization(self) -> None:
        """The optimizer, its epsilon placement, schedule, kept weights and rates."""
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

    def _check_family_settings(self) -> None:
        """Settings one family of models takes: a text model's start and token
        lengths, another family's mixed precision."""
        if self.text.init_from is not None and not self.is_text:
            raise ValueError(f"`init_from` starts a text model (listformer), not {self.model!r}")
        family = model_families.family_of(self.model)
        mixed = self.precision not in (None, "float32") or self.mixed_precision
        if mixed and not family.mixed_precision:
            raise ValueError(
                f"`precision` other than float32 is for other models; {self.model!r} "
                f"({family.kind}) trains in float32"
            )
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
        """Whether the model ranks text lists (the ``listformer``): ``model_families.is_text``."""
        return model_families.is_text(self.model)

    def _resolve_model_defaults(self) -> None:
        spec = model_families.get_model(self.model)
        defaults = dict(spec.training, **FALLBACK_TRAINING)
        if self.is_text and self.text.init_from is not None:
            defaults.update(PRETRAINED_TEXT_TRAINING)
        if self.batch_size is not None:
            # A batch size the user set keeps its meaning: that many lists in
            # every batch, unless an item budget is given too.
            defaults.pop("batch_items", None)
        for name, value in defaults.items():
            if getattr(self, name) is None:
                object.__setattr__(self, name, value)
        check_scaling(self.loss_scaling)
        if self.alpha is None:
            alpha = spec.alpha.get(self.loss_scaling, 0.0)
            object.__setattr__(self, "alpha", alpha)
        if self.decay_after_epoch is None:
            start = max(self.epochs // 2, 1) if self.lr_schedule == "step_decay" else 20
            object.__setattr__(self, "decay_after_epoch", start)

    def _resolve_architecture(self) -> None:
        architecture = self.architecture
        if isinstance(architecture, dict):
            architecture = ModelConfig(**architecture)
        if self.is_text and architecture.similarity is None:
            # A pretrained start keeps the checkpoint's own ranking (score_mixture).
            similarity = "none" if self.text.init_from is None else "checkpoint"
            architecture = dataclasses.replace(architecture, similarity=similarity)
        if architecture.similarity == "checkpoint" and self.text.init_from is None:
            raise ValueError("`similarity` checkpoint needs a checkpoint: give `init_from`")
        spec = model_families.get_model(self.model)
        if spec.cls_token_with_list_head and architecture.cls_token is None:
            # The released code builds [CLS] only with a list head.
            architecture = dataclasses.replace(architecture, cls_token=self.uses_list_head)
        architecture = architecture.resolved(self.model, self.loss)
        if self.uses_list_head and not architecture.cls_token:
            raise ValueError(
                "alpha > 0: the list head reads the [CLS] token, so `cls_token` is needed"
            )
        object.__setattr__(self, "architecture", architecture)

    def evaluation_batch_items(self) -> int:
        """Padded items per evaluation batch: the training budget (a forward pass
        holds less than a training step, but runs beside the memory the step
        left in TensorFlow's pool)."""
        return self.batch_items or RELEASED_TRAINING["batch_items"]

    @property
    def uses_list_head(self) -> bool:
        return model_families.has_list_head(self.model) and self.alpha > 0

    def training_includes_empty_lists(self) -> bool:
        """Whether t = 0 lists are trained on (see ``include_empty_lists``)."""
        if self.include_empty_lists is not None:
            return self.include_empty_lists
        return self.loss_scaling == "released" or self.uses_list_head

    def _check_evaluate_splits(self) -> None:
        splits = self.evaluate_splits
        if splits is None:
            return
        if isinstance(splits, str) or not all(s in SPLITS for s in splits):
            raise ValueError(f"`evaluate_splits` must be some of {list(SPLITS)}, got {splits!r}")
        object.__setattr__(self, "evaluate_splits", tuple(splits))

    def final_splits(self, splits) -> tuple[str, ...]:
        """Of the data's ``splits``, those evaluated once training ends."""
        wanted = self.evaluate_splits
        return tuple(s for s in splits if wanted is None or s in wanted)

    def to_json(self) -> dict:
        return dataclasses.asdict(self)

    @classmethod
    def from_json(cls, values: dict) -> TrainConfig:
        """The settings ``to_json`` wrote (``config.json``), checked.

        Raises:
          ValueError: naming unknown keys or a bad value.
        """
        nested = {"architecture": ModelConfig, "text": TextConfig}
        return from_dict(cls, values, nested=nested, what="training settings")

    @classmethod
    def from_flat(cls, settings: dict) -> TrainConfig:
        """Validated settings from flat ones, as experiments, searches and flags give them.

        A key naming a ``ModelConfig`` field goes to ``architecture``, one naming
        a ``TextConfig`` field to ``text``, the rest are ``TrainConfig`` fields.
        ``architecture`` and ``text`` may also be given whole (as in
        ``config.json``); a flat key overrides theirs.

        >>> config = TrainConfig.from_flat(
        ...     {"model": "mlp", "data": "d", "model_dir": "m", "epochs": 3, "dropout": 0.1}
        ... )
        >>> config.epochs, config.architecture.dropout
        (3, 0.1)

        Raises:
          ValueError: naming unknown keys or a bad value.
        """
        values = {}
        sections: dict = {name: {} for name in _SECTIONS}
        for name in _SECTIONS:
            given = settings.get(name)
            if dataclasses.is_dataclass(given):
                given = dataclasses.asdict(given)
            if given is not None and not isinstance(given, dict):
                raise ValueError(f"`{name}` must be an object of settings, got {given!r}")
            sections[name].update(given or {})
        for key, value in settings.items():
            section = next((n for n, fields in _SECTIONS.items() if key in fields), None)
            if section is not None:
                sections[section][key] = value
            elif key not in _SECTIONS:
                values[key] = value
        return cls.from_json({**values, **sections})
