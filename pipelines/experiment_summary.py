"""The results table of a ``tfr-experiment``: mean ± standard error per model, and
every pair of models compared run by run."""

from __future__ import annotations

import math
import os
import statistics

# The paper's two NDCGs on feature vectors; on text data (one kind of label) NDCG at
# three cut-offs, as the Listformer thesis and BM25 baselines report it.
REPORTED = ("ndcg_y@10", "ndcg_r@10")
TEXT_REPORTED = ("ndcg_y@1", "ndcg_y@5", "ndcg_y@10")
# The pairs add lists whose label is the highest level, where the list head should help.
PAIRED = (*REPORTED, "ndcg_y@10_tmax")


def mean_se(values: list[float]) -> tuple[float, float]:
    """Mean and standard error of the values that are not ``None`` or NaN (NaN for
    none; the standard error is NaN for one value).

    >>> mean_se([1.0, 3.0, None])
    (2.0, 1.0)
    """
    values = [v for v in values if v is not None and not math.isnan(v)]
    if len(values) < 2:
        return (statistics.fmean(values) if values else math.nan), math.nan
    return statistics.fmean(values), statistics.stdev(values) / math.sqrt(len(values))


def pair_differences(first: dict, second: dict, keys: tuple) -> dict:
    """Per metric, the differences ``first - second`` over the units both hold: mean, se,
    ``ahead`` of ``n`` (where ``first`` is ahead), ``low`` and ``high``."""
    units = [u for u in first if u in second]
    out = {}
    for key in keys:
        diffs = [
            first[u][key] - second[u][key]
            for u in units
            if first[u].get(key) is not None and second[u].get(key) is not None
        ]
        mean, se = mean_se(diffs)
        out[key] = {"mean": mean, "se": se, "ahead": sum(d > 0 for d in diffs), "n": len(diffs)}
        out[key]["low"], out[key]["high"] = (min(diffs), max(diffs)) if diffs else (None, None)
    return out


def _units(runs: list[dict], split: str, by_seed: bool, keys: tuple) -> dict:
    """``{(fold, seed): metrics}``, or by fold the mean of ``keys`` over its seeds."""
    if by_seed:
        return {(r["fold"], r["seed"]): r["metrics"][split] for r in runs}
    folds: dict = {}
    for r in runs:
        folds.setdefault(r["fold"], []).append(r["metrics"][split])
    return {
        fold: {key: mean_se([m.get(key) for m in found])[0] for key in keys}
        for fold, found in folds.items()
    }


def paired_runs(runs: list[dict], labels: list[str], keys: tuple, split: str = "test") -> list:
    """Every pair of models, the later in ``labels`` minus the earlier: paired by fold and
    seed when both ran the same ones, else (BM25 runs once per fold) by fold."""
    mine = {label: [r for r in runs if r["model"] == label] for label in labels}
    pairs = []
    for i, earlier in enumerate(labels):
        for later in labels[i + 1 :]:
            a, b = mine[later], mine[earlier]
            by_seed = {(r["fold"], r["seed"]) for r in a} == {(r["fold"], r["seed"]) for r in b}
            found = pair_differences(
                _units(a, split, by_seed, keys), _units(b, split, by_seed, keys), keys
            )
            by = "fold, seed" if by_seed else "fold"
            pairs.append({"pair": [later, earlier], "by": by, **found})
    return pairs


def format_difference(found: dict) -> str:
    """One of :func:`pair_differences`' metrics as ``+mean ± se (ahead/n)``."""
    if math.isnan(found["mean"]):
        return "-"
    spread = "" if math.isnan(found["se"]) else f" ± {found['se']:.2f}"
    return f"{found['mean']:+.2f}{spread} ({found['ahead']}/{found['n']})"


def format_pairs(pairs: list, keys: tuple, headers: list[str]) -> str:
    """Markdown: one row per pair, ``mean ± se (ahead/n)`` per metric."""
    lines = ["| pair | " + " | ".join(headers) + " | paired by |", "|---" * (len(keys) + 2) + "|"]
    for pair in pairs:
        cells = " | ".join(format_difference(pair[key]) for key in keys)
        lines.append(f"| {pair['pair'][0]} − {pair['pair'][1]} | {cells} | {pair['by']} |")
    return "\n".join(lines) + "\n"


def summarize(
    runs: list[dict], labels: list[str], split: str = "test", keys: tuple = REPORTED
) -> dict:
    """Per model and metric: mean and standard error over its runs (folds x seeds)."""
    summary = {}
    for label in labels:
        mine = [r["metrics"][split] for r in runs if r["model"] == label]
        summary[label] = {"runs": len(mine)}
        for key in keys:
            mean, se = mean_se([m.get(key) for m in mine])
            summary[label][key] = {"mean": mean, "se": se}
    return summary


def _header(key: str, text: bool) -> str:
    """``ndcg_y@10`` as ``NDCG_y@10``, on text data ``NDCG@10``."""
    if key == "ndcg_y@10_tmax":
        return "NDCG_y@10 (t = max)"
    return "NDCG" + key[len("ndcg_y" if text else "ndcg") :]


def format_table(results: dict) -> str:
    """``results.md``: the paper's Table 2 layout for one dataset."""
    summary = results["summary"]
    keys = tuple(results.get("reported", REPORTED))
    text = results.get("kind") == "text"
    if text:
        kind = "text, relevance judgements"
    elif results.get("label_kind") == "simulated_implicit":
        kind = "simulated clicks"
    else:
        kind = "original labels"
    name = os.path.basename(os.path.normpath(results["dataset"])) or results["dataset"]
    folds, seeds = len(results["folds"]), results["seeds"]
    lines = [
        f"# {name} ({kind})",
        "",
        f"Test NDCG x 100, mean ± standard error over {folds * seeds} run(s) "
        f"({folds} fold(s) x {seeds} seed(s)); the best two per "
        "column in bold. NDCG leaves out lists whose labels are all equal (RankFormer paper).",
    ]
    if text:
        lines.append("BM25 is deterministic: it runs once per fold.")
    headers = " | ".join(f"{name} {_header(k, text)}" for k in keys)
    lines += ["", f"| model | {headers} |", "|---" * (len(keys) + 1) + "|"]
    for label, values in summary.items():
        cells = []
        for key in keys:
            means = [v[key]["mean"] for v in summary.values() if not math.isnan(v[key]["mean"])]
            mean, se = values[key]["mean"], values[key]["se"]
            cell = "-" if math.isnan(mean) else f"{mean:.2f}"
            cell += "" if math.isnan(se) else f" ± {se:.2f}"
            # Bold: a mean with fewer than two others above it (ties share a place).
            best = mean in means and sum(other > mean for other in means) < 2
            cells.append(f"**{cell}**" if best else cell)
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    pairs = results.get("paired")
    if pairs:
        keys = tuple(results.get("paired_keys", keys))
        lines += [
            "",
            "Between models, run by run: mean ± standard error of the differences (the "
            "later model in --models minus the earlier) over the runs both made, and on how "
            "many of them the later is ahead. "
            "Pairing leaves out what a fold's split and a seed do to both models, so a "
            "difference can be clear here while the means above overlap.",
            "",
            format_pairs(pairs, keys, [_header(k, text) for k in keys]).rstrip("\n"),
        ]
    return "\n".join(lines) + "\n"
