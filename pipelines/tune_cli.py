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
import dataclasses
import json

from pipelines.cli_common import make_parser
from pipelines.tf_log_level import Display, one_error_line, start_command
from tfr_rankformer.core import model_families
from tfr_rankformer.core.config_io import add_options, from_args, load_settings, setting
from tfr_rankformer.tuning.search_space import GBDT_SPACE, NEURAL_SPACE, describe_space


@dataclasses.dataclass(frozen=True)
class TuneOptions:
    """``tfr-tune``'s options: ``TuneConfig``'s (its module loads LightGBM) and every trial's."""

    model: str = setting(
        None, "the model searched", required=True, choices=model_families.trainable_names
    )
    data: str = setting(None, "a tfr-convert output with a vali split", required=True)
    output: str = setting(None, "the search's directory (resumed if present)", required=True)
    trials: int = setting(30, "trials the study holds when done")
    timeout: float | None = setting(None, "stop starting trials after this many seconds")
    jobs: int = setting(1, "trials at once (GBDTs only)")
    seed: int = setting(0, "sampler and run seed")
    search_space: str | None = setting(None, "JSON file of ranges replacing the defaults")
    config: str | None = setting(
        None, "JSON file of fixed settings for every trial (tfr-train --config's format)"
    )
    epochs: int | None = setting(None, "neural models: epochs per trial")
    batch_size: int | None = setting(None, "neural models: lists per batch")
    patience: int | None = setting(None, "neural models: early-stopping patience")
    num_threads: int | None = setting(None, "GBDTs: LightGBM threads per trial")
    no_pruning: bool = setting(False, "run every trial to its end")


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
    add_options(p, TuneOptions)
    add_options(
        p,
        Display,
        only=("no_progress", "log_level", "verbose"),
        overrides={"log_level": {"help": "logging level. Default: WARNING"}},
    )
    return p


def _settings(args) -> dict:
    settings: dict = {}
    if args.config:
        from tfr_rankformer.training.train_config import TrainConfig

        settings = load_settings(args.config, TrainConfig, flat=True)
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


@one_error_line("tfr-tune")
def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    start_command(args, log_level=args.log_level or "WARNING")
    options = from_args(args, TuneOptions)
    from tfr_rankformer.tuning.optuna_search import BEST_CONFIG, TuneConfig, run_tuning

    shared = ("model", "data", "output", "trials", "timeout", "jobs", "seed", "search_space")
    config = TuneConfig(
        **{name: getattr(options, name) for name in shared},
        settings=_settings(args),
        prune=not options.no_pruning,
    )
    summary = run_tuning(config, progress=not args.no_progress)
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
    raise SystemExit(main())
