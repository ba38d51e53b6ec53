"""Converter throughput against a naive parse, on a WEB30K-shaped file.

Generates a synthetic MSLR-WEB30K-shaped dataset (136 features, lists of about
120 items) with at least ``--items`` items in its train file, then in one run
times:

(a) a plain Python loop that only splits lines and converts tokens to floats;
(b) ``tfr-convert --input MSLR-WEB30K --simulate-clicks`` end to end (parse,
    validate, simulate clicks, fit normalisation, write ELWC), in a child
    process so that its peak resident memory is its own.

The two alternate ``--repeat`` times (machines are noisy); it prints the
median items/s of both with their range, the median of the per-round ratios
and the converter's peak RSS. Goal: the ratio is at least 2 and peak RSS under
1 GB.

Run: ``make bench-convert`` or ``python -m pipelines.benchmarks.convert_bench``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

from pipelines.flag_table import add_flag
from tfrecords_tools.letor.parse_workers import default_workers
from tfrecords_tools.synthetic import SyntheticConfig, generate_letor

_CHILD = """
import json, resource, sys, time
from pipelines.convert_cli import main
started = time.perf_counter()
code = main(sys.argv[1:])
seconds = time.perf_counter() - started
rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
worker_rss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024
print("BENCH " + json.dumps({"code": code, "seconds": seconds, "peak_rss_bytes": rss,
                             "worker_peak_rss_bytes": worker_rss}))
"""


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


def run_converter(
    data_dir: str, output: str, seed: int, workers: int, extra_flags: list[str] = ()
) -> dict:
    flags = ["--input", "MSLR-WEB30K", "--data-dir", data_dir, "--output", output]
    flags += ["--simulate-clicks", "--seed", str(seed), "--workers", str(workers), *extra_flags]
    flags += ["--overwrite", "--no-progress", "--log-level", "WARNING"]
    command = [sys.executable, "-c", _CHILD, *flags]
    started = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - started
    lines = [ln for ln in done.stdout.splitlines() if ln.startswith("BENCH ")]
    if done.returncode != 0 or not lines:
        raise RuntimeError(f"converter failed:\n{done.stdout}\n{done.stderr}")
    result = json.loads(lines[-1][6:])
    result["process_seconds"] = wall
    return result


def _measure(paths: dict, workdir: str, args) -> tuple[list, list]:
    """Alternates (a) and (b) ``args.repeat`` times; returns both lists of results."""
    naive, converter = [], []
    for _ in range(args.repeat):
        naive.append(naive_parse(paths["train"]))
        converter.append(
            run_converter(workdir, os.path.join(workdir, "elwc"), args.seed, args.workers)
        )
    return naive, converter


def generate_dataset(workdir: str, items: int, seed: int) -> tuple[dict, dict, float]:
    """The WEB30K-shaped dataset in ``workdir``: ``(paths, items per split, train MB)``."""
    dataset = os.path.join(workdir, "MSLR-WEB30K")
    print(f"generating a WEB30K-shaped dataset with ~{items:,} train items ...")
    paths = generate_letor(dataset, SyntheticConfig.web30k_shaped(items, seed=seed))
    counts = {}
    for split, path in paths.items():
        with open(path, "rb") as f:
            counts[split] = sum(1 for _ in f)
    return paths, counts, os.path.getsize(paths["train"]) / 1e6


def rate_range(rates: list[float]) -> str:
    """``"M items/s median (min A, max B"``: the caller closes the parenthesis."""
    return (
        f"{statistics.median(rates):,.0f} items/s median "
        f"(min {min(rates):,.0f}, max {max(rates):,.0f}"
    )


def print_rows(rows: list[tuple[str, str]]) -> None:
    width = max(len(name) for name, _ in rows)
    for name, value in rows:
        print(f"{name:<{width}}  {value}")


def dataset_parser(description: str, *, items: int) -> argparse.ArgumentParser:
    """A parser with the options of the generated dataset and the local converter."""
    parser = argparse.ArgumentParser(description=description)
    add_flag(parser, "items", default=items, help="train items to generate")
    parser.add_argument("--workdir", help="where to put the data (default: a temporary dir)")
    add_flag(parser, "seed", default=0, help="the data's and conversion's seed")
    add_flag(
        parser,
        "workers",
        default=default_workers(),
        help="the local converter's parsing processes (default: one per core, at most 4)",
    )
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = dataset_parser(__doc__.split("\n\n")[0], items=200_000)
    add_flag(
        parser,
        "repeat",
        default=3,
        help="alternate (a) and (b) this many times and report medians (default: 3)",
    )
    args = parser.parse_args(argv)

    with tempfile.TemporaryDirectory() as scratch:
        workdir = args.workdir or scratch
        paths, items, size_mb = generate_dataset(workdir, args.items, args.seed)
        naive, converter = _measure(paths, workdir, args)
        total_items = sum(items.values())

    naive_rates = [n / s for n, s in naive]
    converter_rates = [total_items / c["seconds"] for c in converter]
    ratios = sorted(c / n for c, n in zip(converter_rates, naive_rates))
    main_rss = max(c["peak_rss_bytes"] for c in converter) / 2**20
    worker_rss = max(c["worker_peak_rss_bytes"] for c in converter) / 2**20
    # Workers are forked and share pages with the main process, so the sum overstates.
    total_rss = main_rss + (args.workers if args.workers > 1 else 0) * worker_rss
    seconds = statistics.median(c["seconds"] for c in converter)
    rows = [
        ("train file", f"{items['train']:,} items, {size_mb:,.0f} MB ({args.repeat} rounds)"),
        (
            "(a) naive split + float()",
            rate_range(naive_rates) + ")",
        ),
        (
            "(b) tfr-convert --simulate-clicks",
            rate_range(converter_rates) + f"; {seconds:.2f} s for {total_items:,} items)",
        ),
        (
            "ratio (b) / (a)",
            f"{statistics.median(ratios):.2f}x median of rounds "
            f"(min {ratios[0]:.2f}, max {ratios[-1]:.2f}; goal >= 2)",
        ),
        (
            "converter peak RSS",
            f"{main_rss:,.0f} MiB main process, {worker_rss:,.0f} MiB largest of "
            f"{args.workers} worker(s); at most {total_rss:,.0f} MiB together (goal < 1024)",
        ),
    ]
    print_rows(rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
