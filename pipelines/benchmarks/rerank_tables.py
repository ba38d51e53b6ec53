"""The tables of a re-ranking benchmark's records (``cranfield_rerank``): NDCG@10 per fold
and column with the mean ± standard error, and the trainings' time and memory."""

from __future__ import annotations

from collections.abc import Sequence

from pipelines.experiment_summary import mean_se

__all__ = ["LABELS", "header", "fold_line", "mean_line", "runs_table", "report"]

LABELS = {
    "bm25": "BM25",
    "cosine": "zero-shot cosine",
    "listformer@0": "Listformer epoch 0",
    "listformer": "Listformer",
    "listformer_no_fs@0": "without first stage, epoch 0",
    "listformer_no_fs": "without first stage",
}


def header(columns: Sequence[str]) -> str:
    names = " | ".join(f"{LABELS.get(c, c)} NDCG@10" for c in columns)
    return f"| fold | test lists (counted) | {names} |\n|---|---|" + "---|" * len(columns)


def _cell(record: dict, column: str) -> str:
    value = record["columns"].get(column)
    return "—" if value is None else f"{value['ndcg@10']:.2f}"


def fold_line(record: dict, columns: Sequence[str]) -> str:
    values = " | ".join(_cell(record, c) for c in columns)
    lists = f"{record['num_lists']} ({record['num_lists_counted']})"
    return f"| {record['fold']} | {lists} | {values} |"


def mean_line(records: list[dict], columns: Sequence[str]) -> str:
    """Each column's mean ± standard error over the folds that have it (how many, when
    not all)."""
    cells = []
    for c in columns:
        values = [r["columns"][c]["ndcg@10"] for r in records if c in r["columns"]]
        mean, se = mean_se(values)
        if len(values) == 1:  # no standard error from one fold
            cells.append(f"{mean:.2f} (1 fold)")
            continue
        some = "" if len(values) == len(records) else f" ({len(values)} folds)"
        cells.append(f"{mean:.2f} ± {se:.2f}{some}")
    counted = sum(r["num_lists_counted"] for r in records)
    lists = f"{sum(r['num_lists'] for r in records)} ({counted})"
    return f"| mean ± SE | {lists} | {' | '.join(cells)} |"


def runs_table(records: list[dict]) -> list[str]:
    """The trainings' figures: epochs, seconds per epoch, peak RSS against the estimate."""
    lines = [
        "| fold | variant | epochs | s/epoch (with validation) | peak RSS | estimate |",
        "|---|---|---|---|---|---|",
    ]
    for r in records:
        for variant, t in r.get("runs", {}).items():
            peak = t["peak_rss_bytes"]
            peak = "not measured" if peak is None else f"{peak / 2**30:.2f} GiB"
            estimate = t["estimated_peak_bytes"] / 2**30
            lines.append(
                f"| {r['fold']} | {variant} | {t['epochs']} | {t['seconds_per_epoch']:.0f} | "
                f"{peak} | {estimate:.2f} GiB |"
            )
    return lines if len(lines) > 2 else []


def report(run: dict, records: list[dict]) -> str:
    """The whole table of a run's records, with its command and time."""
    columns = list(dict.fromkeys(c for r in records for c in r["columns"]))
    lines = [f"`{run['command']}` ({run.get('cpu', '?')}; {run.get('seconds', '?')} s)"]
    lines.append(header(columns))
    lines += [fold_line(r, columns) for r in records]
    if records:
        lines.append(mean_line(records, columns))
    runs = runs_table(records)
    if runs:
        lines += ["", *runs]
    return "\n".join(lines) + "\n"
