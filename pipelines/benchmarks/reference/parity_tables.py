"""``reference_parity``'s statistics and tables. The folds are fixed, so a difference paired
by fold is uncertain only through the seeds: :func:`seed_noise` pools a fold's spread.

>>> found = seed_noise({1: [60.0, 62.0], 2: [70.0, 72.0]})
>>> found["mean"], round(found["se"], 3), round(found["share"], 3)
(66.0, 0.707, 0.058)
"""

from __future__ import annotations

import math
import statistics

from pipelines.benchmarks.bench_support import plus_minus
from pipelines.experiment_specs import parse_folds
from pipelines.experiment_summary import format_difference, mean_se, pair_differences

METRICS = ("ndcg_y@10", "ndcg_r@10", "ndcg_y@10_tmax")
RELEASED = "released code"  # the side's name in the tables and parity.json
BEYOND = 2.0  # standard errors: a difference past this is beyond seed noise
_COLUMNS = "NDCG_y@10 | NDCG_r@10 | NDCG_y@10 (t = max)"


def _section(intro: str, first: str, rows: list[str]) -> str:
    """A markdown table after ``intro``: columns ``first``, then the metrics (none: empty)."""
    columns = first.count("|") + 4
    lines = ["", intro, "", f"| {first} | {_COLUMNS} |", "|---" * columns + "|", *rows]
    return "\n".join(lines) + "\n" if rows else ""


def _pairs(by_label: dict):
    """``(side, first, second, first's runs, second's runs)`` per pair of models on a side."""
    labels = list(by_label)
    for side in ("ours", RELEASED):
        for i, first in enumerate(labels):
            for second in labels[i + 1 :]:
                a, b = by_label[first].get(side), by_label[second].get(side)
                if a and b:
                    yield side, first, second, a, b


def summarize(results: dict, labels: str) -> tuple[dict, dict, dict | None]:
    """``(fold_means, rows, paired)``: means by fold, by side over folds, and Δ by fold."""
    keys = (*METRICS, "lists_per_sec")
    fold_means = {
        label: {
            side: {
                f: {k: statistics.fmean(r[k] for r in runs) for k in keys}
                for f, runs in by_fold.items()
            }
            for side, by_fold in sides.items()
            if by_fold
        }
        for label, sides in results.items()
    }
    rows = {
        label: {
            side: {k: mean_se([means[k] for means in by_fold.values()]) for k in keys}
            for side, by_fold in sides.items()
        }
        for label, sides in fold_means.items()
    }
    paired = None
    if labels == "shared":
        paired = {
            label: pair_differences(sides["ours"], sides[RELEASED], METRICS)
            for label, sides in fold_means.items()
            if len(sides) == 2
        }
    return fold_means, rows, paired


def table(rows: dict, cpu: str, args, paired: dict | None = None) -> str:
    """The main table of ``parity.md``, with ``paired``'s standard errors of Δ."""
    folds = len(parse_folds(args.folds))
    seed_text = "every seed the record holds"
    if args.seeds != "all":
        last = args.seed + args.seeds - 1
        seed_text = f"seed {args.seed}" if args.seeds == 1 else f"seeds {args.seed}-{last}"
        seed_text += " plus 1000 x the fold" if getattr(args, "fold_seeds", False) else ""
    lists = "each side simulating its own clicks"
    lists = "both sides on the same simulated lists" if args.labels == "shared" else lists
    lines = [
        f"Test NDCG x 100 on {args.dataset} with simulated clicks (purchase label 4), "
        f"{lists}, {folds} fold(s), {args.epochs} epochs, {seed_text}, last epoch's "
        "weights; mean ± standard error over folds (a fold's figure is the mean over its "
        "seeds). Δ = ours − released; ✓: |Δ| within the released code's standard error "
        "(no verdict from one fold, which has none)"
        + ("; ± after Δ: standard error of the per-fold differences" if paired else "")
        + f". Speed: median training lists/s over epochs (CPU: {cpu}).",
        "",
        "| model | side | NDCG_y@10 | NDCG_r@10 | NDCG_y@10 (t = max) | lists/s |",
        "|---|---|---|---|---|---|",
    ]
    for label, sides in rows.items():
        for side, values in sides.items():
            cells = [plus_minus(*values[key]) for key in METRICS]
            cells.append(f"{values['lists_per_sec'][0]:,.0f}")
            lines.append(f"| {label} | {side} | " + " | ".join(cells) + " |")
        if RELEASED in sides and "ours" in sides:
            mine, ref = sides["ours"], sides[RELEASED]
            cells = []
            for key in METRICS:
                delta, se = mine[key][0] - ref[key][0], ref[key][1]
                ok = "(one fold)" if math.isnan(se) else "✓" if abs(delta) <= se else "✗"
                spread = (paired or {}).get(label, {}).get(key, {"se": math.nan})["se"]
                cells.append(plus_minus(delta, spread, "+.2f") + f" {ok}")
            ratio = mine["lists_per_sec"][0] / ref["lists_per_sec"][0]
            lines.append(f"| {label} | Δ | " + " | ".join(cells) + f" | {ratio:.2f}x |")
    return "\n".join(lines) + "\n"


