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

from pipelines.cli_common import make_parser
from pipelines.experiment_specs import ExperimentConfig
from pipelines.tf_log_level import Display, one_error_line, start_command
from tfr_rankformer.core.config_io import add_options, from_args


def build_parser() -> argparse.ArgumentParser:
    """``tfr-experiment``'s parser, generated from ``ExperimentConfig``'s fields."""
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
    add_options(p, ExperimentConfig)
    add_options(p, Display, overrides=_DISPLAY)
    return p


_DISPLAY = {
    "no_progress": {
        "help": "hide the conversion's and training's progress (bars on a terminal, progress "
        "lines elsewhere); the lines that mark each stage's start and end stay"
    },
    "log_level": {
        "help": "INFO (the default) shows each stage's start and end and the runs' progress "
        "lines; WARNING only problems"
    },
}


@one_error_line("tfr-experiment")
def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    display = from_args(args, Display)
    if not display.progress_seconds > 0:
        parser.error(f"--progress-seconds must be > 0, got {display.progress_seconds}")
    start_command(args)
    from pipelines.experiment_runner import run_experiment

    config = from_args(args, ExperimentConfig)
    results = run_experiment(
        config, progress=not display.no_progress, progress_seconds=display.progress_seconds
    )
    with open(f"{args.output}/results.md", encoding="utf-8") as f:
        print(f.read())
    print(f"wrote {args.output}/results.md, {args.output}/results.json")
    for path in results["plots"]:
        print(f"plot: {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
