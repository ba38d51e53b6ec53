"""The measured tables of README.md and docs/results.md, printed from docs/records/.

Each sits between ``<!-- results:NAME -->`` and ``<!-- /results:NAME -->``, printed by its
benchmark's own table functions, so that a page cannot show a figure no record holds.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import re
import sys
from collections import Counter
from functools import partial

from pipelines.benchmarks import speed_records
from pipelines.benchmarks.bench_support import REPO, parser, plus_minus, read_lines, read_records
from pipelines.benchmarks.reference.parity_tables import PARTS
from tfr_rankformer.core.atomic_files import atomic_write

RECORDS = "docs/records"
PARITY = "python -m pipelines.benchmarks.reference.reference_parity"
WEB30K = "python -m pipelines.benchmarks.web30k_scale"
CRANFIELD = "python -m pipelines.benchmarks.cranfield_rerank"
WEB30K_CLICKS = "web30k_clicks_3epochs"
WEB30K_BATCHES = "web30k_clicks"
CRANFIELD_DIR = "cranfield_rerank"
CRANFIELD_BF16 = "cranfield_rerank_bf16"  # the trained Listformer scored in float32 and bf16
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

    args = rp.parse_args(parity.argv(os.path.join(root, RECORDS, parity.record)))
    results, by_seed, left_out = rp.recorded_runs(rp.RunRecord(args.record, args, ""))
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


def cranfield_table(root: str, directory: str = CRANFIELD_DIR, trainings: bool = True) -> str:
    """``cranfield_rerank``'s report of a record: its folds, and its trainings if asked."""
    from pipelines.benchmarks.cranfield_rerank import report

    run, records = run_record(root, directory, "cranfield_rerank.jsonl")
    first, _, tables = report(run, records, trainings=trainings).partition("\n")
    reprint = f"{CRANFIELD} --output {RECORDS}/{directory} --reprint"
    return f"Measured by {first}; `{reprint}` reprints it:\n\n{tables}"


def speed_table(root: str, name: str) -> str:
    record = f"{RECORDS}/{name}"
    table = speed_records.record_table(read_lines(os.path.join(root, record)))
    return f"`python -m pipelines.benchmarks.speed_records {record}` reprints it:\n\n{table}"


# === The README's blocks ===


def web30k_path(root: str) -> str:
    """The README's path's stages at WEB30K's size, from both click records (3 epochs first)."""
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


def headline_mq2008_30(root: str) -> list[str]:
    """Each model's NDCG_y@10 on both sides and their Δ paired by fold."""
    from pipelines.benchmarks.reference.parity_tables import RELEASED, summarize

    args, results, _ = parity_runs(root, PARITY_30)
    fold_means, rows, paired = summarize(results, args.labels)
    cells = []
    for label, sides in rows.items():
        ours, theirs = sides["ours"]["ndcg_y@10"], sides[RELEASED]["ndcg_y@10"]
        found = paired[label]["ndcg_y@10"]
        delta = plus_minus(found["mean"], found["se"], "+.2f")
        cells.append(f"{label} {plus_minus(*ours)} against {plus_minus(*theirs)} (Δ {delta})")
    folds = len(next(iter(fold_means.values()))["ours"])
    what = (
        f"MQ2008, {args.epochs} epochs, beside the authors' released code on the same "
        f"simulated lists ({folds} folds, seed {args.seed})"
    )
    figure = "test NDCG_y@10, ours against theirs (Δ paired by fold): " + "; ".join(cells)
    return [what, figure, f"`{PARITY_30.command}` ({MQ2008_LINK})"]


def headline_mq2008_200(root: str) -> list[str]:
    """Ours − theirs and the RankFormer's gain on each side, over every seed, ± seed noise."""
    from pipelines.benchmarks.reference.parity_tables import RELEASED, by_fold, noise_difference

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
    from pipelines.benchmarks.cranfield_rerank import LABELS, column_values
    from pipelines.experiment_summary import mean_se

    run, records = run_record(root, CRANFIELD_DIR, "cranfield_rerank.jsonl")
    cells = [
        f"{LABELS.get(column, column)} {plus_minus(*mean_se(values))} ({len(values)})"
        for column, values in column_values(records).items()
    ]
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


README = "README.md"
RESULTS = "docs/results.md"
_BLOCK = re.compile(
    r"(?P<open><!-- results:(?P<name>[\w.-]+) -->\n)(?P<body>.*?)"
    r"(?P<close><!-- /results:(?P=name) -->)",
    re.S,
)


