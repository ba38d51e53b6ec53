"""``reference_parity``'s table over every (fold, seed) run, with seeds as the noise.

Folds are fixed (both sides and every model train and test on the same lists),
so a difference between two sides or two models paired fold by fold is
uncertain only through the seeds: the initial weights, the shuffles and the
dropout masks. :func:`seed_noise` measures that noise from the spread between a
fold's runs (pooled over folds) and :func:`noise_difference` gives a paired
difference its standard error from it. With few folds and one seed per fold the
spread between folds mixes the folds' own differences into it; with independent
seeds per fold (``--fold-seeds``) and several per fold, it does not.

>>> runs = {1: [60.0, 62.0], 2: [70.0, 72.0]}
>>> found = seed_noise(runs)
>>> found["mean"], round(found["se"], 3), round(found["share"], 3)
(66.0, 0.707, 0.058)
"""

from __future__ import annotations

import math
import statistics

from pipelines.benchmarks.reference.parity_records import METRICS, RELEASED

__all__ = ["noise_difference", "over_runs", "seed_noise"]

BEYOND = 2.0  # standard errors: a difference past this is beyond seed noise


def _within(by_fold: dict[int, list[float]]) -> float:
    """The variance between runs within a fold, pooled over folds with two or more."""
    groups = [runs for runs in by_fold.values() if len(runs) > 1]
    if not groups:
        return math.nan
    squares = sum((len(g) - 1) * statistics.variance(g) for g in groups)
    return squares / sum(len(g) - 1 for g in groups)


def seed_noise(by_fold: dict[int, list[float]]) -> dict:
    """A side's runs ``{fold: [value per seed]}``: ``mean`` over folds (each fold's mean
    over its runs), ``se`` of that mean from seed noise alone, ``sd`` (a seed's spread
    within a fold), ``share`` (that within-fold variance over all runs' variance),
    ``runs`` and ``folds``. NaN where no fold has two runs."""
    within = _within(by_fold)
    values = [v for runs in by_fold.values() for v in runs]
    total = statistics.variance(values) if len(values) > 1 else math.nan
    folds = len(by_fold)
    se = math.sqrt(sum(within / len(runs) for runs in by_fold.values())) / folds
    return {
        "mean": statistics.fmean(statistics.fmean(r) for r in by_fold.values()),
        "se": se,
        "sd": math.sqrt(within),
        "share": within / total if total > 0 else math.nan,
        "runs": len(values),
        "folds": folds,
    }


def noise_difference(first: dict[int, list[float]], second: dict[int, list[float]]) -> dict:
    """``first − second`` paired by the folds both hold: ``mean`` of the per-fold
    differences of means, its ``se`` from each side's seed noise, and ``z``."""
    folds = sorted(set(first) & set(second))
    a = {f: first[f] for f in folds}
    b = {f: second[f] for f in folds}
    wa, wb = _within(a), _within(b)
    mean = statistics.fmean(statistics.fmean(a[f]) - statistics.fmean(b[f]) for f in folds)
    se = math.sqrt(sum(wa / len(a[f]) + wb / len(b[f]) for f in folds)) / len(folds)
    return {"mean": mean, "se": se, "z": mean / se if se > 0 else math.nan, "folds": len(folds)}


def _by_fold(runs: dict, key: str) -> dict[int, list[float]]:
    """``{(fold, seed): run}`` as ``{fold: [run[key] per seed]}``."""
    found: dict[int, list[float]] = {}
    for (fold, _), run in sorted(runs.items()):
        found.setdefault(fold, []).append(run[key])
    return found


def _side_cell(found: dict) -> str:
    if math.isnan(found["se"]):
        return f"{found['mean']:.2f}"
    return f"{found['mean']:.2f} ± {found['se']:.2f} (seed share {found['share']:.0%})"


def _difference_cell(found: dict) -> str:
    if math.isnan(found["se"]):
        return f"{found['mean']:+.2f}"
    verdict = "beyond seed noise" if abs(found["z"]) > BEYOND else "within seed noise"
    return f"{found['mean']:+.2f} ± {found['se']:.2f} (z {found['z']:+.1f}, {verdict})"


def over_runs(by_seed: dict) -> str:
    """Markdown: per model and side, the mean over folds ± its seed-noise standard
    error and the seed's share of the variance; ours − released per model and, on
    each side, every pair of models, paired by fold with seed-noise standard errors.
    ``by_seed[label][side][(fold, seed)]`` holds the runs. Empty when no fold of any
    model has two runs on a side (no seed noise to measure)."""
    lines = []
    sides = ("ours", RELEASED)
    for label, found in by_seed.items():
        for side in (s for s in sides if found.get(s)):
            noise = [seed_noise(_by_fold(found[side], key)) for key in METRICS]
            if all(math.isnan(n["se"]) for n in noise):
                continue
            count = f"{noise[0]['runs']} ({noise[0]['folds']})"
            lines.append(f"| {label} | {side} | {count} | " + " | ".join(map(_side_cell, noise)))
        if found.get("ours") and found.get(RELEASED):
            cells = [
                _difference_cell(
                    noise_difference(_by_fold(found["ours"], k), _by_fold(found[RELEASED], k))
                )
                for k in METRICS
            ]
            lines.append(f"| {label} | ours − released | | " + " | ".join(cells))
    labels = list(by_seed)
    for side in sides:
        for i, first in enumerate(labels):
            for second in labels[i + 1 :]:
                a, b = by_seed[first].get(side), by_seed[second].get(side)
                if not a or not b:
                    continue
                cells = [
                    _difference_cell(noise_difference(_by_fold(a, k), _by_fold(b, k)))
                    for k in METRICS
                ]
                lines.append(f"| {first} − {second} | {side} | | " + " | ".join(cells))
    if not any("±" in line for line in lines):
        return ""
    header = [
        "",
        "Over every (fold, seed) run, with seeds as the noise: a side's mean over folds "
        "± the standard error seed noise alone gives it (from the spread between a fold's "
        "runs, pooled over folds), and the seed's share of all runs' variance; "
        "differences paired by fold, beyond seed noise past "
        f"{BEYOND:g} standard errors:",
        "",
        "| model | side | runs (folds) | NDCG_y@10 | NDCG_r@10 | NDCG_y@10 (t = max) |",
        "|---|---|---|---|---|---|",
    ]
    return "\n".join(header + [line + " |" for line in lines]) + "\n"