def fold_by_fold(paired: dict | None) -> str:
    """Markdown: on how many folds ours is ahead, and the lowest and highest Δ."""
    rows = [
        f"| {label} | "
        + " | ".join(
            f"{d['ahead']}/{d['n']}; {d['low']:+.2f} to {d['high']:+.2f}"
            for d in (found[key] for key in METRICS)
        )
        + " |"
        for label, found in (paired or {}).items()
    ]
    intro = (
        "Ours − released, fold by fold (folds where ours is ahead; lowest to highest difference):"
    )
    return _section(intro, "model", rows)


def seed_by_seed(by_seed: dict) -> str:
    """Markdown: per model and seed run on two folds or more, each side's mean and Δ."""
    lines = []
    for label, sides in by_seed.items():
        mine, ref = sides.get("ours", {}), sides.get(RELEASED, {})
        # Seeds run on two folds or more on a side (not --fold-seeds' one-fold seeds).
        seeds = [
            seed
            for seed in sorted({seed for _, seed in mine} & {seed for _, seed in ref})
            if max(sum(s == seed for _, s in side) for side in (mine, ref)) > 1
        ]
        if len(seeds) < 2:
            continue
        for seed in seeds:
            a = {fold: run for (fold, s), run in mine.items() if s == seed}
            b = {fold: run for (fold, s), run in ref.items() if s == seed}
            folds = sorted(set(a) & set(b))
            found = pair_differences(a, b, METRICS)
            cells = [
                f"{statistics.fmean(a[f][key] for f in folds):.2f} / "
                f"{statistics.fmean(b[f][key] for f in folds):.2f}; "
                + format_difference(found[key])
                for key in METRICS
            ]
            where = ",".join(str(f) for f in folds)
            lines.append(f"| {label} | {seed} | {where} | " + " | ".join(cells) + " |")
    intro = (
        "Seed by seed, over the folds both sides ran it on (ours / released; Δ ± standard "
        "error of the per-fold differences, folds where ours is ahead):"
    )
    return _section(intro, "model | seed | folds", lines)


def between_models(fold_means: dict, results: dict) -> str:
    """Markdown: every pair of models on a side paired by fold, and each model's seed spread."""
    pairs = []
    for side, first, second, a, b in _pairs(fold_means):
        found = pair_differences(a, b, METRICS)
        cells = " | ".join(format_difference(found[key]) for key in METRICS)
        pairs.append(f"| {side} | {first} − {second} | {cells} |")
    spreads = []
    for side in ("ours", RELEASED):
        for label, sides in results.items():
            runs = sides.get(side)
            if runs and all(len(r) > 1 for r in runs.values()):
                pooled = [
                    statistics.fmean(statistics.variance([x[k] for x in r]) for r in runs.values())
                    for k in METRICS
                ]
                cells = " | ".join(f"{math.sqrt(v):.2f}" for v in pooled)
                spreads.append(f"| {side} | {label} | {cells} |")
    intro = (
        "Between models, paired by fold (mean ± standard error of the per-fold "
        "differences; folds where the first is ahead):"
    )
    spread = "Seed spread on the same lists: each fold's standard deviation between seeds, "
    return _section(intro, "side | pair", pairs) + _section(
        spread + "pooled over folds:", "side | model", spreads
    )


