"""The README's blocks printed from docs/records/: the headline table and the path's costs.

:func:`headline` gives one row per record with the command that reprints it;
:func:`web30k_path` what each stage of the README's path costs at WEB30K's size.
"""

from __future__ import annotations

import math

from pipelines.benchmarks.results_sources import (
    CRANFIELD,
    CRANFIELD_DIR,
    PARITY_30,
    PARITY_200,
    RECORDS,
    WEB30K,
    WEB30K_BATCHES,
    WEB30K_CLICKS,
    cpu_names,
    parity_runs,
    read_lines,
)

# The model whose stages the README's path times (the records' other stages name "-").
PATH_MODEL = "rankformer"


def web30k_path(root: str) -> str:
    """What each stage of the README's path costs at WEB30K's size: each stage's wall
    time and peak memory from the click-protocol records, the three-epoch one first
    (a stage it reused, the conversion, comes from the other record of the same data)."""
    found: dict[str, tuple[str, dict, dict]] = {}
    for directory in (WEB30K_CLICKS, WEB30K_BATCHES):
        run, records = read_lines(root, directory, "web30k_scale.jsonl")
        for r in records:
            usable = r["model"] in ("-", PATH_MODEL) and "wall_seconds" in r
            if r["stage"] in ("convert", "train", "eval", "export") and usable:
                found.setdefault(r["stage"], (directory, run, r))
    lines = ["| stage | wall s | peak RSS GiB | lists/s |", "|---|---:|---:|---:|"]
    for stage in ("convert", "train", "eval", "export"):
        if stage not in found:
            continue
        _, _, r = found[stage]
        what = f"`tfr-{stage}`"
        if stage == "convert":
            what += f", {r['lists']:,} lists with simulated clicks"
        if stage == "train":
            training = r["training"]
            epochs = training["epochs_completed"]
            what += (
                f", {epochs} epoch{'s' * (epochs != 1)} of {training['lists_per_epoch']:,} lists"
            )
        rate = f"{r['lists_per_sec']:,.0f}" if r.get("lists_per_sec") else ""
        peak = r["peak_rss_bytes"] / 2**30
        lines.append(f"| {what} | {r['wall_seconds']:.1f} | {peak:.2f} | {rate} |")
    sources = sorted({f"`{RECORDS}/{d}`" for d, _, _ in found.values()})
    cpu = cpu_names(run for _, run, _ in found.values())
    caption = (
        "WEB30K-shaped generated lists with the click protocol (train lists of at most "
        f"16 items), the RankFormer with default flags, CPU: {cpu}. From "
        f"{' and '.join(sources)}, records of the same data; `{WEB30K} --output "
        f"{RECORDS}/DIRECTORY --reprint` reprints each."
    )
    return caption + "\n\n" + "\n".join(lines) + "\n"


# === The README's headline table ===


def _pm(mean: float, se: float) -> str:
    return f"{mean:.2f}" if math.isnan(se) else f"{mean:.2f} ± {se:.2f}"


def _signed(found: dict) -> str:
    text = f"{found['mean']:+.2f}"
    return text if math.isnan(found["se"]) else f"{text} ± {found['se']:.2f}"


def headline_mq2008_30(root: str) -> list[str]:
    """The 30-epoch parity row: each model's NDCG_y@10 on both sides and their paired Δ."""
    from pipelines.benchmarks.reference.parity_records import RELEASED
    from pipelines.benchmarks.reference.parity_tables import summarize

    args, results, _ = parity_runs(root, PARITY_30)
    fold_means, rows, paired = summarize(results, args.labels)
    cells = []
    for label, sides in rows.items():
        ours, theirs = sides["ours"]["ndcg_y@10"], sides[RELEASED]["ndcg_y@10"]
        delta = _signed(paired[label]["ndcg_y@10"])
        cells.append(f"{label} {_pm(*ours)} against {_pm(*theirs)} (Δ {delta})")
    folds = len(next(iter(fold_means.values()))["ours"])
    what = (
        f"MQ2008, {args.epochs} epochs, beside the authors' released code on the same "
        f"simulated lists ({folds} folds, seed {args.seed})"
    )
    figure = "test NDCG_y@10, ours against theirs (Δ paired by fold): " + "; ".join(cells)
    link = "[results.md](docs/results.md#quality-on-mq2008)"
    return [what, figure, f"`{PARITY_30.command}` ({link})"]