# === The blocks and their pages ===

BLOCKS = {  # name -> (page, its table of the records under a root)
    "headline": (README, headline),
    "web30k_path": (README, web30k_path),
    "cranfield": (RESULTS, cranfield_table),
    "web30k-clicks": (RESULTS, partial(web30k_table, directory=WEB30K_CLICKS)),
    "web30k-clicks-batch-sizes": (RESULTS, partial(web30k_table, directory=WEB30K_BATCHES)),
    "train-step": (RESULTS, partial(speed_table, name=speed_records.STEP_RECORD)),
    "serving-latency": (RESULTS, partial(speed_table, name=speed_records.SERVING_RECORD)),
    "input-pipeline": (RESULTS, partial(speed_table, name=speed_records.INPUT_RECORD)),
    "text-serving-latency": (RESULTS, partial(speed_table, name=speed_records.TEXT_SERVING_RECORD)),
    "mq2008-30": (RESULTS, partial(parity_table, parity=PARITY_30)),
    "mq2008-200": (RESULTS, partial(parity_table, parity=PARITY_200)),
    "mq2008-200-seeds-0-1": (RESULTS, partial(parity_table, parity=PARITY_200_SEEDS)),
    "mq2008-200-keras-epsilon": (RESULTS, partial(parity_table, parity=PARITY_200_KERAS)),
    "cranfield-bf16": (
        RESULTS,
        partial(cranfield_table, directory=CRANFIELD_BF16, trainings=False),
    ),
}


def render(name: str, root: str = REPO) -> str:
    """Block ``name`` as the records under ``root`` print it."""
    return BLOCKS[name][1](root)


def replace_blocks(text: str, rendered: dict[str, str]) -> tuple[str, list[str]]:
    """``text`` with the blocks ``rendered`` holds rewritten; the names of those changed."""
    changed = []

    def body(match: re.Match) -> str:
        if match["name"] not in rendered:
            return match[0]
        new = "\n" + rendered[match["name"]].strip("\n") + "\n\n"
        if new != match["body"]:
            changed.append(match["name"])
        return match["open"] + new + match["close"]

    return _BLOCK.sub(body, text), changed


def stale_blocks(root: str = REPO, rendered: dict | None = None, *, write=False) -> list[str]:
    """``PAGE: NAME`` of every stale, missing or unknown block; ``write`` rewrites them."""
    rendered = {name: render(name, root) for name in BLOCKS} if rendered is None else rendered
    found = []
    for page in (README, RESULTS):
        path = os.path.join(root, page)
        with open(path, encoding="utf-8") as f:
            text = f.read()
        names = [name for name, (where, _) in BLOCKS.items() if where == page]
        present = {match["name"] for match in _BLOCK.finditer(text)}
        found += [f"{page}: {name} (missing)" for name in names if name not in present]
        found += [f"{page}: {name} (no such block)" for name in sorted(present - set(names))]
        new, changed = replace_blocks(text, {n: rendered[n] for n in names if n in present})
        found += [f"{page}: {name}" for name in changed]
        if write and changed:
            with atomic_write(path) as f:
                f.write(new)
    return found


def main(argv: list[str] | None = None) -> int:
    p = parser(__doc__, prog="results_tables")
    what = p.add_mutually_exclusive_group()
    what.add_argument("--write", action="store_true", help="rewrite the pages' blocks too")
    what.add_argument("--check", action="store_true", help="only name each stale block; exit 1")
    p.add_argument("--root", default=REPO, help="the repository holding the pages and records")
    args = p.parse_args(argv)
    try:
        rendered = {name: render(name, args.root) for name in BLOCKS}
        if not args.check:
            for name, text in rendered.items():
                print(f"<!-- results:{name} ({BLOCKS[name][0]}) -->\n\n{text}")
        if not (args.write or args.check):
            return 0
        stale = stale_blocks(args.root, rendered, write=args.write)
    except (ValueError, KeyError, OSError, json.JSONDecodeError) as error:
        print(f"results_tables: error: {error!r}", file=sys.stderr)
        return 1
    broken = [line for line in stale if line.endswith(")")]
    if args.write:
        rewritten = [line for line in stale if line not in broken]
        print("rewrote: " + (", ".join(rewritten) or "nothing (every block was current)"))
        stale = broken
    for line in stale:
        fix = "" if line in broken else "; `make docs-results` rewrites it"
        print(f"results_tables: stale block {line}{fix}", file=sys.stderr)
    return 1 if stale else 0


if __name__ == "__main__":
    sys.exit(main())
