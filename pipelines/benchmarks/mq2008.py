"""Quality on MQ2008 (``python -m pipelines.benchmarks.mq2008 gbdt``): the GBDT presets
beside the RankFormer teacher and its distilled student, with single-list latency, on
simulated clicks. Finished runs are reused.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

from pipelines.benchmarks.bench_support import HelpFormatter, letor_folds, read_json
from pipelines.experiment_summary import mean_se
from tfr_rankformer.training.train_config import TrainConfig

TEACHER = "rankformer alpha=1"  # on the released code's scale: the paper's 0.25
GBDT_ROWS = {
    "gbdt-1k": "gbdt-1k",
    "gbdt-10k": "gbdt-10k",
    "teacher": "RankFormer alpha=1 (teacher)",
    "student": "distilled student",
    "gbdt_labels": "GBDT on labels, student's settings",
}


def teacher_fold(args, fold: int) -> str:
    """``runs/<TEACHER>/Fold<fold>``: the teacher trained unless done."""
    from tfr_rankformer.training.loop import train

    model_dir = os.path.join(args.output, "runs", TEACHER.replace(" ", "_"), f"Fold{fold}")
    if not os.path.isfile(os.path.join(model_dir, "metrics.json")):
        started = time.perf_counter()
        data = os.path.join(args.converted, f"Fold{fold}")
        settings = dict(epochs=args.epochs, batch_size=args.batch_size, patience=args.epochs)
        settings.update(model="rankformer", alpha=1.0, data=data, model_dir=model_dir)
        train(TrainConfig(seed=args.seed, **settings), verbose=0, existing="resume")
        print(f"Fold{fold} {TEACHER}: {time.perf_counter() - started:.0f} s", flush=True)
    return model_dir


def ndcg_cells(runs: list[dict]) -> list[str]:
    """Test NDCG_y@10 and NDCG_r@10 of ``runs``, mean ± standard error."""
    return [
        "{:.2f} ± {:.2f}".format(*mean_se([r[k] for r in runs])) for k in ("ndcg_y@10", "ndcg_r@10")
    ]


def latency_ms(score, arrays, lists: int) -> float:
    """Median milliseconds to score one list, over the first ``lists`` lists."""
    times = []
    score(arrays.slice_lists(0, 1))  # warm-up (tracing)
    for i in range(min(lists, arrays.num_lists)):
        one = arrays.slice_lists(i, i + 1)
        started = time.perf_counter()
        score(one)
        times.append(time.perf_counter() - started)
    return 1000 * float(np.median(times))


def gbdt_fold(args, fold: int, results: dict) -> dict:
    """Each row's scorer on one fold; their test metrics appended to ``results``."""
    from tfr_rankformer.distill.distillation import DistillConfig, distill
    from tfr_rankformer.distill.distillation_teacher import load_teacher
    from tfr_rankformer.gbdt import lightgbm_ranker as gbdt

    def booster_scorer(model_dir: str):
        booster = gbdt.load_booster(model_dir)
        return lambda arrays: gbdt.score_arrays(booster, arrays, num_threads=1)

    scorers = {}
    for preset in ("gbdt-1k", "gbdt-10k"):
        model_dir = os.path.join(args.output, "runs", preset, f"Fold{fold}")
        if not os.path.isfile(os.path.join(model_dir, "metrics.json")):
            data = os.path.join(args.converted, f"Fold{fold}")
            config = dict(model=preset, data=data, model_dir=model_dir, seed=args.seed)
            config["early_stopping_rounds"] = args.early_stopping_rounds
            gbdt.train_gbdt(gbdt.GBDTConfig(**config))
        found = read_json(os.path.join(model_dir, "metrics.json"))
        results[preset].append(dict(found["test"], training_seconds=found["training"]["seconds"]))
        scorers[preset] = booster_scorer(model_dir)
    teacher_dir = teacher_fold(args, fold)
    student_dir = os.path.join(args.output, "runs", "student", f"Fold{fold}")
    if not os.path.isfile(os.path.join(student_dir, "metrics.json")):
        distill(DistillConfig(teacher_dir, student_dir, trees=args.trees, seed=args.seed))
    comparison = read_json(os.path.join(student_dir, "metrics.json"))["comparison"]["test"]
    for name in ("teacher", "student", "gbdt_labels"):
        results[name].append(comparison[name])
    scorers["teacher"] = load_teacher(teacher_dir).score
    scorers["student"] = booster_scorer(student_dir)
    scorers["gbdt_labels"] = booster_scorer(os.path.join(student_dir, "gbdt_labels"))
    return scorers


def gbdt_study(args, folds: list[int]) -> None:
    from tfr_rankformer.inputs.list_arrays import read_split
    from tfr_rankformer.inputs.manifest import load_manifest

    results: dict[str, list[dict]] = {name: [] for name in GBDT_ROWS}
    for fold in folds:
        fold_data = os.path.join(args.converted, f"Fold{fold}")
        test = read_split(fold_data, load_manifest(fold_data), "test")
        for name, score in gbdt_fold(args, fold, results).items():
            results[name][-1]["latency_ms"] = latency_ms(score, test, args.latency_lists)
        print(f"Fold{fold} done", flush=True)
    print(
        f"\nMQ2008, simulated clicks, {len(folds)} folds: test NDCG x 100, mean ± standard "
        f"error over folds; training seconds and single-list latency, means over folds\n"
    )
    print("| model | NDCG_y@10 | NDCG_r@10 | training s | latency ms/list |\n|---|---|---|---|---|")
    for name, label in GBDT_ROWS.items():
        rows = results[name]
        seconds = np.mean([r["training_seconds"] for r in rows])
        latency = np.mean([r["latency_ms"] for r in rows])
        print(f"| {label} | {' | '.join(ndcg_cells(rows))} | {seconds:,.1f} | {latency:.3f} |")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    studies = parser.add_subparsers(dest="study", required=True)
    what = "GBDT baselines and the distilled RankFormer with simulated clicks"
    add = studies.add_parser("gbdt", help=what, formatter_class=HelpFormatter).add_argument
    add("--output", default="results/mq2008", help="runs and data")
    add("--data-dir", help="where MQ2008/ is")
    add("--folds", default="1,2,3,4,5", help="comma-separated folds")
    add("--epochs", type=int, default=30, help="epoch budget of every neural run")
    add("--batch-size", type=int, default=256, help="lists per batch")
    add("--seed", type=int, default=0, help="seed of the conversion and the runs")
    add("--trees", type=int, default=2000, help="the student's trees")
    add("--latency-lists", type=int, default=200, help="lists timed one by one")
    add("--early-stopping-rounds", type=int, default=0, help="of the presets (0: none)")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        where = dict(data_dir=args.data_dir, seed=args.seed, progress=False)
        converted = letor_folds("MQ2008", args.output, **where)
    except (ValueError, OSError) as error:
        print(f"mq2008: error: {error}", file=sys.stderr)
        return 1
    args.converted = os.path.dirname(converted[min(converted)])
    gbdt_study(args, [int(f) for f in args.folds.split(",")])
    return 0


if __name__ == "__main__":
    sys.exit(main())
