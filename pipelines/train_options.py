"""``tfr-train``'s options: the parser, and which flags belong to which models."""

from __future__ import annotations

import argparse

from pipelines.cli_common import add_lightgbm_options, make_parser
from pipelines.flag_table import add_flag
from pipelines.tf_log_level import add_verbose_flag
from pipelines.train_architecture_options import add_architecture_options
from tfr_rankformer.core.command_names import (
    KEEP_WEIGHTS,
    LOSS_SCALINGS,
    LOSS_SUMMARIES,
    LR_SCHEDULES,
    OPTIMIZERS,
)
from tfr_rankformer.core.elwc_schema import SPLITS

__all__ = [
    "NUMERIC_ARCHITECTURE",
    "REPORTED",
    "SWITCHES",
    "TEXT_ARCHITECTURE",
    "build_parser",
]

REPORTED = ["ndcg_y@1", "ndcg_y@5", "ndcg_y@10", "ndcg_r@10", "ndcg_y@10_tmax", "list_auc_t>=1"]
TEXT_ARCHITECTURE = (
    "width",
    "attention_window",
    "attention",
    "match_marks",
    "similarity",
    "first_stage",
)
NUMERIC_ARCHITECTURE = (
    "d_fc",
    "positional_encoding",
    "global_tokens",
    "cls_token",
    "final_norm",
    "cls_stddev",
    "precision",
    "mixed_precision",
    "xla",
    "lists_in_memory",
)
SWITCHES = {"auto": None, "on": True, "off": False}


def build_parser(module_doc: str) -> argparse.ArgumentParser:
    """``tfr-train``'s parser; ``module_doc`` holds its ``Examples::`` section."""
    p = make_parser(
        "tfr-train",
        "Train a ranking model on the output of tfr-convert, keep the weights with "
        "the best validation NDCG_y@10, and evaluate every split into MODEL_DIR/metrics.json.",
        module_doc,
    )
    _add_input_options(p)
    _add_batch_options(p)
    _add_resource_options(p)
    _add_loss_options(p)
    _add_optimizer_options(p)
    _add_stopping_options(p)
    _add_empty_list_options(p)
    _add_compute_options(p)
    add_architecture_options(p)
    _add_gbdt_options(p)
    _add_existing_dir_options(p)
    _add_output_options(p)
    return p


def _add_input_options(p: argparse.ArgumentParser) -> None:
    """``--model`` .. ``--epochs``: what is trained, on which data, into which directory."""
    add_flag(p, "model")
    add_flag(p, "data")
    add_flag(p, "model_dir")
    add_flag(p, "config")
    add_flag(p, "epochs")


def _add_batch_options(p: argparse.ArgumentParser) -> None:
    """``--batch-size`` .. ``--length-buckets``: how training lists are cut and batched."""
    add_flag(p, "batch_size")
    add_flag(p, "batch_items")
    add_flag(p, "list_size")
    p.add_argument(
        "--length-buckets",
        choices=("on", "off"),
        help="on: group training lists by length (see --batch-items); off: batches of "
        "--batch-size lists in shuffled order, each padded to its longest list (a baseline "
        "for benchmarks). Default: on",
    )


def _add_resource_options(p: argparse.ArgumentParser) -> None:
    """``--memory-limit``, ``--lists-in-memory`` and ``--progress-seconds``: the run's memory
    budget, where training lists are served from, and the progress log."""
    p.add_argument(
        "--memory-limit",
        type=float,
        metavar="GB",
        help="GiB the run may use. Before its first step the run's peak memory is estimated "
        "from the model, the buckets and the batch budget; above the limit the run is "
        "refused with the flags that would make it fit. Default: the memory available at "
        "the start",
    )
    p.add_argument(
        "--lists-in-memory",
        choices=("auto", "on", "off"),
        help="on: the feature-vector models' training lists are parsed and normalised once "
        "and every epoch is served from memory (counted in the memory estimate); off: "
        "records are read every epoch (those of a split over 1 GiB are cached on disk after "
        "the first), which costs less memory and, on a CPU, no speed. Default: auto (on "
        "where a GPU is visible, else off)",
    )
    add_flag(p, "progress_seconds")


