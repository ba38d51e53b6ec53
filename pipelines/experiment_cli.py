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
import logging
import sys

from pipelines.cli_common import make_parser
from pipelines.tf_log_level import add_verbose_flag, set_tensorflow_log_level
from tfr_rankformer.command_names import (
    DEFAULT_EXPERIMENT_MODELS,
    DEFAULT_TEXT_EXPERIMENT_MODELS,
)

__all__ = ["build_parser", "main"]


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
    p.add_argument(
        "--dataset",
        required=True,
        help="a LETOR directory, a dataset name (looked up under --data-dir, $TFR_DATA_DIR, "
        "the working directory), synthetic, text data (synthetic-text, or trec:DIR: the TREC "
        "layout's files found in DIR by their usual names), or a tfr-convert output to use "
        "as it is",
    )
    p.add_argument("--output", required=True, help="the experiment's directory")
    p.add_argument(
        "--models",
        help="comma-separated NAME[:KEY=VALUE...]: neural models with tfr-train settings "
        "(e.g. rankformer:alpha=4:loss=lambdarank) or GBDTs with LightGBM parameters "
        "(e.g. gbdt-1k:num_leaves=63); on text data bm25 (k1, b, method) and listformer "
        "(tfr-train settings, e.g. listformer:width=64:max_document_tokens=64). Default: "
        f"{DEFAULT_EXPERIMENT_MODELS}; on text data {DEFAULT_TEXT_EXPERIMENT_MODELS}",
    )
    p.add_argument("--folds", default="1-5", help="e.g. 1-5 or 1,3. Default: 1-5")
    p.add_argument("--seeds", type=int, default=1, help="runs per model and fold. Default: 1")


def _add_training_options(p: argparse.ArgumentParser) -> None:
    """``--epochs`` .. ``--no-simulation``: settings shared by every neural model's runs."""
    p.add_argument(
        "--epochs",
        type=int,
        help="neural models' epochs. Default: each model's (200, the RankFormer paper; "
        "context_aware: 100, allRank; listformer: 20)",
    )
    p.add_argument(
        "--batch-size",
        type=int,
        help="lists per batch. Default: each model's (2048; context_aware: 64; listformer: 16)",
    )
    p.add_argument("--patience", type=int, help="early-stopping patience in epochs. Default: 20")
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
    p.add_argument("--data-dir", help="where dataset names are looked up")
    p.add_argument(
        "--synthetic-lists",
        type=int,
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
    p.add_argument(
        "--no-progress",
        action="store_true",
        help="hide the conversion's and training's progress (bars on a terminal, progress "
        "lines elsewhere); the lines that mark each stage's start and end stay",
    )
    p.add_argument(
        "--progress-seconds",
        type=float,
        default=30.0,
        help="where standard output or error is not a terminal, each neural run logs a "
        "progress line (step, lists/s, the epoch's ETA) this often, and one at each epoch's "
        "end, as tfr-train does; a terminal shows Keras's progress bar. Default: 30",
    )
    p.add_argument(
        "--log-level",
        default="INFO",
        choices=["DEBUG", "INFO", "WARNING", "ERROR"],
        help="INFO (the default) shows each stage's start and end and the runs' progress "
        "lines; WARNING only problems",
    )
    add_verbose_flag(p)


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not args.progress_seconds > 0:
        parser.error(f"--progress-seconds must be > 0, got {args.progress_seconds}")
    set_tensorflow_log_level(verbose=args.verbose)
    logging.basicConfig(level=args.log_level, format="%(levelname)s %(name)s: %(message)s")
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