def headline_mq2008_200(root: str) -> list[str]:
    """The 200-epoch row over every recorded seed: ours − theirs and the RankFormer's
    gain over the transformer on each side, with seed-noise standard errors."""
    from pipelines.benchmarks.reference.parity_records import RELEASED
    from pipelines.benchmarks.reference.parity_tables import noise_difference

    args, _, by_seed = parity_runs(root, PARITY_200)

    def values(label: str, side: str) -> dict[int, list[float]]:
        found: dict[int, list[float]] = {}
        for (fold, _), run in sorted(by_seed[label][side].items()):
            found.setdefault(fold, []).append(run["ndcg_y@10"])
        return found

    def cell(found: dict) -> str:
        return f"{found['mean']:+.2f} ± {found['se']:.2f} (z {found['z']:+.1f})"

    gaps = [
        f"{label} ours − theirs "
        + cell(noise_difference(values(label, "ours"), values(label, RELEASED)))
        for label in by_seed
    ]
    first, second = list(by_seed)[:2]
    gains = [
        f"{cell(noise_difference(values(first, side), values(second, side)))} on {name}"
        for side, name in (("ours", "ours"), (RELEASED, "theirs"))
    ]
    runs = by_seed[first]["ours"]
    folds = len({fold for fold, _ in runs})
    what = (
        f"MQ2008, the paper's {args.epochs} epochs, every seed the record holds "
        f"({len(runs)} runs a side and model over {folds} folds)"
    )
    figure = (
        "test NDCG_y@10, standard errors from seed noise: "
        + "; ".join(gaps)
        + f"; {first} − {second} "
        + ", ".join(gains)
    )
    link = "[results.md](docs/results.md#quality-on-mq2008)"
    return [what, figure, f"`{PARITY_200.command}` ({link})"]


def headline_web30k(root: str) -> list[str]:
    """The click-protocol speed row: our median epoch's lists/s against the released
    code's on the same lists and CPU, and our first epoch's."""
    run, records = read_lines(root, WEB30K_CLICKS, "web30k_scale.jsonl")
    ours = next(r for r in records if (r["protocol"], r["stage"]) == ("clicks", "train"))
    theirs = next(r for r in records if r["stage"].startswith("released"))
    rate, first = ours["lists_per_sec"], ours["epoch_lists_per_sec"][0]
    training = ours["training"]
    what = (
        f"WEB30K-sized click lists ({training['lists_per_epoch']:,} train lists of at most 16 "
        f"items), the RankFormer with default flags beside the authors' released code on the "
        f"same lists, {training['epochs_completed']} epochs each"
    )
    figure = (
        f"training lists/s on the median epoch: ours {rate:,.0f}, theirs "
        f"{theirs['lists_per_sec']:,.0f} at {theirs['batch_size']:,} lists per batch: "
        f"{rate / theirs['lists_per_sec']:.2f}x; our first epoch {first:,.0f}: "
        f"{first / theirs['lists_per_sec']:.2f}x; peak RSS {ours['peak_rss_bytes'] / 2**30:.2f} "
        f"against {theirs['peak_rss_bytes'] / 2**30:.2f} GiB (CPU: {run['cpu']})"
    )
    link = "[results.md](docs/results.md#at-mslr-web30ks-size)"
    command = f"`{WEB30K} --output {RECORDS}/{WEB30K_CLICKS} --reprint` ({link})"
    return [what, figure, command]


def headline_cranfield(root: str) -> list[str]:
    """The Cranfield row: each column's mean ± standard error over the folds that have it."""
    from pipelines.benchmarks.rerank_tables import LABELS
    from pipelines.experiment_summary import mean_se

    run, records = read_lines(root, CRANFIELD_DIR, "cranfield_rerank.jsonl")
    columns = list(dict.fromkeys(c for r in records for c in r["columns"]))
    cells = []
    for column in columns:
        values = [r["columns"][column]["ndcg@10"] for r in records if column in r["columns"]]
        cells.append(f"{LABELS.get(column, column)} {_pm(*mean_se(values))} ({len(values)})")
    epochs = f"{run['epochs']} epochs" if run.get("epochs") else "tfr-train's default epochs"
    what = (
        f"Cranfield, BM25's top {run['top_k']} re-ranked, {run['folds']} query folds, the "
        f"Listformer started from all-MiniLM-L6-v2 with default flags but {epochs}"
    )
    figure = (
        "test NDCG@10, mean ± standard error over the folds the record holds (how many): "
        + ", ".join(cells)
    )
    link = "[results.md](docs/results.md#re-ranking-cranfield)"
    command = f"`{CRANFIELD} --output {RECORDS}/{CRANFIELD_DIR} --reprint` ({link})"
    return [what, figure, command]


def headline(root: str) -> str:
    """The README's headline table: one row per record, with the command that reprints it."""
    rows = [
        headline_mq2008_30(root),
        headline_mq2008_200(root),
        headline_web30k(root),
        headline_cranfield(root),
    ]
    lines = ["| what | figure | command that reprints it from its record |", "|---|---|---|"]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines) + "\n"
