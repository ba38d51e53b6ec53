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

import os
import statistics
import sys
import tempfile

from pipelines.benchmarks.convert_bench import (
    dataset_parser,
    generate_dataset,
    print_rows,
    rate_range,
    run_converter,
)
from pipelines.flag_table import add_flag


def main(argv: list[str] | None = None) -> int:
    parser = dataset_parser(__doc__.split("\n\n")[0], items=20_000)
    add_flag(parser, "repeat", default=2, help="rounds to alternate (default: 2)")
    parser.add_argument(
        "--beam-arg",
        action="append",
        default=[],
        help="a Beam pipeline option for (b), e.g. --beam-arg=--direct_num_workers=2 (repeatable)",
    )
    args = parser.parse_args(argv)

    with tempfile.TemporaryDirectory() as scratch:
        workdir = args.workdir or scratch
        _, items, size_mb = generate_dataset(workdir, args.items, args.seed)
        total_items = sum(items.values())
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
            rate_range(local_rates) + f"; {args.workers} worker(s)); peak RSS "
            f"{max(r['peak_rss_bytes'] for r in local) / 2**20:,.0f} MiB",
        ),
        (
            "(b) ... --runner DirectRunner",
            rate_range(beam_rates) + "); peak RSS "
            f"{max(r['peak_rss_bytes'] for r in beam) / 2**20:,.0f} MiB",
        ),
        (
            "ratio (b) / (a)",
            f"{statistics.median(ratios):.3f}x median of rounds "
            f"(the local converter is {1 / statistics.median(ratios):,.0f}x faster)",
        ),
    ]
    print_rows(rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