def _add_loss_options(p: argparse.ArgumentParser) -> None:
    """``--alpha``, ``--loss`` and ``--loss-scaling``: the item and listwide losses."""
    p.add_argument(
        "--alpha",
        type=float,
        help="weight of the listwide ordinal loss (rankformer, summary_token_ranker, listformer: "
        "on [CLS]), on the scale of "
        "--loss-scaling: with 'released' it is the authors' code's list_pred_strength, whose "
        "1 their README equates with the paper's alpha 0.25 (under the paper's unpublished "
        "loss balancing); with 'paper' it is Eq. 9's alpha read literally. Default: 1 "
        "(released) or 0.25 (paper) for the rankformer, 0 otherwise. alpha 0 builds no list "
        "head and, for the rankformer, no [CLS] (the released code's strength 0)",
    )
    p.add_argument(
        "--loss",
        choices=sorted(LOSS_SUMMARIES),
        help="item-score loss: "
        + "; ".join(f"{name}: {summary}" for name, summary in LOSS_SUMMARIES.items())
        + ". Default: softmax; listformer: approx_ndcg",
    )
    p.add_argument(
        "--loss-scaling",
        choices=list(LOSS_SCALINGS),
        help="how per-list losses make the batch's loss. released: as the authors' code, "
        "each list's item loss is a mean over its items, lists whose loss is exactly 0 "
        "(t = 0 for the softmax) leave the average, the listwide loss is a mean over its "
        "levels; paper: Eq. 9 as printed, sums within a list and over the levels, averaged "
        "over every list. Default: released; context_aware: paper (per-list sums averaged "
        "over lists, as allRank's ListNet)",
    )


def _add_optimizer_options(p: argparse.ArgumentParser) -> None:
    """``--optimizer`` .. ``--decay-after-epoch``: the optimizer and its rate schedule."""
    p.add_argument(
        "--optimizer",
        choices=list(OPTIMIZERS),
        help="adamw (decoupled weight decay) or adam; both with epsilon 1e-8 (see --adam-epsilon). "
        "Default: adamw; context_aware: adam (allRank)",
    )
    add_flag(p, "adam_epsilon")
    p.add_argument(
        "--learning-rate",
        type=float,
        help="the optimizer's rate. Default: 1e-3; listformer from a checkpoint: 1e-4",
    )
    p.add_argument(
        "--weight-decay",
        type=float,
        help="AdamW's decoupled weight decay. Default: 0.1; context_aware: 0; listformer: 0.01",
    )
    p.add_argument(
        "--lr-schedule",
        choices=list(LR_SCHEDULES),
        help="epoch_inverse_sqrt: constant, then x (epoch - E + 1)^-0.5 per epoch from epoch "
        "E = --decay-after-epoch (the authors' code); step_inverse_sqrt: x sqrt(start / step) "
        "per step after epoch E; step_decay: x0.1 every E "
        "epochs (allRank's StepLR). Default: epoch_inverse_sqrt; context_aware: step_decay",
    )
    p.add_argument(
        "--decay-after-epoch",
        type=int,
        help="the epoch the schedule starts decaying at (step_decay: its period). Default: 20; "
        "step_decay: half of --epochs",
    )


def _add_stopping_options(p: argparse.ArgumentParser) -> None:
    """``--keep-weights`` and ``--patience``: which weights are kept, and early stopping."""
    p.add_argument(
        "--keep-weights",
        choices=list(KEEP_WEIGHTS),
        help="best: the weights of the best validation NDCG_y@10, with early stopping; last: "
        "the last epoch's, no early stopping (the authors' protocol). Default: best",
    )
    add_flag(p, "patience")


