"""``TrainConfig``: the settings of one ``tfr-train`` run, each declared once on its field
(``tfr-train``'s options are generated from them); no TensorFlow, so ``--help`` is quick.
"""

from __future__ import annotations

import argparse
import dataclasses

from tfr_rankformer.core import model_families
from tfr_rankformer.core.builtin_families import (
    FALLBACK_TRAINING,
    PRETRAINED_TEXT_TRAINING,
    RELEASED_TRAINING,
)
from tfr_rankformer.core.command_names import (
    ADAM_EPSILONS,
    LOSS_SCALINGS,
    LOSS_SUMMARIES,
)
from tfr_rankformer.core.config_io import (
    check_fields,
    from_dict,
    nest_flat,
    on_off,
    require_positive_ints,
    setting,
)
from tfr_rankformer.core.elwc_schema import SPLITS
from tfr_rankformer.model.model_config import (
    ModelConfig,
    architecture_class,
    architecture_fields,
    check_model_name,
)
from tfr_rankformer.training.text_config import TextConfig

# The settings of the nested sections, in field order.
ARCHITECTURE_FIELDS = architecture_fields()
TEXT_FIELDS = tuple(f.name for f in dataclasses.fields(TextConfig))
_SECTIONS = {"architecture": ARCHITECTURE_FIELDS, "text": TEXT_FIELDS}


def _split_names(value: str) -> tuple[str, ...]:
    """``--evaluate-splits``: split names, comma-separated, or ``none``."""
    if value == "none":
        return ()
    splits = tuple(s.strip() for s in value.split(","))
    unknown = [s for s in splits if s not in SPLITS]
    if unknown:
        raise argparse.ArgumentTypeError(f"{unknown}: choose from train, vali, test, or none")
    return splits


_LOSS_HELP = "; ".join(f"{name}: {summary}" for name, summary in LOSS_SUMMARIES.items())
_SWITCH = {"type": on_off, "metavar": "{auto,on,off}"}


