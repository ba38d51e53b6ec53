"""The measured tables, each printed from its record in docs/records/ by the benchmark's
own table functions (``results_tables`` puts them in the pages)."""

from __future__ import annotations

import argparse
import dataclasses
import math
import os
from collections import Counter

from pipelines.benchmarks import speed_records
from pipelines.benchmarks.bench_support import read_lines, read_records
from pipelines.benchmarks.reference.parity_tables import PARTS

RECORDS = "docs/records"
PARITY = "python -m pipelines.benchmarks.reference.reference_parity"
WEB30K = "python -m pipelines.benchmarks.web30k_scale"
CRANFIELD = "python -m pipelines.benchmarks.cranfield_rerank"
WEB30K_CLICKS = "web30k_clicks_3epochs"
WEB30K_BATCHES = "web30k_clicks"
CRANFIELD_DIR = "cranfield_rerank"
PATH_MODEL = "rankformer"  # the model whose stages the README's path times
MQ2008_LINK = "[results.md](docs/results.md#quality-on-mq2008)"


@dataclasses.dataclass(frozen=True)
class Parity:
    """``reference_parity``'s tables ``parts`` reprinted from its ``--record`` file."""

    record: str
    epochs: int
    models: str = "rankformer,transformer,mlp"
    seeds: str = "1"
    parts: tuple[str, ...] = ("table",)

    def argv(self, record: str) -> list[str]:
        """``reference_parity``'s arguments that reprint the table from ``record``."""
        argv = ["--dataset", "MQ2008", "--folds", "1-5", "--epochs", str(self.epochs)]
        argv += ["--models", self.models] if self.models != Parity.models else []
        argv += ["--seeds", self.seeds] if self.seeds != Parity.seeds else []
        return argv + ["--recorded-only", "--record", record, "--output", "DIR"]

    @property
    def command(self) -> str:
        return " ".join([PARITY, *self.argv(f"{RECORDS}/{self.record}")])


PARITY_30 = Parity("reference_parity_mq2008_30.jsonl", 30, parts=("table", "folds", "models"))
PARITY_200 = Parity(
    "reference_parity_mq2008_200.jsonl", 200, "rankformer,transformer", "all", PARTS
)
PARITY_200_SEEDS = Parity("reference_parity_mq2008_200.jsonl", 200, seeds="2")
PARITY_200_KERAS = Parity(
    "reference_parity_mq2008_200_keras_epsilon.jsonl",
    200,
    models=",".join(f"{m}:adam_epsilon=keras" for m in ("rankformer", "transformer", "mlp")),
)


# === Reading the records ===


def parity_runs(root: str, parity: Parity) -> tuple[argparse.Namespace, dict, dict]:
    """``(args, results, by_seed)`` of ``reference_parity --recorded-only`` on the record."""
    from pipelines.benchmarks.reference import reference_parity as rp
    from pipelines.benchmarks.reference.parity_records import RunRecord, recorded_runs, seeds_of
    from pipelines.experiment_specs import parse_folds, parse_models

    argv = parity.argv(os.path.join(root, RECORDS, parity.record))
    args = rp.parse_args(argv)
    record = RunRecord(args.record, args, "")
    seeds = seeds_of(record, args)
    specs, folds = parse_models(args.models), parse_folds(args.folds)
    results, by_seed, left_out = recorded_runs(record, specs, folds, seeds, args.side)
    if left_out:
        side, label, fold, seed = left_out[0]
        raise ValueError(
            f"{parity.record} lacks {len(left_out)} run(s) its table needs, "
            f"e.g. {side} {label} Fold{fold} seed {seed}"
        )
    return args, results, by_seed


def cpu_names(runs) -> str:
    """The CPUs the runs name, each with its count of runs when there are several.

    >>> cpu_names([{"cpu": "A"}, {"cpu": "B"}, {"cpu": "A"}])
    'A (2 runs) and B (1 runs)'
    """
    counted = Counter(run.get("cpu", "unknown CPU") for run in runs)
    if len(counted) == 1:
        return next(iter(counted))
    return " and ".join(f"{cpu} ({n} runs)" for cpu, n in counted.most_common())


