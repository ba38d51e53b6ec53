"""The command lines' shared options, each declared once.

An option used by more than one command (``--epochs``, ``--batch-size``,
``--seed``, ``--output``, ...) is one :class:`Flag` of :data:`FLAGS`: its flag
name, type, choices, metavar and help text. A default a help text states is
read from the configuration that fills it (a model's registered defaults, a config
dataclass's field) and formatted into the text, so the two cannot disagree.
A command adds the options it takes with :func:`add_flags`, in its own order,
and may override what differs for it (a help text of its own, ``required``)::

    add_flags(parser, "model_dir", "epochs", overrides={"model_dir": {"required": True}})
    add_flag(parser, "seed", help="LightGBM's seed. Default: 0")

Nothing here imports TensorFlow: ``--help`` stays quick. ``TrainConfig``'s
module loads TensorFlow, so its fields are read from the module's source
(:func:`source_default`); the other configs are imported.
"""

from __future__ import annotations

import ast
import dataclasses
import importlib.util
import pathlib

from tfr_rankformer.core import model_families
from tfr_rankformer.core.builtin_families import FALLBACK_TRAINING, PRETRAINED_TEXT_TRAINING
from tfr_rankformer.core.command_names import ADAM_EPSILONS, PRECISIONS
from tfr_rankformer.training.text_config import TextConfig
from tfrecords_tools.letor.letor_parser import DUPLICATE_POLICIES
from tfrecords_tools.synthetic import SyntheticConfig

__all__ = ["FLAGS", "LOG_LEVELS", "Flag", "add_flag", "add_flags", "source_default"]

LOG_LEVELS = ["DEBUG", "INFO", "WARNING", "ERROR"]


@dataclasses.dataclass(frozen=True)
class Flag:
    """One command-line option.

    Attributes:
      names: the flag strings, e.g. ``("--batch-size",)``.
      options: ``add_argument`` keywords other than ``help`` (``type``,
        ``choices``, ``metavar``, ``default``, ``action``, ...); ``choices`` may be
        a function, called each time a parser takes the option.
      help: the help text, its stated default already formatted in.
      stated_default: the default the help text states (``None``: it states none);
        the table's tests check it against the configuration's.
    """

    names: tuple[str, ...]
    options: dict = dataclasses.field(default_factory=dict)
    help: str | None = None
    stated_default: object = None


def add_flags(group, *keys: str, overrides: dict[str, dict] | None = None, table=None) -> None:
    """Adds the options ``keys`` of ``table`` (default :data:`FLAGS`) to ``group``, in order.

    Args:
      group: an ``argparse`` parser or argument group.
      keys: names of table entries.
      overrides: entry name -> ``add_argument`` keywords that replace the table's
        for this command (``help``, ``default``, ``required``, ...).
      table: a dict of :class:`Flag` (the benchmarks keep their own).

    Raises:
      KeyError: a key the table does not hold.
    """
    table = FLAGS if table is None else table
    overrides = overrides or {}
    for key in keys:
        flag = table[key]
        options = dict(flag.options)
        if callable(options.get("choices")):
            options["choices"] = options["choices"]()
        if flag.help is not None:
            options["help"] = flag.help
        options.update(overrides.get(key, {}))
        group.add_argument(*flag.names, **options)


def source_default(module: str, class_name: str, field: str):
    """The literal default of dataclass ``class_name``'s ``field`` in ``module``'s source.

    For config classes whose module imports TensorFlow: the source is read,
    not imported.

    >>> source_default("tfr_rankformer.training.train_config", "TrainConfig", "seed")
    0
    """
    origin = importlib.util.find_spec(module).origin
    tree = ast.parse(pathlib.Path(origin).read_text(encoding="utf-8"))
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name == class_name:
            for item in node.body:
                target = getattr(item, "target", None)
                if isinstance(item, ast.AnnAssign) and getattr(target, "id", None) == field:
                    return ast.literal_eval(item.value)
    raise LookupError(f"{module}.{class_name} has no field {field!r} with a literal default")


def _train_default(field: str):
    from tfr_rankformer.training.train_config import TrainConfig

    return TrainConfig.__dataclass_fields__[field].default


