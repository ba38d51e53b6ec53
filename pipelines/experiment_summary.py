"""The results table of a ``tfr-experiment``: mean ± standard error per model."""

from __future__ import annotations

import math
import os

__all__ = ["REPORTED", "summarize", "format_table"]

REPORTED = ("ndcg_y@10", "ndcg_r@10")


def _mean_se(values: list[float]) -> tuple[float, float]:
    values = [v for v in values if v is not None and not math.isnan(v)]
    if not values:
        return math.nan, math.nan
    mean = sum(values) / len(values)
    if len(values) < 2:
        return mean, math.nan
    variance = sum((v - mean) ** 2 for v in values) / (len(values) - 1)
    return mean, math.sqrt(variance / len(values))


def summarize(runs: list[dict], labels: list[str], split: str = "test") -> dict:
    """Per model and metric: mean and standard error over its runs (folds x seeds)."""
    summary = {}
    for label in labels:
        mine = [r["metrics"][split] for r in runs if r["model"] == label]
        summary[label] = {"runs": len(mine)}
        for key in REPORTED:
            mean, se = _mean_se([m.get(key) for m in mine])
            summary[label][key] = {"mean": mean, "se": se}
    return summary


def format_table(results: dict) -> str:
    """``results.md``: the paper's Table 2 layout for one dataset."""
    summary = results["summary"]
    best = {}
    for key in REPORTED:
        means = sorted(
            {v[key]["mean"] for v in summary.values() if not math.isnan(v[key]["mean"])},
            reverse=True,
        )
        best[key] = set(means[:2])
    kind = (
        "simulated clicks"
        if results.get("label_kind") == "simulated_implicit"
        else "original labels"
    )
    name = os.path.basename(os.path.normpath(results["dataset"])) or results["dataset"]
    runs = len(results["folds"]) * results["seeds"]
    lines = [
        f"# {name} ({kind})",
        "",
        f"Test NDCG x 100, mean ± standard error over {runs} run(s) "
        f"({len(results['folds'])} fold(s) x {results['seeds']} seed(s)); the best two per "
        "column in bold. NDCG leaves out lists whose labels are all equal (RankFormer paper).",
        "",
        f"| model | {name} NDCG_y@10 | {name} NDCG_r@10 |",
        "|---|---|---|",
    ]
    for label, values in summary.items():
        cells = []
        for key in REPORTED:
            mean, se = values[key]["mean"], values[key]["se"]
            text = "-" if math.isnan(mean) else f"{mean:.2f}"
            if not math.isnan(se):
                text += f" ± {se:.2f}"
            cells.append(f"**{text}**" if mean in best[key] else text)
        lines.append(f"| {label} | {cells[0]} | {cells[1]} |")
    return "\n".join(lines) + "\n"
