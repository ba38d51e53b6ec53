"""GBDT baselines and the distilled RankFormer on MQ2008 with simulated clicks, 5 folds.

For every fold: ``gbdt-1k`` and ``gbdt-10k`` (the paper's Table 5 presets),
the RankFormer teacher (alpha 1, the paper's 0.25; the same run ``mq2008_quality`` trains:
30 epochs, batch 256), its distilled student (``tfr-distill``, 2,000 trees)
and the GBDT with the student's settings trained on the labels. It prints test
NDCG_y@10 and NDCG_r@10 as mean ± standard error over folds, training time,
and per-list prediction latency: the median time to score one test list on its
own (LightGBM's ``predict`` on one thread for the GBDTs, as a server scores
one request; the Keras model in a ``tf.function`` for the teacher), in this
process, on this machine.

Run: ``python -m pipelines.benchmarks.mq2008_gbdt --output results/mq2008``
(reuses the conversion and the teacher runs of ``mq2008_quality`` in the same
``--output``; finished runs are not repeated). ``--early-stopping-rounds 100``
stops ``gbdt-1k`` and ``gbdt-10k`` early, as the README's table of it was measured.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

import numpy as np

from pipelines.benchmarks.mq2008_quality import convert_folds, fold_parser, ndcg_cells, train_fold
from pipelines.flag_table import add_flag
from tfr_rankformer.distill.distillation import DistillConfig, distill
from tfr_rankformer.distill.distillation_teacher import load_teacher
from tfr_rankformer.gbdt.gbdt_booster import load_booster, score_arrays
from tfr_rankformer.gbdt.gbdt_config import GBDTConfig
from tfr_rankformer.gbdt.lightgbm_ranker import train_gbdt
from tfr_rankformer.inputs import data
from tfr_rankformer.inputs.list_arrays import read_split

TEACHER = "rankformer alpha=1"
ROWS = ("gbdt-1k", "gbdt-10k", "teacher", "student", "gbdt_labels")
NAMES = {
    "teacher": "RankFormer alpha=1 (teacher)",
    "student": "distilled student",
    "gbdt_labels": "GBDT on labels, student's settings",
}


def _latency_ms(score, arrays, lists: int) -> float:
    """Median milliseconds to score one list, over the first ``lists`` lists."""
    times = []
    score(arrays.slice_lists(0, 1))  # warm-up (tracing)
    for i in range(min(lists, arrays.num_lists)):
        one = arrays.slice_lists(i, i + 1)
        started = time.perf_counter()
        score(one)
        times.append(time.perf_counter() - started)
    return 1000 * float(np.median(times))


def _json(path: str) -> dict:
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def build_parser() -> argparse.ArgumentParser:
    """``mq2008_quality``'s fold options, the student's trees, the latency's lists and
    the presets' early stopping."""
    parser = fold_parser(__doc__.split("\n\n")[0], "the teacher's epochs")
    add_flag(parser, "trees", default=2000, help="the student's trees")
    parser.add_argument("--latency-lists", type=int, default=200, help="lists timed one by one")
    add_flag(
        parser,
        "early_stopping_rounds",
        default=0,
        help="early stopping of gbdt-1k and gbdt-10k (0: their whole budgets)",
    )
    return parser


def _booster_scorer(model_dir: str):
    """Scores lists with the booster saved in ``model_dir``, on one thread."""
    booster = load_booster(model_dir)
    return lambda arrays: score_arrays(booster, arrays, num_threads=1)


def _presets(args, fold_data: str, fold: int, results: dict) -> dict:
    """``gbdt-1k`` and ``gbdt-10k`` on one fold, trained unless finished: appends their
    test metrics and training time to ``results``; returns their scorers."""
    scorers = {}
    for preset in ("gbdt-1k", "gbdt-10k"):
        model_dir = os.path.join(args.output, "runs", preset, f"Fold{fold}")
        if not os.path.isfile(os.path.join(model_dir, "metrics.json")):
            config = GBDTConfig(
                model=preset,
                data=fold_data,
                model_dir=model_dir,
                seed=args.seed,
                early_stopping_rounds=args.early_stopping_rounds,
            )
            train_gbdt(config)
        metrics = _json(os.path.join(model_dir, "metrics.json"))
        row = dict(metrics["test"], training_seconds=metrics["training"]["seconds"])
        results[preset].append(row)
        scorers[preset] = _booster_scorer(model_dir)
    return scorers


def _distilled(args, converted: str, fold: int, results: dict) -> dict:
    """The teacher, its distilled student and the GBDT on labels with the student's
    settings on one fold, each trained unless finished: appends their test metrics to
    ``results``; returns their scorers."""
    teacher_dir = train_fold(args, converted, fold, TEACHER)
    student_dir = os.path.join(args.output, "runs", "student", f"Fold{fold}")
    if not os.path.isfile(os.path.join(student_dir, "metrics.json")):
        distill(
            DistillConfig(teacher=teacher_dir, output=student_dir, trees=args.trees, seed=args.seed)
        )
    comparison = _json(os.path.join(student_dir, "metrics.json"))["comparison"]["test"]
    for name in ("teacher", "student", "gbdt_labels"):
        results[name].append(comparison[name])
    scorers = {"teacher": load_teacher(teacher_dir).score}
    for name, directory in (("student", ""), ("gbdt_labels", "gbdt_labels")):
        scorers[name] = _booster_scorer(os.path.join(student_dir, directory))
    return scorers


def _print_table(results: dict[str, list[dict]], folds: int) -> None:
    """The table: NDCG mean ± standard error over ``folds`` folds, time and latency."""
    print(
        f"\nMQ2008, simulated clicks, {folds} folds: test NDCG x 100, mean ± standard "
        f"error over folds; training seconds and single-list latency, means over folds\n"
    )
    print("| model | NDCG_y@10 | NDCG_r@10 | training s | latency ms/list |")
    print("|---|---|---|---|---|")
    for name in ROWS:
        rows = results[name]
        cells = ndcg_cells(rows)
        seconds = np.mean([r["training_seconds"] for r in rows])
        latency = np.mean([r["latency_ms"] for r in rows])
        label = NAMES.get(name, name)
        print(f"| {label} | {cells[0]} | {cells[1]} | {seconds:,.1f} | {latency:.3f} |")


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    converted = convert_folds(args.output, args.data_dir, args.seed)
    if converted is None:
        return 1
    folds = [int(f) for f in args.folds.split(",")]
    results: dict[str, list[dict]] = {name: [] for name in ROWS}
    for fold in folds:
        fold_data = os.path.join(converted, f"Fold{fold}")
        test = read_split(fold_data, data.load_manifest(fold_data), "test")
        scorers = _presets(args, fold_data, fold, results)
        scorers.update(_distilled(args, converted, fold, results))
        for name, score in scorers.items():
            results[name][-1]["latency_ms"] = _latency_ms(score, test, args.latency_lists)
        print(f"Fold{fold} done", flush=True)
    _print_table(results, len(folds))
    return 0


if __name__ == "__main__":
    sys.exit(main())