def run_record(root: str, directory: str, name: str) -> tuple[dict, list[dict]]:
    """The record ``docs/records/DIRECTORY/NAME``: its run line and the rest."""
    run, records = read_records(os.path.join(root, RECORDS, directory, name))
    if run is None:
        raise ValueError(f"no {RECORDS}/{directory}/{name}")
    return run, records


# === The tables of docs/results.md ===


def parity_table(root: str, parity: Parity) -> str:
    """``reference_parity``'s tables of the record, with the CPUs its runs name."""
    from pipelines.benchmarks.reference import parity_tables as tables

    args, results, by_seed = parity_runs(root, parity)
    runs = [run for sides in by_seed.values() for r in sides.values() for run in r.values()]
    text = tables.tables_of(results, by_seed, args, cpu_names(runs), parity.parts)
    return f"Reprinted by `{parity.command}`:\n\n{text}"


def web30k_table(root: str, directory: str) -> str:
    """``web30k_scale``'s report of the record, its CPU and command first, no date."""
    from pipelines.benchmarks.web30k_scale import report

    run, records = run_record(root, directory, "web30k_scale.jsonl")
    text = report(run, records)
    tables = text[text.index("| protocol |") :]
    reprint = f"`{WEB30K} --output {RECORDS}/{directory} --reprint`"
    return f"CPU: {run['cpu']}. Measured by `{run['command']}`; {reprint} reprints it:\n\n{tables}"


def cranfield_table(root: str) -> str:
    from pipelines.benchmarks.cranfield_rerank import report

    run, records = run_record(root, CRANFIELD_DIR, "cranfield_rerank.jsonl")
    first, _, tables = report(run, records).partition("\n")
    reprint = f"{CRANFIELD} --output {RECORDS}/{CRANFIELD_DIR} --reprint"
    return f"Measured by {first}; `{reprint}` reprints it:\n\n{tables}"


def speed_table(root: str, name: str) -> str:
    record = f"{RECORDS}/{name}"
    table = speed_records.record_table(read_lines(os.path.join(root, record)))
    return f"`python -m pipelines.benchmarks.speed_records {record}` reprints it:\n\n{table}"


# === The README's blocks ===


def web30k_path(root: str) -> str:
    """What each stage of the README's path costs at WEB30K's size, from the click records
    (the three-epoch one first: the conversion it reused is in the other)."""
    found: dict[str, tuple[str, dict, dict]] = {}
    for directory in (WEB30K_CLICKS, WEB30K_BATCHES):
        run, records = run_record(root, directory, "web30k_scale.jsonl")
        for r in records:
            usable = r["model"] in ("-", PATH_MODEL) and "wall_seconds" in r
            if r["stage"] in ("convert", "train", "eval", "export") and usable:
                found.setdefault(r["stage"], (directory, run, r))
    lines = ["| stage | wall s | peak RSS GiB | lists/s |", "|---|---:|---:|---:|"]
    for stage in (s for s in ("convert", "train", "eval", "export") if s in found):
        r = found[stage][2]
        what = f"`tfr-{stage}`"
        if stage == "convert":
            what += f", {r['lists']:,} lists with simulated clicks"
        if stage == "train":
            epochs, lists = r["training"]["epochs_completed"], r["training"]["lists_per_epoch"]
            what += f", {epochs} epoch{'s' * (epochs != 1)} of {lists:,} lists"
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


def _pm(mean: float, se: float, spec: str = ".2f") -> str:
    return format(mean, spec) + ("" if math.isnan(se) else f" ± {se:.2f}")