def seed_noise(by_fold: dict[int, list[float]]) -> dict:
    """Of ``{fold: [value per seed]}``: the ``mean`` over folds, its ``se`` from seed noise,
    ``sd`` within a fold, the within-fold ``share`` of the variance, ``runs`` and ``folds``."""
    groups = [runs for runs in by_fold.values() if len(runs) > 1]  # pooled within-fold variance
    squares = sum((len(g) - 1) * statistics.variance(g) for g in groups)
    within = squares / sum(len(g) - 1 for g in groups) if groups else math.nan
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
    """``first − second`` paired by fold: ``mean``, ``se`` from seed noise, ``z``."""
    folds = sorted(set(first) & set(second))
    a, b = (seed_noise({f: runs[f] for f in folds}) for runs in (first, second))
    mean, se = a["mean"] - b["mean"], math.hypot(a["se"], b["se"])
    return {"mean": mean, "se": se, "z": mean / se if se > 0 else math.nan, "folds": len(folds)}


def by_fold(runs: dict, key: str) -> dict[int, list[float]]:
    """``{(fold, seed): run}`` as ``{fold: [run[key] per seed]}``."""
    found: dict[int, list[float]] = {}
    for (fold, _), run in sorted(runs.items()):
        found.setdefault(fold, []).append(run[key])
    return found


def _side_cell(found: dict) -> str:
    share = "" if math.isnan(found["se"]) else f" (seed share {found['share']:.0%})"
    return plus_minus(found["mean"], found["se"]) + share


def _difference_cell(found: dict) -> str:
    verdict = "beyond seed noise" if abs(found["z"]) > BEYOND else "within seed noise"
    z = "" if math.isnan(found["se"]) else f" (z {found['z']:+.1f}, {verdict})"
    return plus_minus(found["mean"], found["se"], "+.2f") + z


def over_runs(by_seed: dict) -> str:
    """Markdown: each side's mean ± seed noise, and the differences (none: no fold of two)."""
    lines = []
    sides = ("ours", RELEASED)
    for label, found in by_seed.items():
        for side in (s for s in sides if found.get(s)):
            noise = [seed_noise(by_fold(found[side], key)) for key in METRICS]
            if all(math.isnan(n["se"]) for n in noise):
                continue
            count = f"{noise[0]['runs']} ({noise[0]['folds']})"
            lines.append(f"| {label} | {side} | {count} | " + " | ".join(map(_side_cell, noise)))
        if found.get("ours") and found.get(RELEASED):
            cells = [
                _difference_cell(
                    noise_difference(by_fold(found["ours"], k), by_fold(found[RELEASED], k))
                )
                for k in METRICS
            ]
            lines.append(f"| {label} | ours − released | | " + " | ".join(cells))
    for side, first, second, a, b in _pairs(by_seed):
        cells = [_difference_cell(noise_difference(by_fold(a, k), by_fold(b, k))) for k in METRICS]
        lines.append(f"| {first} − {second} | {side} | | " + " | ".join(cells))
    if not any("±" in line for line in lines):
        return ""
    intro = (
        "Over every (fold, seed) run, with seeds as the noise: a side's mean over folds "
        "± the standard error seed noise alone gives it (from the spread between a fold's "
        "runs, pooled over folds), and the seed's share of all runs' variance; "
        f"differences paired by fold, beyond seed noise past {BEYOND:g} standard errors:"
    )
    return _section(intro, "model | side | runs (folds)", [line + " |" for line in lines])


PARTS = ("table", "folds", "seeds", "noise", "models")


def tables_of(results: dict, by_seed: dict, args, cpu: str, parts=PARTS) -> str:
    """The tables ``parts`` of the runs (``results`` and ``by_seed`` as ``recorded_runs``)."""
    fold_means, rows, paired = summarize(results, args.labels)
    found = {
        "table": lambda: table(rows, cpu, args, paired),
        "folds": lambda: fold_by_fold(paired),
        "seeds": lambda: seed_by_seed(by_seed),
        "noise": lambda: over_runs(by_seed),
        "models": lambda: between_models(fold_means, results),
    }
    return "".join(found[part]() for part in parts)
