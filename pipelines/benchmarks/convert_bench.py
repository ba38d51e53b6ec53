"""Converter throughput against a naive parse, on a WEB30K-shaped file.

Generates a synthetic MSLR-WEB30K-shaped dataset (136 features, lists of about
120 items) with at least ``--items`` items in its train file, then in one run
times:

(a) a plain Python loop that only splits lines and converts tokens to floats;
(b) ``tfr-convert --input MSLR-WEB30K --simulate-clicks`` end to end (parse,
    validate, simulate clicks, fit normalisation, write ELWC), in a child
    process so that its peak resident memory is its own.

It prints items/s of both, their ratio and the converter's peak RSS. Goal: the
ratio is at least 2 and peak RSS under 1 GB.

Run: ``make bench-convert`` or ``python -m pipelines.benchmarks.convert_bench``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

from tfrecords_tools.parse_workers import default_workers
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


def run_converter(data_dir: str, output: str, seed: int, workers: int) -> dict:
    flags = ["--input", "MSLR-WEB30K", "--data-dir", data_dir, "--output", output]
    flags += ["--simulate-clicks", "--seed", str(seed), "--workers", str(workers)]
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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--items", type=int, default=200_000, help="train items to generate")
    parser.add_argument("--workdir", help="where to put the data (default: a temporary dir)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--workers",
        type=int,
        default=default_workers(),
        help="converter parsing processes (default: one per core, at most 4)",
    )
    args = parser.parse_args(argv)

    with tempfile.TemporaryDirectory() as scratch:
        workdir = args.workdir or scratch
        dataset = os.path.join(workdir, "MSLR-WEB30K")
        print(f"generating a WEB30K-shaped dataset with ~{args.items:,} train items ...")
        paths = generate_letor(dataset, SyntheticConfig.web30k_shaped(args.items, seed=args.seed))
        items = {}
        for split, path in paths.items():
            with open(path, "rb") as f:
                items[split] = sum(1 for _ in f)
        size_mb = os.path.getsize(paths["train"]) / 1e6
        naive_items, naive_seconds = naive_parse(paths["train"])
        converter = run_converter(workdir, os.path.join(workdir, "elwc"), args.seed, args.workers)
        total_items = sum(items.values())

    main_rss = converter["peak_rss_bytes"] / 2**20
    worker_rss = converter["worker_peak_rss_bytes"] / 2**20
    # Workers are forked and share pages with the main process, so the sum overstates.
    total_rss = main_rss + (args.workers if args.workers > 1 else 0) * worker_rss
    naive_rate = naive_items / naive_seconds
    converter_rate = total_items / converter["seconds"]
    rows = [
        ("train file", f"{items['train']:,} items, {size_mb:,.0f} MB"),
        ("(a) naive split + float()", f"{naive_rate:,.0f} items/s ({naive_seconds:.2f} s)"),
        (
            "(b) tfr-convert --simulate-clicks",
            f"{converter_rate:,.0f} items/s ({converter['seconds']:.2f} s for "
            f"{total_items:,} items; {converter['process_seconds']:.2f} s with start-up)",
        ),
        ("ratio (b) / (a)", f"{converter_rate / naive_rate:.2f}x (goal >= 2)"),
        (
            "converter peak RSS",
            f"{main_rss:,.0f} MiB main process, {worker_rss:,.0f} MiB largest of "
            f"{args.workers} worker(s); at most {total_rss:,.0f} MiB together (goal < 1024)",
        ),
    ]
    width = max(len(name) for name, _ in rows)
    for name, value in rows:
        print(f"{name:<{width}}  {value}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