def headline_mq2008_30(root: str) -> list[str]:
    """Each model's NDCG_y@10 on both sides and their Δ paired by fold."""
    from pipelines.benchmarks.reference.parity_records import RELEASED
    from pipelines.benchmarks.reference.parity_tables import summarize

    args, results, _ = parity_runs(root, PARITY_30)
    fold_means, rows, paired = summarize(results, args.labels)
    cells = []
    for label, sides in rows.items():
        ours, theirs = sides["ours"]["ndcg_y@10"], sides[RELEASED]["ndcg_y@10"]
        found = paired[label]["ndcg_y@10"]
        delta = _pm(found["mean"], found["se"], "+.2f")
        cells.append(f"{label} {_pm(*ours)} against {_pm(*theirs)} (Δ {delta})")
    folds = len(next(iter(fold_means.values()))["ours"])
    what = (
        f"MQ2008, {args.epochs} epochs, beside the authors' released code on the same "
        f"simulated lists ({folds} folds, seed {args.seed})"
    )
    figure = "test NDCG_y@10, ours against theirs (Δ paired by fold): " + "; ".join(cells)
    return [what, figure, f"`{PARITY_30.command}` ({MQ2008_LINK})"]


def headline_mq2008_200(root: str) -> list[str]:
    """Over every recorded seed: ours − theirs and the RankFormer's gain over the
    transformer on each side, ± seed noise."""
    from pipelines.benchmarks.reference.parity_records import RELEASED
    from pipelines.benchmarks.reference.parity_tables import by_fold, noise_difference

    args, _, by_seed = parity_runs(root, PARITY_200)

    def gap(first: tuple[str, str], second: tuple[str, str]) -> str:
        values = [by_fold(by_seed[label][side], "ndcg_y@10") for label, side in (first, second)]
        found = noise_difference(*values)
        return f"{found['mean']:+.2f} ± {found['se']:.2f} (z {found['z']:+.1f})"

    gaps = [f"{label} ours − theirs {gap((label, 'ours'), (label, RELEASED))}" for label in by_seed]
    first, second = list(by_seed)[:2]
    gains = [
        f"{gap((first, side), (second, side))} on {name}"
        for side, name in (("ours", "ours"), (RELEASED, "theirs"))
    ]
    runs = by_seed[first]["ours"]
    what = (
        f"MQ2008, the paper's {args.epochs} epochs, every seed the record holds "
        f"({len(runs)} runs a side and model over {len({fold for fold, _ in runs})} folds)"
    )
    figure = (
        "test NDCG_y@10, standard errors from seed noise: "
        + "; ".join(gaps)
        + f"; {first} − {second} "
        + ", ".join(gains)
    )
    return [what, figure, f"`{PARITY_200.command}` ({MQ2008_LINK})"]


def headline_web30k(root: str) -> list[str]:
    """Our median epoch's lists/s against the released code's on the same lists and CPU."""
    run, records = run_record(root, WEB30K_CLICKS, "web30k_scale.jsonl")
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
    return [what, figure, f"`{WEB30K} --output {RECORDS}/{WEB30K_CLICKS} --reprint` ({link})"]


def headline_cranfield(root: str) -> list[str]:
    """Each column's mean ± standard error over the folds that have it."""
    from pipelines.benchmarks.cranfield_rerank import LABELS
    from pipelines.experiment_summary import mean_se

    run, records = run_record(root, CRANFIELD_DIR, "cranfield_rerank.jsonl")
    cells = []
    for column in dict.fromkeys(c for r in records for c in r["columns"]):
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
    return [what, figure, f"`{CRANFIELD} --output {RECORDS}/{CRANFIELD_DIR} --reprint` ({link})"]


def headline(root: str) -> str:
    """The README's headline table: one row per record, with the command that reprints it."""
    found = (headline_mq2008_30, headline_mq2008_200, headline_web30k, headline_cranfield)
    rows = [f(root) for f in found]
    lines = ["| what | figure | command that reprints it from its record |", "|---|---|---|"]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines) + "\n"
