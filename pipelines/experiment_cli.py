"""``tfr-experiment``: the RankFormer paper's Table 2 on one dataset, with plots.

Examples::

    tfr-experiment --dataset MQ2008 --folds 1-5 --output results/mq2008
    tfr-experiment --dataset synthetic --models gbdt-1k,mlp,rankformer:alpha=1 \\
        --folds 1 --epochs 5 --batch-size 256 --output results/synthetic
    tfr-experiment --dataset MQ2008 --no-simulation --models gbdt-1k,rankformer --output appx_a
    tfr-experiment --dataset data/mq2008 --models gbdt,gbdt-1k --tuned tune --output tuned
    # text data: BM25 against the Listformer (the thesis's comparison)
    tfr-experiment --dataset synthetic-text --synthetic-lists 3000 --folds 1 --epochs 5 \
        --models bm25,listformer:width=64:num_heads=2:num_layers=2:ff_dim=128 \
        --output results/text
"""

from __future__ import annotations

import argparse
import sys

from pipelines.cli_common import make_parser
from pipelines.flag_table import add_flag
from pipelines.tf_log_level import add_verbose_flag, start_command
from tfr_rankformer.core.command_names import (
    DEFAULT_EXPERIMENT_MODELS,
    DEFAULT_TEXT_EXPERIMENT_MODELS,
)

__all__ = ["build_parser", "main"]


_MODELS_HELP = (
    "comma-separated NAME[:KEY=VALUE...]: neural models with tfr-train settings "
    "(e.g. rankformer:alpha=4:loss=lambdarank) or GBDTs with LightGBM parameters "
    "(e.g. gbdt-1k:num_leaves=63); on text data bm25 (k1, b, method) and listformer "
    "(tfr-train settings, e.g. listformer:width=64:max_document_tokens=64). Default: "
    f"{DEFAULT_EXPERIMENT_MODELS}; on text data {DEFAULT_TEXT_EXPERIMENT_MODELS}"
)


def build_parser() -> argparse.ArgumentParser:
    """``tfr-experiment``'s parser, its options in ``--help``'s order."""
    p = make_parser(
        "tfr-experiment",
        "Convert a dataset (with the paper's click simulation unless --no-simulation), train "
        "and evaluate every model on every fold and seed, and write OUTPUT/results.md (the "
        "paper's Table 2 layout: test NDCG_y@10 and NDCG_r@10, mean ± standard error, best "
        "two in bold; on text data NDCG@1, @5 and @10; then every pair of models compared run "
        "by run), OUTPUT/results.json (every run's "
        "metrics, settings, timing and versions) and PNG plots. Finished runs are skipped "
        "when the command is rerun; an interrupted run starts again.",
        __doc__,
    )
    _add_run_options(p)
    _add_training_options(p)
    _add_input_options(p)
    _add_display_options(p)
    return p


def _add_run_options(p: argparse.ArgumentParser) -> None:
    """``--dataset`` .. ``--seeds``: the data, the models, their folds and seeds, the output."""
    add_flag(
        p,
        "dataset",
        required=True,
        help="a LETOR directory, a dataset name (looked up under --data-dir, "
        "$TFR_DATA_DIR, the working directory), synthetic, text data "
        "(synthetic-text, or trec:DIR: the TREC layout's files found in DIR by "
        "their usual names), or a tfr-convert output to use as it is",
    )
    add_flag(p, "output", required=True, help="the experiment's directory")
    add_flag(p, "models", help=_MODELS_HELP)
    add_flag(p, "folds")
    add_flag(p, "seeds")


def _add_training_options(p: argparse.ArgumentParser) -> None:
    """``--epochs`` .. ``--no-simulation``: settings shared by every neural model's runs."""
    add_flag(p, "epochs_per_model")
    add_flag(p, "batch_size_per_model")
    add_flag(p, "patience_per_model")
    p.add_argument(
        "--no-simulation",
        dest="simulate_clicks",
        action="store_false",
        help="keep the original labels (the paper's Appendix A) instead of simulating clicks "
        "(text data always keeps its relevance judgements)",
    )


def _add_input_options(p: argparse.ArgumentParser) -> None:
    """``--data-dir``, ``--synthetic-lists`` and ``--tuned``: where the data and tuned
    settings come from."""
    add_flag(p, "data_dir")
    add_flag(
        p,
        "synthetic_lists",
        default=300,
        help="train lists of --dataset synthetic or synthetic-text (vali and test get a "
        "third each). Default: 300",
    )
    p.add_argument(
        "--tuned",
        metavar="DIR",
        help="a tfr-tune output, or a directory of them: each best_config.json joins the "
        "table as a 'tuned <model>' row, trained on every fold with its tuned settings",
    )


def _add_display_options(p: argparse.ArgumentParser) -> None:
    """``--no-progress``, ``--progress-seconds``, ``--log-level`` and ``--verbose``."""
    add_flag(
        p,
        "no_progress",
        help="hide the conversion's and training's progress (bars on a terminal, "
        "progress lines elsewhere); the lines that mark each stage's start and "
        "end stay",
    )
    add_flag(
        p,
        "progress_seconds",
        help="where standard output or error is not a terminal, each neural run logs "
        "a progress line (step, lists/s, the epoch's ETA) this often, and one at "
        "each epoch's end, as tfr-train does; a terminal shows Keras's progress "
        "bar. Default: 30",
    )
    add_flag(
        p,
        "log_level",
        help="INFO (the default) shows each stage's start and end and the runs' "
        "progress lines; WARNING only problems",
    )
    add_verbose_flag(p)


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not args.progress_seconds > 0:
        parser.error(f"--progress-seconds must be > 0, got {args.progress_seconds}")
    start_command(args)
    from pipelines.experiment_runner import run_experiment
    from pipelines.experiment_specs import ExperimentConfig

    try:
        config = ExperimentConfig(
            dataset=args.dataset,
            output=args.output,
            models=args.models,
            folds=args.folds,
            seeds=args.seeds,
            epochs=args.epochs,
            batch_size=args.batch_size,
            patience=args.patience,
            simulate_clicks=args.simulate_clicks,
            data_dir=args.data_dir,
            synthetic_lists=args.synthetic_lists,
            tuned=args.tuned,
        )
        results = run_experiment(
            config, progress=not args.no_progress, progress_seconds=args.progress_seconds
        )
    except (ValueError, FileNotFoundError, FileExistsError, OSError) as e:
        print(f"tfr-experiment: error: {e}", file=sys.stderr)
        return 1
    with open(f"{args.output}/results.md", encoding="utf-8") as f:
        print(f.read())
    print(f"wrote {args.output}/results.md, {args.output}/results.json")
    for path in results["plots"]:
        print(f"plot: {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
