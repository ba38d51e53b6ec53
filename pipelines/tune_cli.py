"""``tfr-tune``: Optuna search for a model's settings on the validation split.

Examples::

    tfr-tune --model gbdt --data data/mq2008/Fold1 --output tune/gbdt --trials 30
    tfr-tune --model gbdt --data data/mq2008/Fold1 --output tune/gbdt --trials 30 \
        --search-space small_trees.json --num-threads 1 --timeout 3600
    tfr-tune --model rankformer --data data/mq2008/Fold1 --output tune/rankformer \
        --trials 20 --epochs 30 --batch-size 256
    tfr-train --config tune/gbdt/best_config.json --model-dir runs/gbdt_tuned
    tfr-experiment --dataset data/mq2008 --models gbdt,mlp --tuned tune --output results
"""

from __future__ import annotations

import argparse
import json
import sys

from pipelines.cli_common import make_parser
from pipelines.flag_table import add_flag
from pipelines.tf_log_level import (
    add_verbose_flag,
    configure_command_logging,
    start_command,
)
from tfr_rankformer.core import model_families
from tfr_rankformer.tuning.search_space import GBDT_SPACE, NEURAL_SPACE, describe_space

__all__ = ["build_parser", "main"]


def build_parser() -> argparse.ArgumentParser:
    p = make_parser(
        "tfr-tune",
        "Search a model's settings with Optuna (TPE sampler, seeded; median pruning on "
        "validation NDCG_y@10 per epoch, or every 10 trees for GBDTs). Each trial is a "
        "tfr-train run in OUTPUT/trials/; the objective is its validation NDCG_y@10. The study "
        "is kept in OUTPUT/study.db, so the same command resumes an interrupted search "
        "without repeating finished trials. Writes OUTPUT/best_config.json (for tfr-train "
        "--config), OUTPUT/trials.csv, optimization_history.png and param_importances.png.\n\n"
        f"Default ranges, GBDTs: {describe_space(GBDT_SPACE)}.\n"
        f"Neural models: {describe_space(NEURAL_SPACE)}; num_heads: the divisors of the "
        "encoder's width up to 8; alpha (tfr-train --alpha's scale) only for models with a "
        "list head; mlp: learning_rate, weight_decay, dropout. --search-space replaces any "
        'range: {"num_iterations": {"low": 100, "high": 2000, "log": true}, "ff_dim": '
        '{"choices": [128, 256]}, "cegb_tradeoff": null} (null: not searched).',
        __doc__,
    )
    add_flag(p, "model", required=True, help=None)
    add_flag(p, "data", required=True, help="a tfr-convert output with a vali split")
    add_flag(p, "output", required=True, help="the search's directory (resumed if present)")
    p.add_argument(
        "--trials", type=int, default=30, help="trials the study holds when done. Default: 30"
    )
    add_flag(p, "timeout", help="stop starting trials after this many seconds")
    p.add_argument("--jobs", type=int, default=1, help="trials at once (GBDTs only). Default: 1")
    add_flag(p, "seed", default=0, help="sampler and run seed. Default: 0")
    p.add_argument("--search-space", help="JSON file of ranges replacing the defaults")
    add_flag(
        p,
        "config",
        help="JSON file of fixed settings for every trial (tfr-train --config's format)",
    )
    add_flag(p, "epochs", help="neural models: epochs per trial")
    add_flag(p, "batch_size", help="neural models: lists per batch")
    add_flag(p, "patience", help="neural models: early-stopping patience")
    add_flag(p, "num_threads", help="GBDTs: LightGBM threads per trial")
    p.add_argument("--no-pruning", action="store_true", help="run every trial to its end")
    add_flag(p, "no_progress")
    add_flag(p, "log_level", default="WARNING")
    add_verbose_flag(p)
    return p


def _settings(args) -> dict:
    settings: dict = {}
    if args.config:
        with open(args.config, encoding="utf-8") as f:
            settings = json.load(f)
        if not isinstance(settings, dict):
            raise ValueError(f"{args.config}: must hold an object of settings")
        for key in ("model", "data", "model_dir", "seed"):
            settings.pop(key, None)  # the search's own
    neural = {"epochs": args.epochs, "batch_size": args.batch_size, "patience": args.patience}
    given = {k: v for k, v in neural.items() if v is not None}
    if model_families.is_gbdt(args.model):
        if given:
            flags = ", ".join("--" + k.replace("_", "-") for k in sorted(given))
            raise ValueError(f"{flags}: for the neural models only")
        if args.num_threads is not None:
            settings["num_threads"] = args.num_threads
    else:
        if args.num_threads is not None:
            raise ValueError("--num-threads: for the GBDT models only")
        settings.update(given)
    return settings


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    start_command(args, configure_logging=False)
    from tfr_rankformer.tuning.optuna_search import BEST_CONFIG, TuneConfig, run_tuning

    configure_command_logging(args.log_level)
    try:
        config = TuneConfig(
            model=args.model,
            data=args.data,
            output=args.output,
            trials=args.trials,
            timeout=args.timeout,
            jobs=args.jobs,
            seed=args.seed,
            search_space=args.search_space,
            settings=_settings(args),
            prune=not args.no_pruning,
        )
        summary = run_tuning(config, progress=not args.no_progress)
    except (ValueError, FileNotFoundError, OSError) as e:
        print(f"tfr-tune: error: {e}", file=sys.stderr)
        return 1
    counts = ", ".join(f"{n} {state}" for state, n in sorted(summary["trials"].items()))
    print(f"trials: {counts} ({summary['seconds']:.0f} s in this run)")
    if summary["best_value"] is None:
        print("no trial completed")
        return 1
    print(
        f"best: trial {summary['best_trial']}, {summary['objective']} {summary['best_value']:.2f}"
    )
    print("settings: " + json.dumps(summary["best_params"], sort_keys=True))
    print(f"wrote {args.output}/{BEST_CONFIG} (tfr-train --config it --model-dir DIR)")
    print(f"wrote {args.output}/trials.csv")
    for path in summary["plots"]:
        print(f"plot: {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
