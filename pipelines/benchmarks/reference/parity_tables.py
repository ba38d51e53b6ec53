"""``reference_parity``'s statistics and tables: from the runs to ``parity.md``.

:func:`summarize` averages each fold's runs over its seeds and the folds into
mean ± standard error, with the per-fold differences between the two sides on
shared lists; :func:`table`, :func:`fold_by_fold`, :func:`seed_by_seed` and
:func:`between_models` format them as the markdown tables it prints.
"""

from __future__ import annotations

import math
import statistics

from pipelines.benchmarks.reference.parity_records import METRICS, RELEASED
from pipelines.experiment_specs import parse_folds
from pipelines.experiment_summary import format_difference, mean_se, pair_differences


def summarize(results: dict, labels: str) -> tuple[dict, dict, dict | None]:
    """``(fold_means, rows, paired)`` of ``results[label][side][fold]`` (a fold's
    runs, one per seed): each fold's mean over its seeds, each side's mean ±
    standard error over the folds, and with ``labels`` ``shared`` the per-fold
    differences ours − released of every model both sides ran (else ``None``)."""
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
    """The markdown table of ``parity.md``; ``paired`` holds, per model and metric,
    the mean ± standard error of the per-fold differences (shared lists only)."""
    folds = len(parse_folds(args.folds))
    if args.seeds == "all":
        seed_text = "every seed the record holds"
    else:
        last = args.seed + args.seeds - 1
        seed_text = f"seed {args.seed}" if args.seeds == 1 else f"seeds {args.seed}-{last}"
        if getattr(args, "fold_seeds", False):
            seed_text += " plus 1000 x the fold"
    lists = (
        "both sides on the same simulated lists"
        if args.labels == "shared"
        else "each side simulating its own clicks"
    )
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
            cells = []
            for key in (*METRICS, "lists_per_sec"):
                mean, se = values[key]
                text = f"{mean:,.0f}" if key == "lists_per_sec" else f"{mean:.2f}"
                if key != "lists_per_sec" and not math.isnan(se):
                    text += f" ± {se:.2f}"
                cells.append(text)
            lines.append(f"| {label} | {side} | " + " | ".join(cells) + " |")
        if RELEASED in sides and "ours" in sides:
            mine, ref = sides["ours"], sides[RELEASED]
            cells = []
            for key in METRICS:
                delta = mine[key][0] - ref[key][0]
                if math.isnan(ref[key][1]):
                    ok = "(one fold)"
                else:
                    ok = "✓" if abs(delta) <= ref[key][1] else "✗"
                spread = paired.get(label, {}).get(key) if paired else None
                if spread is not None and not math.isnan(spread["se"]):
                    cells.append(f"{delta:+.2f} ± {spread['se']:.2f} {ok}")
                else:
                    cells.append(f"{delta:+.2f} {ok}")
            ratio = mine["lists_per_sec"][0] / ref["lists_per_sec"][0]
            lines.append(f"| {label} | Δ | " + " | ".join(cells) + f" | {ratio:.2f}x |")
    return "\n".join(lines) + "\n"


def fold_by_fold(paired: dict | None) -> str:
    """Markdown: ours − released on each fold (shared lists): on how many folds ours
    is ahead and the lowest and highest difference."""
    if not paired:
        return ""
    lines = [
        "",
        "Ours − released, fold by fold (folds where ours is ahead; lowest to highest difference):",
        "",
        "| model | NDCG_y@10 | NDCG_r@10 | NDCG_y@10 (t = max) |",
        "|---|---|---|---|",
    ]
    for label, found in paired.items():
        cells = [
            f"{d['ahead']}/{d['n']}; {d['low']:+.2f} to {d['high']:+.2f}"
            for d in (found[key] for key in METRICS)
        ]
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def seed_by_seed(by_seed: dict) -> str:
    """Markdown: for every model and seed both sides ran (when there are two or more),
    each side's mean over the folds that seed ran on, and ours − released on them
    (mean ± standard error of the per-fold differences; folds where ours is ahead).
    ``by_seed[label][side][(fold, seed)]`` holds the runs."""
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
    if not lines:
        return ""
    header = [
        "",
        "Seed by seed, over the folds both sides ran it on (ours / released; Δ ± standard "
        "error of the per-fold differences, folds where ours is ahead):",
        "",
        "| model | seed | folds | NDCG_y@10 | NDCG_r@10 | NDCG_y@10 (t = max) |",
        "|---|---|---|---|---|---|",
    ]
    return "\n".join(header + lines) + "\n"


def between_models(fold_means: dict, results: dict) -> str:
    """Markdown: on each side, every pair of models paired by fold (mean ± standard
    error of the per-fold differences, and on how many folds the first is ahead), and
    each side's seed spread (each fold's standard deviation between seeds, pooled)."""
    lines = [
        "",
        "Between models, paired by fold (mean ± standard error of the per-fold "
        "differences; folds where the first is ahead):",
        "",
        "| side | pair | NDCG_y@10 | NDCG_r@10 | NDCG_y@10 (t = max) |",
        "|---|---|---|---|---|",
    ]
    pairs = []
    labels = list(fold_means)
    for side in ("ours", RELEASED):
        for i, first in enumerate(labels):
            for second in labels[i + 1 :]:
                a, b = fold_means[first].get(side), fold_means[second].get(side)
                if not a or not b:
                    continue
                found = pair_differences(a, b, METRICS)
                cells = [format_difference(found[key]) for key in METRICS]
                pairs.append(f"| {side} | {first} − {second} | " + " | ".join(cells) + " |")
    lines = lines + pairs if pairs else []
    spreads = []
    for side in ("ours", RELEASED):
        for label, sides in results.items():
            runs = sides.get(side)
            if runs and all(len(r) > 1 for r in runs.values()):
                cells = []
                for key in METRICS:
                    pooled = statistics.fmean(
                        statistics.variance([run[key] for run in r]) for r in runs.values()
                    )
                    cells.append(f"{math.sqrt(pooled):.2f}")
                spreads.append(f"| {side} | {label} | " + " | ".join(cells) + " |")
    if spreads:
        lines += [
            "",
            "Seed spread on the same lists: each fold's standard deviation between "
            "seeds, pooled over folds:",
            "",
            "| side | model | NDCG_y@10 | NDCG_r@10 | NDCG_y@10 (t = max) |",
            "|---|---|---|---|---|",
            *spreads,
        ]
    return "\n".join(lines) + "\n" if lines else ""
