"""Converter throughput on a WEB30K-shaped file, against a naive parse or the Beam pipeline.

Alternates (a) and (b), each timed end to end: ``--against naive``, a loop that only splits
lines and parses floats against ``tfr-convert --simulate-clicks`` (goal: 2x, under 1 GB);
``--against beam``, ``tfr-convert`` against the same conversion on Beam's DirectRunner.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time

from pipelines.benchmarks.bench_support import parser as bench_parser
from pipelines.benchmarks.bench_support import run_child
from tfrecords_tools.block_processing import default_workers
from tfrecords_tools.synthetic import SyntheticConfig, generate_letor

CHILD = """
import json, resource, sys, time
from pipelines.convert_cli import main
started = time.perf_counter()
if main(sys.argv[1:]):
    sys.exit(1)
seconds = time.perf_counter() - started
rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
worker_rss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024
print(json.dumps({"seconds": seconds, "peak_rss_bytes": rss, "worker_peak_rss_bytes": worker_rss}))
"""
DEFAULTS = {"naive": (200_000, 3), "beam": (20_000, 2)}  # --items, --repeat


def naive_parse(path: str) -> tuple[int, float]:
    """Splits every line and converts every feature token to float; returns (items, s)."""
    started = time.perf_counter()
    items = 0
    with open(path, "rb") as f:
        for line in f:
            tokens = line.split()
            float(tokens[0])
            int(tokens[1][4:])
            [float(t.split(b":")[1]) for t in tokens[2:]]
            items += 1
    return items, time.perf_counter() - started


def run_converter(data_dir: str, output: str, seed: int, workers: int, extra=()) -> dict:
    """``tfr-convert`` of the dataset in a child process: its seconds and peak RSS."""
    flags = ["--input", "MSLR-WEB30K", "--data-dir", data_dir, "--output", output]
    flags += ["--simulate-clicks", "--seed", str(seed), "--workers", str(workers), *extra]
    flags += ["--overwrite", "--no-progress", "--log-level", "WARNING"]
    result = run_child(CHILD, flags)
    if "error" in result:
        raise RuntimeError(f"converter failed:\n{result['error']}")
    return result


def rate_range(rates: list[float]) -> str:
    """``"M items/s median (min A, max B"``: the caller closes the parenthesis."""
    return (
        f"{statistics.median(rates):,.0f} items/s median "
        f"(min {min(rates):,.0f}, max {max(rates):,.0f}"
    )


def build_parser() -> argparse.ArgumentParser:
    parser = bench_parser(__doc__)
    add = parser.add_argument
    add("--against", choices=sorted(DEFAULTS), default="naive", help="what tfr-convert meets")
    add("--items", type=int, help="train items to generate (default: 200000; beam: 20000)")
    add("--workdir", help="where to put the data (default: a temporary directory)")
    add("--seed", type=int, default=0, help="the data's and conversion's seed")
    add("--workers", type=int, default=default_workers(), help="the converter's processes")
    add("--repeat", type=int, help="rounds alternating (a) and (b) (default: 3; beam: 2)")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    items, repeat = DEFAULTS[args.against]
    args.items, args.repeat = args.items or items, args.repeat or repeat
    beam = args.against == "beam"
    with tempfile.TemporaryDirectory() as scratch:
        workdir = args.workdir or scratch
        print(f"generating a WEB30K-shaped dataset with ~{args.items:,} train items ...")
        config = SyntheticConfig.web30k_shaped(args.items, seed=args.seed)
        paths = generate_letor(os.path.join(workdir, "MSLR-WEB30K"), config)
        counts = {}
        for split, path in paths.items():
            with open(path, "rb") as f:
                counts[split] = sum(1 for _ in f)
        size_mb, total = os.path.getsize(paths["train"]) / 1e6, sum(counts.values())
        a, b, output = [], [], os.path.join(workdir, "elwc")
        for _ in range(args.repeat):
            if beam:
                a.append(run_converter(workdir, output, args.seed, args.workers))
                flags = ["--runner", "DirectRunner"]
                b.append(run_converter(workdir, output + "-beam", args.seed, 1, flags))
            else:
                a.append(naive_parse(paths["train"]))
                b.append(run_converter(workdir, output, args.seed, args.workers))
    rates_b = [total / r["seconds"] for r in b]
    rates_a = [total / r["seconds"] for r in a] if beam else [n / s for n, s in a]
    ratios = sorted(y / x for x, y in zip(rates_a, rates_b))
    ratio, seconds = statistics.median(ratios), statistics.median(r["seconds"] for r in b)
    rss, worker_rss = (
        max(r[key] for r in b) / 2**20 for key in ("peak_rss_bytes", "worker_peak_rss_bytes")
    )
    if beam:
        labels = ["(a) tfr-convert --simulate-clicks", "(b) ... --runner DirectRunner"]
        goal = f"; the local converter is {1 / ratio:,.0f}x faster"
        rss_a = max(r["peak_rss_bytes"] for r in a) / 2**20
        memory = f"(a) {rss_a:,.0f} MiB, (b) {rss:,.0f} MiB"
    else:
        labels = ["(a) naive split + float()", "(b) tfr-convert --simulate-clicks"]
        goal = "; goal >= 2"
        # Workers are forked and share pages with the main process, so the sum overstates.
        together = rss + (args.workers if args.workers > 1 else 0) * worker_rss
        memory = (
            f"{rss:,.0f} MiB main process, {worker_rss:,.0f} MiB largest of {args.workers} "
            f"worker(s); at most {together:,.0f} MiB together (goal < 1024)"
        )
    rows = [
        ("train file", f"{counts['train']:,} items, {size_mb:,.0f} MB ({args.repeat} rounds)"),
        (labels[0], rate_range(rates_a) + ")"),
        (labels[1], rate_range(rates_b) + f"; {seconds:.2f} s for {total:,} items)"),
        (
            "ratio (b) / (a)",
            f"{ratio:.3f}x median of rounds (min {ratios[0]:.3f}, max {ratios[-1]:.3f}{goal})",
        ),
        ("converter peak RSS", memory),
    ]
    width = max(len(name) for name, _ in rows)
    for name, value in rows:
        print(f"{name:<{width}}  {value}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
