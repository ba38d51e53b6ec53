"""The speed benchmarks' records (JSON lines) and the tables printed from them.

* ``train_bench --record FILE`` appends a line for each model and feature
  count it timed (:func:`step_line`): the CPU's model and vector extensions,
  the oneDNN instruction-set cap (``ONEDNN_MAX_CPU_ISA``, ``none`` when
  unset), each side's median round in lists/s, the step's matmul FLOPs per
  list and the float32 matmul peak measured in the same run (``--peak``).
  :func:`step_table` prints one row per line with our share of that peak and
  our other steps of the same rounds (``--precision``, ``--compare-plain``,
  ``--compare-xla``) as ratios to our first.
* ``serve_bench --record FILE`` appends one line per run (:func:`serving_line`):
  the CPU, the normalisation the saved model applies, TensorFlow's thread
  pools and every call's p50 and p99. :func:`serving_table` prints one row
  per line with the RankFormer's p50 as a ratio to LightGBM's of the same run.

So a speed ratio is always printed beside the CPU it was measured on;
``results_tables`` places both tables in docs/results.md. No TensorFlow here.

Reprint: ``python -m pipelines.benchmarks.speed_records docs/records/train_step.jsonl``
(or ``serve_latency.jsonl``).
"""

from __future__ import annotations

import os
import sys

from pipelines.benchmarks.run_records import read_lines

__all__ = [
    "SERVING_RECORD",
    "STEP_RECORD",
    "record_table",
    "serving_line",
    "serving_table",
    "step_line",
    "step_table",
]

STEP_RECORD = "train_step.jsonl"
SERVING_RECORD = "serve_latency.jsonl"


def step_line(
    model: str, d: int, medians: dict, args, *, cpu: str, per_list: float, peak: float | None
) -> dict:
    """The record of one model and feature count: the run's settings and medians.

    ``medians`` maps each side (``ours``, ``authors``, ...) to its median round
    in lists/s; ``per_list`` is a training step's matmul FLOPs per list
    (``train_bench``'s count); ``peak`` is the float32 matmul peak in GFLOP/s
    (``None`` without ``--peak``); ``args`` are ``train_bench``'s parsed options.
    """
    return {
        "kind": "train_step",
        "cpu": cpu,
        "onednn_max_cpu_isa": os.environ.get("ONEDNN_MAX_CPU_ISA", "none"),
        "model": model,
        "features": d,
        "batch_size": args.batch_size,
        "official_batch_size": args.official_batch_size or args.batch_size,
        "items": args.items,
        "rounds": args.rounds,
        "steps": args.steps,
        "precision": args.precision,
        "median_lists_per_second": {side: round(rate, 1) for side, rate in medians.items()},
        "matmul_flops_per_list": per_list,
        "peak_gflops": None if peak is None else round(peak, 1),
    }


def serving_line(rows: list[tuple], rates: dict, args, *, cpu: str, threads: dict) -> dict:
    """The record of one ``serve_bench`` run: ``rows`` of ``(call, p50 ms, p99 ms)``,
    ``rates`` (lists/s at batch 64 by model), TensorFlow's ``threads`` (``intra_op``,
    ``inter_op``; 0 is TensorFlow's default, one per CPU) and the options."""
    return {
        "kind": "serving",
        "cpu": cpu,
        "features": args.features,
        "normalization": args.normalization,
        "trees": args.trees,
        "repeats": args.repeats,
        "threads": threads,
        "calls": [
            {"call": c, "p50_ms": round(p50, 3), "p99_ms": round(p99, 3)} for c, p50, p99 in rows
        ],
        "batch_64_lists_per_second": {k: round(v) for k, v in rates.items()},
    }


def _share(line: dict) -> str:
    """Our share of the recorded float32 matmul peak, or a dash without one."""
    if not line.get("peak_gflops"):
        return "—"
    ours = line["median_lists_per_second"]["ours"] * line["matmul_flops_per_list"] / 1e9
    return f"{ours / line['peak_gflops']:.0%} of {line['peak_gflops']:.0f}"


def step_table(lines: list[dict]) -> str:
    """``train_bench``'s lines as a markdown table, one row each."""
    out = [
        "| CPU | oneDNN capped at | model, features | ours, lists/s (batch) "
        "| authors' code, lists/s (batch) | ours / authors | share of the float32 matmul peak "
        "(GFLOP/s) | our other steps in the same rounds, lists/s (/ ours) |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for line in lines:
        rates = line["median_lists_per_second"]
        theirs, ratio = "—", "—"
        if "authors" in rates:
            theirs = f"{rates['authors']:,.0f} ({line['official_batch_size']})"
            ratio = f"{rates['ours'] / rates['authors']:.2f}x"
        cap = line["onednn_max_cpu_isa"]
        others = [
            f"{side.removeprefix('ours, ')} {rate:,.0f} ({rate / rates['ours']:.2f}x)"
            for side, rate in rates.items()
            if side not in ("ours", "authors")
        ]
        out.append(
            f"| {line['cpu']} | {'—' if cap == 'none' else cap} | "
            f"{line['model']}, {line['features']} | {rates['ours']:,.0f} ({line['batch_size']}) "
            f"| {theirs} | {ratio} | {_share(line)} | {'; '.join(others) or '—'} |"
        )
    return "\n".join(out)


def _threads(count: int) -> str:
    return str(count) if count else "default"


def serving_table(lines: list[dict]) -> str:
    """``serve_bench``'s lines as a markdown table: one row per run and list length."""
    out = [
        "| CPU | normalisation | TensorFlow threads (intra-op, inter-op) | items "
        "| RankFormer ELWC p50 / p99 ms | tensors p50 ms | LightGBM p50 ms (trees) "
        "| ELWC p50 / LightGBM's | batch 64 lists of 16, lists/s: RankFormer ELWC, LightGBM |",
        "|---|---|---|---:|---|---:|---|---:|---|",
    ]
    for line in lines:
        calls = line["calls"]  # each length's ELWC, tensors and LightGBM calls, in order
        threads = line["threads"]
        pools = f"{_threads(threads['intra_op'])}, {_threads(threads['inter_op'])}"
        rates = line["batch_64_lists_per_second"]
        throughput = f"{rates['rankformer_elwc']:,}, {rates['lightgbm']:,}"
        for elwc, tensors, trees in zip(calls[::3], calls[1::3], calls[2::3]):
            items = elwc["call"].rsplit(" ", 1)[1]
            out.append(
                f"| {line['cpu']} | {line['normalization']} | {pools} | {items} "
                f"| {elwc['p50_ms']:.2f} / {elwc['p99_ms']:.2f} | {tensors['p50_ms']:.2f} "
                f"| {trees['p50_ms']:.2f} ({line['trees']}) "
                f"| {elwc['p50_ms'] / trees['p50_ms']:.2f}x | {throughput} |"
            )
    return "\n".join(out)


def record_table(lines: list[dict]) -> str:
    """The table of a record's lines, by their kind (all lines of a file share one)."""
    kinds = {line.get("kind") for line in lines}
    if kinds == {"serving"}:
        return serving_table(lines)
    if kinds == {"train_step"}:
        return step_table(lines)
    raise ValueError(f"a record holds one kind of line (train_step or serving), found {kinds}")


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 1 or argv[0].startswith("-"):
        print(f"usage: python -m pipelines.benchmarks.speed_records RECORD\n\n{__doc__}")
        return 2
    try:
        print(record_table(read_lines(argv[0])))
    except (OSError, ValueError, KeyError) as error:
        print(f"speed_records: error: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