@dataclasses.dataclass(frozen=True)
class TrainConfig:
    """Settings of one training run; fields left ``None`` take the model's defaults, and
    ``config.json`` records the resolved values."""

    model: str = setting(
        "rankformer",
        "rankformer (listwise encoder + list head), transformer (same encoder, no list "
        "head: the paper's alpha = 0), mlp (pointwise), context_aware (allRank's "
        "self-attention ranker), summary_token_ranker (this project's: items attend only to "
        "[CLS] and learned summary tokens, RankFormer heads), listformer (Reuter's text "
        "re-ranker on text ELWC: one sequence [CLS] q [SEP] d_1 [SEP] ..., document-wise "
        "global-local attention, [SEP] scoring, ApproxNDCG), or a LightGBM lambdarank GBDT: "
        "gbdt (LightGBM's usual settings: 1,000 trees, learning rate 0.05, 63 leaves, "
        "min_data_in_leaf 50) or the paper's Table 5, gbdt-1k (1,000 trees) and gbdt-10k "
        "(10,000 trees)",
        choices=model_families.trainable_names,
    )
    data: str = setting(
        "",
        "a tfr-convert output directory (or one of its FoldN/); listformer: a directory of "
        "text ELWC, {train,vali,test}-*.tfrecord with or without a manifest.json",
    )
    model_dir: str = setting("", "where config, checkpoints, logs and metrics go")
    epochs: int | None = setting(
        None,
        "maximum epochs. Default: 200 (the RankFormer paper); context_aware: 100 (allRank); "
        "listformer: 20, 10 from a checkpoint (--init-from)",
    )
    batch_size: int | None = setting(
        None,
        "lists per batch, over all workers together when TF_CONFIG names several (each "
        "takes its share). Set alone, every batch holds exactly this many lists. Default: at "
        "most 2048 (the RankFormer paper) under the --batch-items budget; context_aware: 64 "
        "(allRank); listformer: 16 (at most 16 under the budget from a checkpoint)",
    )
    batch_items: int | None = setting(
        None,
        "budget of padded items per batch: lists are grouped by length into buckets (16, 24, "
        "32, 48, ... up to the longest list) and each bucket's batches hold about this many "
        "items, fewer for lists over 256 items (attention grows with the square of the "
        "length). Text models count padded tokens (documents x --max-document-tokens). "
        "Default: 32768 (the paper's 2048 lists of 16); context_aware: 15360 (64 x 240); "
        "listformer from a checkpoint: 8192 tokens",
    )
    list_size: int | None = setting(
        None,
        "items a training list keeps at most; longer lists are sampled afresh each epoch (cut "
        "to their first items under a positional encoding) and the items left out are "
        "counted in the log and metrics.json. Default: whole lists (simulated data: the "
        "simulation's sample size, 16); context_aware: 240 (allRank); listformer: 100 "
        "documents, 32 from a checkpoint (judged relevant documents are kept first)",
    )
    memory_limit: float | None = setting(
        None,
        "GiB the run may use. Before its first step the run's peak memory is estimated from "
        "the model, the buckets and the batch budget; above the limit the run is refused "
        "with the flags that would make it fit. Default: the memory available at the start",
        metavar="GB",
    )
    length_buckets: bool = setting(
        True,
        "on: group training lists by length (see --batch-items); off: batches of "
        "--batch-size lists in shuffled order, each padded to its longest list (a baseline "
        "for benchmarks). Default: on",
        type=on_off,
        metavar="{on,off}",
    )
    lists_in_memory: bool | None = setting(
        None,
        "on: the feature-vector models' training lists are parsed and normalised once and "
        "every epoch is served from memory (counted in the memory estimate); off: records "
        "are read every epoch (those of a split over 1 GiB are cached on disk after the "
        "first), which costs less memory and, on a CPU, no speed. Default: auto (on where a "
        "GPU is visible, else off)",
        **_SWITCH,
    )
    alpha: float | None = setting(
        None,
        "weight of the listwide ordinal loss (rankformer, summary_token_ranker, listformer: "
        "on [CLS]), on the scale of --loss-scaling: with 'released' it is the authors' "
        "code's list_pred_strength, whose 1 their README equates with the paper's alpha 0.25 "
        "(under the paper's unpublished loss balancing); with 'paper' it is Eq. 9's alpha "
        "read literally. Default: 1 (released) or 0.25 (paper) for the rankformer, 0 "
        "otherwise. alpha 0 builds no list head and, for the rankformer, no [CLS] (the "
        "released code's strength 0)",
    )
    loss: str | None = setting(
        None,
        f"item-score loss: {_LOSS_HELP}. Default: softmax; listformer: approx_ndcg",
        choices=sorted(LOSS_SUMMARIES),
    )
    loss_scaling: str | None = setting(
        None,
        "how per-list losses make the batch's loss. released: as the authors' code, each "
        "list's item loss is a mean over its items, lists whose loss is exactly 0 (t = 0 for "
        "the softmax) leave the average, the listwide loss is a mean over its levels; paper: "
        "Eq. 9 as printed, sums within a list and over the levels, averaged over every list. "
        "Default: released; context_aware: paper (per-list sums averaged over lists, as "
        "allRank's ListNet)",
        choices=list(LOSS_SCALINGS),
    )
    optimizer: str | None = setting(
        None,
        "adamw (decoupled weight decay) or adam; both with epsilon 1e-8 (see "
        "--adam-epsilon). Default: adamw; context_aware: adam (allRank)",
        choices=["adamw", "adam"],
    )
    adam_epsilon: str = setting(
        "pytorch",
        "where Adam's epsilon is added: pytorch, to the bias-corrected sqrt(v) as torch.optim "
        "(the authors' code and allRank); keras, to the uncorrected sqrt(v) as Keras's Adam "
        "(up to 32x more damping early on)",
        choices=list(ADAM_EPSILONS),
    )
    learning_rate: float | None = setting(
        None, "the optimizer's rate. Default: 1e-3; listformer from a checkpoint: 1e-4"
    )
    weight_decay: float | None = setting(
        None, "AdamW's decoupled weight decay. Default: 0.1; context_aware: 0; listformer: 0.01"
    )
    lr_schedule: str | None = setting(
        None,
        "epoch_inverse_sqrt: constant, then x (epoch - E + 1)^-0.5 per epoch from epoch E = "
        "--decay-after-epoch (the authors' code); step_inverse_sqrt: x sqrt(start / step) per "
        "step after epoch E; step_decay: x0.1 every E epochs (allRank's StepLR). Default: "
        "epoch_inverse_sqrt; context_aware: step_decay",
        choices=["epoch_inverse_sqrt", "step_inverse_sqrt", "step_decay"],
    )
    decay_after_epoch: int | None = setting(
        None,
        "the epoch the schedule starts decaying at (step_decay: its period). Default: 20; "
        "step_decay: half of --epochs",
    )
    include_empty_lists: bool | None = setting(
        None,
        "train on lists whose list label t is 0 too. Default with --loss-scaling released: "
        "every list is trained on, as the authors' code",
        off_flag="--exclude-empty-lists",
        off_help="train only on lists with t > 0. Default with --loss-scaling paper: the "
        "paper's policy (only a model with a list head and alpha > 0 sees t = 0 lists)",
    )
    keep_weights: str = setting(
        "best",
        "best: the weights of the best validation NDCG_y@10, with early stopping; last: the "
        "last epoch's, no early stopping (the authors' protocol)",
        choices=["best", "last"],
    )
    patience: int | None = setting(
        None,
        "epochs without better validation NDCG_y@10 before stopping (--keep-weights best). "
        "Default: 20; listformer from a checkpoint: 3",
    )
    precision: str | None = setting(
        None,
        "compute precision: float32, or mixed precision with bf16 (bfloat16) or float16 "
        "compute, the weights, the model's outputs, the losses and the metrics staying "
        "float32; bf16 runs in hardware on CPUs with AVX512-BF16 or AMX and on recent GPUs. "
        "Default: float16 when a GPU is visible, else float32",
        choices=["float32", "bf16", "float16"],
    )
    mixed_precision: bool | None = setting(
        None,
        "an alias: on is --precision float16, off float32 (given with --precision, the two "
        "must agree). Default: auto (--precision's default)",
        **_SWITCH,
    )
    xla: bool | None = setting(
        None, "XLA compilation. Default: auto (on when a GPU is visible)", **_SWITCH
    )
    eval_batch_size: int | None = setting(
        None, "lists per evaluation batch. Default: 256; listformer: 16"
    )
    seed: int = setting(0, "seed of initialisation and shuffling")
    evaluate_splits: tuple[str, ...] | None = setting(
        None,
        "the splits evaluated into MODEL_DIR/metrics.json once training ends, comma-separated "
        "(e.g. test), or 'none' (tfr-eval evaluates any split later). Default: every split "
        "the data has",
        type=_split_names,
        metavar="SPLITS",
    )
    architecture: ModelConfig = ModelConfig()  # its family's class (``ModelFamily.architecture``)
    text: TextConfig = TextConfig()

    def __post_init__(self):
        check_fields(self)
        check_model_name(self.model)
        if isinstance(self.text, dict):
            object.__setattr__(self, "text", TextConfig(**self.text))
        if not self.data or not self.model_dir:
            raise ValueError("`data` and `model_dir` must be given")
        self._resolve_model_defaults()
        self._check_batching()
        from tfr_rankformer.training.precision import check_precision

        check_precision(self.precision, self.mixed_precision)
        splits = self.evaluate_splits
        if splits is not None:
            if isinstance(splits, str) or set(splits) - set(SPLITS):
                raise ValueError(
                    f"`evaluate_splits` must be some of {list(SPLITS)}, got {splits!r}"
                )
            object.__setattr__(self, "evaluate_splits", tuple(splits))
        self._check_optimization()
        architecture = architecture_class(self.model).of(self.architecture)
        pretrained = self.text.init_from is not None
        resolved = architecture.for_run(self.model, self.loss, self.uses_list_head, pretrained)
        object.__setattr__(self, "architecture", resolved)
        self._check_family_settings()

    def _check_batching(self) -> None:
        require_positive_ints(self, "epochs", "batch_size", "eval_batch_size", "patience")
        require_positive_ints(self, "list_size", "decay_after_epoch", "batch_items", optional=True)
        if self.lists_in_memory is None:  # on where a GPU is visible
            import tensorflow as tf

            gpu = bool(tf.config.list_physical_devices("GPU"))
            object.__setattr__(self, "lists_in_memory", gpu)
        if not self.length_buckets and self.batch_items is not None:
            raise ValueError(
                "`length_buckets` off batches fixed lists: set `batch_size`, not `batch_items`"
            )
        if self.memory_limit is not None and not self.memory_limit > 0:
            raise ValueError(f"`memory_limit` must be > 0 (GiB), got {self.memory_limit!r}")

    def _check_optimization(self) -> None:
        if self.alpha < 0:
            raise ValueError(f"`alpha` must be >= 0, got {self.alpha}")
        if self.alpha > 0 and not model_families.get_model(self.model).has_list_head:
            raise ValueError(f"`alpha` > 0 needs a list head; {self.model!r} has none")
        if not self.learning_rate > 0:
            raise ValueError(f"`learning_rate` must be > 0, got {self.learning_rate!r}")
        if self.weight_decay < 0:
            raise ValueError(f"`weight_decay` must be >= 0, got {self.weight_decay!r}")
        if self.weight_decay > 0 and self.optimizer != "adamw":
            raise ValueError("`weight_decay` > 0 needs the adamw optimizer")

    def _check_family_settings(self) -> None:
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
        return model_families.is_text(self.model)

    def _resolve_model_defaults(self) -> None:
        spec = model_families.get_model(self.model)
        defaults = dict(spec.training, **FALLBACK_TRAINING)
        if self.is_text and self.text.init_from is not None:
            defaults.update(PRETRAINED_TEXT_TRAINING)
        if self.batch_size is not None:
            # A batch size the user set means that many lists, unless a budget is given too.
            defaults.pop("batch_items", None)
        for name, value in defaults.items():
            if getattr(self, name) is None:
                object.__setattr__(self, name, value)
        from tfr_rankformer.ranking.losses import check_scaling, get_score_loss

        check_scaling(self.loss_scaling)
        get_score_loss(self.loss)  # an unknown name fails here
        if self.alpha is None:
            alpha = spec.alpha.get(self.loss_scaling, 0.0)
            object.__setattr__(self, "alpha", alpha)
        if self.decay_after_epoch is None:
            start = max(self.epochs // 2, 1) if self.lr_schedule == "step_decay" else 20
            object.__setattr__(self, "decay_after_epoch", start)

    def evaluation_batch_items(self) -> int:
        """Padded items per evaluation batch: the training budget."""
        return self.batch_items or RELEASED_TRAINING["batch_items"]

    @property
    def uses_list_head(self) -> bool:
        return model_families.get_model(self.model).has_list_head and self.alpha > 0

    def training_includes_empty_lists(self) -> bool:
        """Whether t = 0 lists are trained on (see ``include_empty_lists``)."""
        if self.include_empty_lists is None:
            return self.loss_scaling == "released" or self.uses_list_head
        return self.include_empty_lists

    def final_splits(self, splits) -> tuple[str, ...]:
        """Of the data's ``splits``, those evaluated once training ends."""
        wanted = self.evaluate_splits
        return tuple(s for s in splits if wanted is None or s in wanted)

    def to_json(self) -> dict:
        return dataclasses.asdict(self)

    @classmethod
    def from_json(cls, values: dict) -> TrainConfig:
        """The settings ``to_json`` wrote (``config.json``), checked (``ValueError``)."""
        return from_dict(cls, values, nested={"text": TextConfig}, what="training settings")

    @classmethod
    def from_flat(cls, settings: dict) -> TrainConfig:
        """Checked settings from flat keys, each section's moved into it (``nest_flat``).

        >>> config = TrainConfig.from_flat(
        ...     {"model": "mlp", "data": "d", "model_dir": "m", "epochs": 3, "dropout": 0.1}
        ... )
        >>> config.epochs, config.architecture.dropout
        (3, 0.1)
        """
        return cls.from_json(nest_flat(settings, _SECTIONS))
