"""The local converter beside the Beam pipeline on the DirectRunner, on one file.

Generates the WEB30K-shaped dataset of ``convert_bench`` (136 features, lists
of about 120 items) with at least ``--items`` train items, then converts it
with ``--simulate-clicks`` in one run, alternating ``--repeat`` times:

(a) ``tfr-convert`` (the local converter);
(b) ``tfr-convert --runner DirectRunner`` (the same conversion as an Apache
    Beam pipeline, run on this machine), with any ``--beam-arg`` options.

Both run in child processes, timed end to end including start-up. It prints
the median items/s of both, their ratio and each one's peak memory. This
shows what the Beam pipeline costs on one machine, where the local converter
is the fast choice; Beam pays off only on a cluster.

Run: ``python -m pipelines.benchmarks.beam_bench --items 20000``.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile

from pipelines.benchmarks.convert_bench import run_converter
from tfrecords_tools.parse_workers import default_workers
from tfrecords_tools.synthetic import SyntheticConfig, generate_letor


def _count_items(paths: dict) -> int:
    total = 0
    for path in paths.values():
        with open(path, "rb") as f:
            total += sum(1 for _ in f)
    return total


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--items", type=int, default=20_000, help="train items to generate")
    parser.add_argument("--workdir", help="where to put the data (default: a temporary dir)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--workers",
        type=int,
        default=default_workers(),
        help="the local converter's parsing processes (default: one per core, at most 4)",
    )
    parser.add_argument("--repeat", type=int, default=2, help="rounds to alternate (default: 2)")
    parser.add_argument(
        "--beam-arg",
        action="append",
        default=[],
        help="a Beam pipeline option for (b), e.g. --beam-arg=--direct_num_workers=2 (repeatable)",
    )
    args = parser.parse_args(argv)

    with tempfile.TemporaryDirectory() as scratch:
        workdir = args.workdir or scratch
        dataset = os.path.join(workdir, "MSLR-WEB30K")
        print(f"generating a WEB30K-shaped dataset with ~{args.items:,} train items ...")
        paths = generate_letor(dataset, SyntheticConfig.web30k_shaped(args.items, seed=args.seed))
        total_items = _count_items(paths)
        size_mb = os.path.getsize(paths["train"]) / 1e6
        local, beam = [], []
        beam_flags = ["--runner", "DirectRunner", *args.beam_arg]
        for _ in range(args.repeat):
            output = os.path.join(workdir, "elwc")
            local.append(run_converter(workdir, output, args.seed, args.workers))
            beam.append(
                run_converter(workdir, output + "-beam", args.seed, 1, extra_flags=beam_flags)
            )

    local_rates = [total_items / r["seconds"] for r in local]
    beam_rates = [total_items / r["seconds"] for r in beam]
    ratios = sorted(b / a for a, b in zip(local_rates, beam_rates))
    rows = [
        ("input", f"{total_items:,} items, train file {size_mb:,.0f} MB ({args.repeat} rounds)"),
        (
            "(a) tfr-convert --simulate-clicks",
            f"{statistics.median(local_rates):,.0f} items/s median "
            f"(min {min(local_rates):,.0f}, max {max(local_rates):,.0f}; "
            f"{args.workers} worker(s)); peak RSS "
            f"{max(r['peak_rss_bytes'] for r in local) / 2**20:,.0f} MiB",
        ),
        (
            "(b) ... --runner DirectRunner",
            f"{statistics.median(beam_rates):,.0f} items/s median "
            f"(min {min(beam_rates):,.0f}, max {max(beam_rates):,.0f}); peak RSS "
            f"{max(r['peak_rss_bytes'] for r in beam) / 2**20:,.0f} MiB",
        ),
        (
            "ratio (b) / (a)",
            f"{statistics.median(ratios):.3f}x median of rounds "
            f"(the local converter is {1 / statistics.median(ratios):,.0f}x faster)",
        ),
    ]
    width = max(len(name) for name, _ in rows)
    for name, value in rows:
        print(f"{name:<{width}}  {value}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