def _add_empty_list_options(p: argparse.ArgumentParser) -> None:
    """``--include-empty-lists`` or ``--exclude-empty-lists``: lists whose label t is 0."""
    empty = p.add_mutually_exclusive_group()
    empty.add_argument(
        "--include-empty-lists",
        dest="include_empty_lists",
        action="store_true",
        default=None,
        help="train on lists whose list label t is 0 too. Default with --loss-scaling "
        "released: every list is trained on, as the authors' code",
    )
    empty.add_argument(
        "--exclude-empty-lists",
        dest="include_empty_lists",
        action="store_false",
        help="train only on lists with t > 0. Default with --loss-scaling paper: the paper's "
        "policy (only a model with a list head and alpha > 0 sees t = 0 lists)",
    )


def _add_compute_options(p: argparse.ArgumentParser) -> None:
    """``--precision`` .. ``--seed``: numerics, evaluation batches and the seed."""
    add_flag(p, "precision")
    p.add_argument(
        "--mixed-precision",
        choices=sorted(SWITCHES),
        help="an alias: on is --precision float16, off float32 (given with --precision, the "
        "two must agree). Default: auto (--precision's default)",
    )
    p.add_argument(
        "--xla",
        choices=sorted(SWITCHES),
        help="XLA compilation. Default: auto (on when a GPU is visible)",
    )
    p.add_argument(
        "--eval-batch-size",
        type=int,
        help="lists per evaluation batch. Default: 256; listformer: 16",
    )
    add_flag(p, "seed")


def _add_gbdt_options(p: argparse.ArgumentParser) -> None:
    """The ``GBDT models`` group: ``--trees`` and LightGBM's own options."""
    gbdt = p.add_argument_group("GBDT models (gbdt, gbdt-1k, gbdt-10k)")
    add_flag(gbdt, "trees")
    add_lightgbm_options(gbdt, "the GBDT", early_stopping=0)


def _add_existing_dir_options(p: argparse.ArgumentParser) -> None:
    """``--resume`` or ``--overwrite``: what happens to a MODEL_DIR that holds a run."""
    existing = p.add_argument_group(
        "an existing MODEL_DIR (without these, tfr-train writes only into an absent or "
        "empty directory)"
    ).add_mutually_exclusive_group()
    existing.add_argument(
        "--resume",
        action="store_true",
        help="continue the run in MODEL_DIR from its last completed epoch (the neural "
        "feature-vector models; same settings, only --epochs may change); a complete run "
        "is only exported, if it was not yet",
    )
    add_flag(
        existing,
        "overwrite",
        help="replace the run in MODEL_DIR; the old run is deleted once the new one is "
        "complete, and put back if it fails. A directory holding files a run never writes "
        "is refused either way",
    )


def _split_list(value: str) -> tuple[str, ...]:
    """``--evaluate-splits``: ``train,vali,test``'s names, comma-separated, or ``none``."""
    if value == "none":
        return ()
    splits = tuple(s.strip() for s in value.split(","))
    unknown = [s for s in splits if s not in SPLITS]
    if unknown:
        raise argparse.ArgumentTypeError(f"{unknown}: choose from train, vali, test, or none")
    return splits


def _add_output_options(p: argparse.ArgumentParser) -> None:
    """``--no-export`` .. ``--verbose``: the export, extra weights and logging."""
    p.add_argument(
        "--no-export",
        action="store_true",
        help="skip exporting the SavedModel to MODEL_DIR/export/<version>",
    )
    p.add_argument(
        "--final-weights",
        metavar="FILE.npz",
        help="also write the weights this process ended training with (before the best ones "
        "are reloaded) to FILE.npz; every worker of a multi-worker job writes its own, to "
        "check that they agree",
    )
    p.add_argument(
        "--evaluate-splits",
        type=_split_list,
        metavar="SPLITS",
        help="the splits evaluated into MODEL_DIR/metrics.json once training ends, "
        "comma-separated (e.g. test), or 'none' (tfr-eval evaluates any split later). "
        "Default: every split the data has",
    )
    p.add_argument("--quiet", action="store_true", help="no per-epoch progress output")
    add_flag(p, "log_level")
    add_verbose_flag(p)