_RANKFORMER = model_families.get_model("rankformer").training
_CONTEXT_AWARE = model_families.get_model("context_aware").training
_LISTFORMER = model_families.get_model("listformer").training
_TEXT_FIELD_DEFAULTS = {
    name: TextConfig.__dataclass_fields__[name].default
    for name in ("max_query_tokens", "max_document_tokens")
}
_SEED = _train_default("seed")
_PROGRESS_SECONDS = 30.0
_SYNTHETIC_LISTS = SyntheticConfig.__dataclass_fields__["train_queries"].default
_ADAM_EPSILON = _train_default("adam_epsilon")
_TREE_PRESETS = "1,000 or 10,000"

FLAGS: dict[str, Flag] = {
    # === What is trained, on what, into where ===
    "model": Flag(
        ("--model",),
        # Read when a parser is built, so a model registered at run time is offered.
        {"choices": model_families.trainable_names},
        "rankformer (listwise encoder + list head), transformer (same encoder, "
        "no list head: the paper's alpha = 0), mlp (pointwise), context_aware (allRank's "
        "self-attention ranker), summary_token_ranker (this project's: items attend only to "
        "[CLS] and learned summary tokens, RankFormer heads), listformer (Reuter's text "
        "re-ranker on text ELWC: one sequence [CLS] q [SEP] d_1 [SEP] ..., document-wise "
        "global-local attention, [SEP] scoring, ApproxNDCG), or a LightGBM lambdarank GBDT: "
        "gbdt (LightGBM's usual settings: 1,000 trees, learning rate 0.05, 63 leaves, "
        "min_data_in_leaf 50) or the paper's Table 5, gbdt-1k (1,000 trees) and gbdt-10k "
        "(10,000 trees). Default: rankformer",
        _train_default("model"),
    ),
    "data": Flag(
        ("--data",),
        {},
        "a tfr-convert output directory (or one of its FoldN/); listformer: a directory "
        "of text ELWC, {train,vali,test}-*.tfrecord with or without a manifest.json",
    ),
    "model_dir": Flag(("--model-dir",), {}, "where config, checkpoints, logs and metrics go"),
    "config": Flag(("--config",), {}, "JSON file of settings (TrainConfig fields); flags override"),
    "epochs": Flag(
        ("--epochs",),
        {"type": int},
        f"maximum epochs. Default: {_RANKFORMER['epochs']} (the RankFormer paper); "
        f"context_aware: {_CONTEXT_AWARE['epochs']} (allRank); listformer: "
        f"{_LISTFORMER['epochs']}, {PRETRAINED_TEXT_TRAINING['epochs']} from a checkpoint "
        "(--init-from)",
        _RANKFORMER["epochs"],
    ),
    "epochs_per_model": Flag(
        ("--epochs",),
        {"type": int},
        f"neural models' epochs. Default: each model's ({_RANKFORMER['epochs']}, the "
        f"RankFormer paper; context_aware: {_CONTEXT_AWARE['epochs']}, allRank; listformer: "
        f"{_LISTFORMER['epochs']})",
        _RANKFORMER["epochs"],
    ),
    "batch_size": Flag(
        ("--batch-size",),
        {"type": int},
        "lists per batch, over all workers together when TF_CONFIG names several "
        "(each takes its share). Set alone, every batch holds exactly this many lists. "
        f"Default: at most {_RANKFORMER['batch_size']} (the RankFormer paper) under the "
        f"--batch-items budget; context_aware: {_CONTEXT_AWARE['batch_size']} (allRank); "
        f"listformer: {_LISTFORMER['batch_size']} (at most {_LISTFORMER['batch_size']} under "
        "the budget from a checkpoint)",
        _RANKFORMER["batch_size"],
    ),
    "batch_items": Flag(
        ("--batch-items",),
        {"type": int},
        "budget of padded items per batch: lists are grouped by length into buckets "
        "(16, 24, 32, 48, ... up to the longest list) and each bucket's batches hold about "
        "this many items, fewer for lists over 256 items (attention grows with the square "
        "of the length). Text models count padded tokens (documents x --max-document-tokens). "
        f"Default: {_RANKFORMER['batch_items']} (the paper's {_RANKFORMER['batch_size']} lists "
        f"of {_RANKFORMER['batch_items'] // _RANKFORMER['batch_size']}); context_aware: "
        f"{_CONTEXT_AWARE['batch_items']} ({_CONTEXT_AWARE['batch_size']} x "
        f"{_CONTEXT_AWARE['batch_items'] // _CONTEXT_AWARE['batch_size']}); "
        f"listformer from a checkpoint: {PRETRAINED_TEXT_TRAINING['batch_items']} tokens",
        _RANKFORMER["batch_items"],
    ),
    "batch_size_per_model": Flag(
        ("--batch-size",),
        {"type": int},
        f"lists per batch. Default: each model's ({_RANKFORMER['batch_size']}; "
        f"context_aware: {_CONTEXT_AWARE['batch_size']}; listformer: "
        f"{_LISTFORMER['batch_size']})",
        _RANKFORMER["batch_size"],
    ),
    "eval_batch_size": Flag(
        ("--batch-size",),
        {"type": int},
        "lists per model call at most (a SavedModel's batches also hold at most 65,536 padded "
        f"items, lists grouped by length). Default: {_RANKFORMER['eval_batch_size']} "
        f"(Listformer: {_LISTFORMER['eval_batch_size']}, as its evaluation)",
        _RANKFORMER["eval_batch_size"],
    ),
    "list_size": Flag(
        ("--list-size",),
        {"type": int},
        "items a training list keeps at most; longer lists are sampled afresh each epoch "
        "and the items left out are counted in the log and metrics.json. Default: whole "
        "lists (simulated data: the simulation's sample size, 16); context_aware: "
        f"{_CONTEXT_AWARE['batch_items'] // _CONTEXT_AWARE['batch_size']} (allRank); "
        f"listformer: 100 documents, {PRETRAINED_TEXT_TRAINING['list_size']} from a checkpoint "
        "(judged relevant documents are kept first)",
    ),
    "patience": Flag(
        ("--patience",),
        {"type": int},
        "epochs without better validation NDCG_y@10 before stopping (--keep-weights "
        f"best). Default: {FALLBACK_TRAINING['patience']}; listformer from a checkpoint: "
        f"{PRETRAINED_TEXT_TRAINING['patience']}",
        FALLBACK_TRAINING["patience"],
    ),
    "patience_per_model": Flag(
        ("--patience",),
        {"type": int},
        f"early-stopping patience in epochs. Default: {FALLBACK_TRAINING['patience']}",
        FALLBACK_TRAINING["patience"],
    ),
    "adam_epsilon": Flag(
        ("--adam-epsilon",),
        {"choices": list(ADAM_EPSILONS)},
        "where Adam's epsilon is added: pytorch, to the bias-corrected sqrt(v) as "
        "torch.optim (the authors' code and allRank); keras, to the uncorrected sqrt(v) as "
        "Keras's Adam (up to 32x more damping early on). "
        f"Default: {_ADAM_EPSILON}",
        _ADAM_EPSILON,
    ),
    "precision": Flag(
        ("--precision",),
        {"choices": list(PRECISIONS)},
        "compute precision: float32, or mixed precision with bf16 (bfloat16) or float16 "
        "compute, the weights, the model's outputs, the losses and the metrics staying "
        "float32; bf16 runs in hardware on CPUs with AVX512-BF16 or AMX and on recent "
        "GPUs. Default: float16 when a GPU is visible, else float32",
    ),
    "seed": Flag(
        ("--seed",),
        {"type": int},
        f"seed of initialisation and shuffling. Default: {_SEED}",
        _SEED,
    ),
    "seeds": Flag(("--seeds",), {"type": int, "default": 1}, "runs per model and fold. Default: 1"),
    "trees": Flag(
        ("--trees",),
        {"type": int},
        "trees to grow (all kept unless --early-stopping-rounds). Default: the "
        f"preset's ({_TREE_PRESETS})",
    ),
    "init_from": Flag(("--init-from",), {"metavar": "DIR"}),
    "max_query_tokens": Flag(
        ("--max-query-tokens",),
        {"type": int},
        "WordPiece tokens kept of a query; longer queries are cut and counted. "
        f"Default: {_TEXT_FIELD_DEFAULTS['max_query_tokens']}",
        _TEXT_FIELD_DEFAULTS["max_query_tokens"],
    ),
    "max_document_tokens": Flag(
        ("--max-document-tokens",),
        {"type": int},
        "WordPiece tokens kept of a document; longer documents are cut and counted. "
        f"Default: {_TEXT_FIELD_DEFAULTS['max_document_tokens']}",
        _TEXT_FIELD_DEFAULTS["max_document_tokens"],
    ),
    # === Data and datasets ===
    "dataset": Flag(("--dataset",), {}),
    "data_dir": Flag(("--data-dir",), {}, "where dataset names are looked up"),
    "input": Flag(("--input",), {}),
    "split": Flag(("--split",), {"default": "test"}),
    "folds": Flag(("--folds",), {"default": "1-5"}, "e.g. 1-5 or 1,3. Default: 1-5"),
    "fold": Flag(("--fold",), {"type": int}),
    "synthetic_lists": Flag(
        ("--synthetic-lists",),
        {"type": int},
        f"train lists (vali and test get a third each). Default: {_SYNTHETIC_LISTS}",
        _SYNTHETIC_LISTS,
    ),
    "duplicate_features": Flag(("--duplicate-features",), {"choices": DUPLICATE_POLICIES}),
    "workers": Flag(("--workers",), {"type": int}),
    # === Outputs and the run's display ===
    "output": Flag(("--output",), {}),
    "overwrite": Flag(("--overwrite",), {"action": "store_true"}),
    "models": Flag(("--models",), {}),
    "tag": Flag(("--tag",), {}),
    "top_k": Flag(("--top-k",), {"type": int, "default": 100}, "documents per query. Default: 100"),
    "timeout": Flag(("--timeout",), {"type": float}),
    "no_progress": Flag(("--no-progress",), {"action": "store_true"}, "hide the progress bar"),
    "progress_seconds": Flag(
        ("--progress-seconds",),
        {"type": float, "default": _PROGRESS_SECONDS},
        "where standard output or error is not a terminal, a progress line (step, "
        "lists/s, the epoch's ETA) is logged this often, and one at each epoch's end; a "
        f"terminal shows Keras's progress bar. Default: {_PROGRESS_SECONDS:g}",
        _PROGRESS_SECONDS,
    ),
    "log_level": Flag(("--log-level",), {"default": "INFO", "choices": LOG_LEVELS}),
    # === LightGBM ===
    "early_stopping_rounds": Flag(("--early-stopping-rounds",), {"type": int}),
    "num_threads": Flag(
        ("--num-threads",), {"type": int}, "LightGBM threads. Default: one per core"
    ),
    # === Benchmarks ===
    "items": Flag(("--items",), {"type": int, "default": 16}),
    "steps": Flag(("--steps",), {"type": int, "default": 3}, "timed steps per configuration"),
    "lists": Flag(("--lists",), {"type": int}),
    "features": Flag(("--features",), {"type": int}),
    "memory_gb": Flag(("--memory-gb",), {"type": float}, "address space each run may add, GiB"),
    "repeat": Flag(("--repeat",), {"type": int}),
    "repeats": Flag(("--repeats",), {"type": int}),
    "reprint": Flag(("--reprint",), {"action": "store_true"}, "print the last run's table again"),
    "record": Flag(
        ("--record",),
        {"metavar": "FILE"},
        "append the run's figures as JSON lines to FILE; python -m "
        "pipelines.benchmarks.speed_records FILE prints them",
    ),
    "official_dir": Flag(("--official-dir",), {}, "checkout of the released code"),
    "official_python": Flag(("--official-python",), {}, "a Python with torch"),
    "official_threads": Flag(("--official-threads",), {"type": int, "default": 2}),
    "threads": Flag(("--threads",), {"type": int, "default": 2}, "torch's intra-op threads"),
}


def add_flag(group, key: str, **options) -> None:
    """Adds the one option ``key`` of :data:`FLAGS`, ``options`` replacing its keywords.

    ``add_flag(p, "seed", default=0)`` is
    ``add_flags(p, "seed", overrides={"seed": {"default": 0}})``.
    """
    add_flags(group, key, overrides={key: options})
