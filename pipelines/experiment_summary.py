"""The results table of a ``tfr-experiment``: mean ± standard error per model."""

from __future__ import annotations

import math
import os

__all__ = ["REPORTED", "TEXT_REPORTED", "summarize", "format_table"]

# The columns of the table: the paper's two NDCGs on feature-vector data; on
# text data, whose lists carry one kind of label (relevance judgements), NDCG
# at three cut-offs, as the Listformer thesis and BM25 baselines report it.
REPORTED = ("ndcg_y@10", "ndcg_r@10")
TEXT_REPORTED = ("ndcg_y@1", "ndcg_y@5", "ndcg_y@10")
_TEXT_HEADERS = {"ndcg_y@1": "NDCG@1", "ndcg_y@5": "NDCG@5", "ndcg_y@10": "NDCG@10"}


def _mean_se(values: list[float]) -> tuple[float, float]:
    values = [v for v in values if v is not None and not math.isnan(v)]
    if not values:
        return math.nan, math.nan
    mean = sum(values) / len(values)
    if len(values) < 2:
        return mean, math.nan
    variance = sum((v - mean) ** 2 for v in values) / (len(values) - 1)
    return mean, math.sqrt(variance / len(values))


def summarize(
    runs: list[dict], labels: list[str], split: str = "test", keys: tuple = REPORTED
) -> dict:
    """Per model and metric (``keys``): mean and standard error over its runs (folds x seeds)."""
    summary = {}
    for label in labels:
        mine = [r["metrics"][split] for r in runs if r["model"] == label]
        summary[label] = {"runs": len(mine)}
        for key in keys:
            mean, se = _mean_se([m.get(key) for m in mine])
            summary[label][key] = {"mean": mean, "se": se}
    return summary


def format_table(results: dict) -> str:
    """``results.md``: the paper's Table 2 layout for one dataset."""
    summary = results["summary"]
    keys = tuple(results.get("reported", REPORTED))
    # Bold: a mean with fewer than two others above it (ties share a place).
    best = {}
    for key in keys:
        means = [v[key]["mean"] for v in summary.values() if not math.isnan(v[key]["mean"])]
        best[key] = {m for m in means if sum(other > m for other in means) < 2}
    text = results.get("kind") == "text"
    if text:
        kind = "text, relevance judgements"
    elif results.get("label_kind") == "simulated_implicit":
        kind = "simulated clicks"
    else:
        kind = "original labels"
    name = os.path.basename(os.path.normpath(results["dataset"])) or results["dataset"]
    runs = len(results["folds"]) * results["seeds"]
    headers = [_TEXT_HEADERS[k] if text else "NDCG" + k[len("ndcg") :] for k in keys]
    lines = [
        f"# {name} ({kind})",
        "",
        f"Test NDCG x 100, mean ± standard error over {runs} run(s) "
        f"({len(results['folds'])} fold(s) x {results['seeds']} seed(s)); the best two per "
        "column in bold. NDCG leaves out lists whose labels are all equal (RankFormer paper).",
    ]
    if text:
        lines.append("BM25 is deterministic: it runs once per fold.")
    lines += [
        "",
        "| model | " + " | ".join(f"{name} {h}" for h in headers) + " |",
        "|---" * (len(keys) + 1) + "|",
    ]
    for label, values in summary.items():
        cells = []
        for key in keys:
            mean, se = values[key]["mean"], values[key]["se"]
            cell = "-" if math.isnan(mean) else f"{mean:.2f}"
            if not math.isnan(se):
                cell += f" ± {se:.2f}"
            cells.append(f"**{cell}**" if mean in best[key] else cell)
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"
