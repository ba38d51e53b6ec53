"""Quality on real data: MQ2008 with simulated clicks, 5 folds, the paper's model set.

Converts every MQ2008 fold with ``--simulate-clicks`` (or reuses the
conversion), trains each model on each fold with the same epoch budget, and
prints NDCG_y@10 and NDCG_r@10 on the test splits as mean ± standard error
over folds, as a Markdown table. Each run's directory keeps its metrics.json.

Run: ``python -m pipelines.benchmarks.mq2008_quality --output results/mq2008``
(MQ2008 is looked up under --data-dir, $TFR_DATA_DIR and the working directory).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

from pipelines.benchmarks.bench_support import letor_folds
from pipelines.experiment_summary import mean_se
from pipelines.flag_table import add_flag
from tfr_rankformer.runner import train
from tfr_rankformer.training.train_config import TrainConfig

MODELS = {
    "mlp": {"model": "mlp"},
    "transformer": {"model": "transformer"},
    # alpha on the released code's scale: 1 and 4 stand for the paper's 0.25 and 1.
    "rankformer alpha=1": {"model": "rankformer", "alpha": 1.0},
    "rankformer alpha=4": {"model": "rankformer", "alpha": 4.0},
}


def fold_parser(description: str, epochs_help: str) -> argparse.ArgumentParser:
    """The arguments the MQ2008 benchmarks share."""
    parser = argparse.ArgumentParser(description=description)
    add_flag(parser, "output", default="results/mq2008", help="runs and converted data")
    add_flag(parser, "data_dir", help="where MQ2008/ is")
    add_flag(parser, "folds", default="1,2,3,4,5", help=None)
    add_flag(parser, "epochs", default=30, help=epochs_help)
    add_flag(parser, "batch_size", default=256, help="lists per batch")
    add_flag(parser, "seed", default=0, help=None)
    return parser


def convert_folds(
    output: str, data_dir: str | None, seed: int, *, simulate: bool = True
) -> str | None:
    """``output/data``: every MQ2008 fold, with simulated clicks unless not
    ``simulate`` (converted once); ``None`` when it cannot be converted."""
    try:
        folds = letor_folds(
            "MQ2008", output, data_dir=data_dir, seed=seed, simulate=simulate, progress=False
        )
    except (ValueError, OSError) as error:
        print(f"mq2008: error: {error}", file=sys.stderr)
        return None
    return os.path.dirname(folds[min(folds)])


def ndcg_cells(runs: list[dict]) -> list[str]:
    """Test NDCG_y@10 and NDCG_r@10 of ``runs`` as ``mean ± standard error`` cells."""
    cells = []
    for key in ("ndcg_y@10", "ndcg_r@10"):
        mean, se = mean_se([r[key] for r in runs])
        cells.append(f"{mean:.2f} ± {se:.2f}")
    return cells


def train_fold(args, converted: str, fold: int, name: str, settings: dict | None = None) -> str:
    """Trains ``settings`` (``TrainConfig`` fields; by default ``MODELS[name]``) as
    ``runs/<name>/Fold<fold>`` unless that run is complete; returns its directory."""
    model_dir = os.path.join(args.output, "runs", name.replace(" ", "_"), f"Fold{fold}")
    if not os.path.isfile(os.path.join(model_dir, "metrics.json")):
        started = time.perf_counter()
        train(
            TrainConfig(
                data=os.path.join(converted, f"Fold{fold}"),
                model_dir=model_dir,
                epochs=args.epochs,
                batch_size=args.batch_size,
                patience=args.epochs,
                seed=args.seed,
                **(MODELS[name] if settings is None else settings),
            ),
            verbose=0,
            existing="resume",  # an interrupted run continues
        )
        print(f"Fold{fold} {name}: {time.perf_counter() - started:.0f} s", flush=True)
    return model_dir


def main(argv: list[str] | None = None) -> int:
    parser = fold_parser(__doc__.split("\n\n")[0], "epoch budget of every model")
    args = parser.parse_args(argv)

    converted = convert_folds(args.output, args.data_dir, args.seed)
    if converted is None:
        return 1
    folds = [int(f) for f in args.folds.split(",")]
    results: dict[str, list[dict]] = {name: [] for name in MODELS}
    for fold in folds:
        for name in MODELS:
            model_dir = train_fold(args, converted, fold, name)
            metrics_path = os.path.join(model_dir, "metrics.json")
            with open(metrics_path, encoding="utf-8") as f:
                results[name].append(json.load(f)["test"])

    print(
        f"\nMQ2008, simulated clicks, {len(folds)} folds, {args.epochs} epochs, batch "
        f"{args.batch_size}: test NDCG x 100, mean ± standard error over folds\n"
    )
    print("| model | NDCG_y@10 | NDCG_r@10 |")
    print("|---|---|---|")
    for name, runs in results.items():
        cells = ndcg_cells(runs)
        print(f"| {name} | {cells[0]} | {cells[1]} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
