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
* ``input_bench --record FILE`` appends one line per run (:func:`input_line`):
  the CPU, the core count and load average, the lists' shape and every
  pipeline's lists/s by epoch for each mode. :func:`input_table` prints one
  row per line: each mode's median first epoch and later epochs, the held
  lists' later epochs as a ratio to the records read every epoch, and their
  first epoch as a ratio to the parsing alone (``raw``).

So a speed ratio is always printed beside the CPU it was measured on;
``results_tables`` places both tables in docs/results.md. No TensorFlow here.

Reprint: ``python -m pipelines.benchmarks.speed_records docs/records/train_step.jsonl``
(or ``serve_latency.jsonl``, ``input_pipeline.jsonl``).
"""

from __future__ import annotations

import os
import statistics
import sys

from pipelines.benchmarks.run_records import read_lines

__all__ = [
    "INPUT_RECORD",
    "SERVING_RECORD",
    "STEP_RECORD",
    "epoch_medians",
    "input_line",
    "input_table",
    "record_table",
    "serving_line",
    "serving_table",
    "step_line",
    "step_table",
]

STEP_RECORD = "train_step.jsonl"
SERVING_RECORD = "serve_latency.jsonl"
INPUT_RECORD = "input_pipeline.jsonl"


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


def input_line(rates: dict, shape: dict, args, *, cpu: str, cores: int, load: dict) -> dict:
    """The record of one ``input_bench`` run: ``rates`` maps each mode (``memory``,
    ``stream``, ``raw``) to its pipelines' lists/s by epoch; ``shape`` holds the split's
    ``lists``, ``items`` (all) and ``longest`` list and the ``features``;
    ``load`` the load average ``before`` and ``after``."""
    return {
        "kind": "input_pipeline",
        "cpu": cpu,
        "cores": cores,
        "load_average": load,
        **shape,
        "batch_items": args.batch_items,
        "lists_per_second_by_epoch": {
            mode: [[round(rate) for rate in run] for run in runs] for mode, runs in rates.items()
        },
    }


def epoch_medians(runs: list[list[float]]) -> tuple[float, float | None]:
    """The median first epoch of ``runs`` (lists/s by epoch) and the median of the
    later ones (``None`` when each run had one epoch)."""
    later = [rate for run in runs for rate in run[1:]]
    return statistics.median(run[0] for run in runs), statistics.median(later) if later else None


def input_table(lines: list[dict]) -> str:
    """``input_bench``'s lines as a markdown table, one row each."""
    out = [
        "| CPU (cores; load average before, after) | lists x mean items (longest) x features "
        "| lists held in memory: epoch 1, later epochs, lists/s | records read every epoch: "
        "epoch 1, later epochs, lists/s | later epochs, held / read | epoch 1 parsing alone, "
        "lists/s (held / it) |",
        "|---|---|---|---|---:|---|",
    ]
    for line in lines:
        rates = line["lists_per_second_by_epoch"]
        cells = {
            mode: epoch_medians(rates[mode]) if mode in rates else (None, None)
            for mode in ("memory", "stream", "raw")
        }
        (held_first, held), (_, read), (raw, _) = cells["memory"], cells["stream"], cells["raw"]
        load = line["load_average"]
        out.append(
            f"| {line['cpu']} ({line['cores']}; {load['before']}, {load['after']}) "
            f"| {line['lists']:,} x {line['items'] / line['lists']:.0f} ({line['longest']}) "
            f"x {line['features']} | {_rates(*cells['memory'])} | {_rates(*cells['stream'])} "
            f"| {_ratio(held, read)} | {_parsing(raw, held_first)} |"
        )
    return "\n".join(out)


def _ratio(a: float | None, b: float | None) -> str:
    """``a / b`` as ``1.23x``, or a dash when either is missing (or 0)."""
    return f"{a / b:.2f}x" if a and b else "—"


def _parsing(raw: float | None, held_first: float | None) -> str:
    """The parsing alone's first epoch, and the held lists' first as a share of it."""
    return "—" if raw is None else f"{raw:,.0f} ({_ratio(held_first, raw)})"


def _rates(first: float | None, later: float | None) -> str:
    if first is None:
        return "—"
    return f"{first:,.0f}, {'—' if later is None else f'{later:,.0f}'}"


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
            ratio = _ratio(rates["ours"], rates["authors"])
        cap = line["onednn_max_cpu_isa"]
        others = [
            f"{side.removeprefix('ours, ')} {rate:,.0f} ({_ratio(rate, rates['ours'])})"
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
                f"| {_ratio(elwc['p50_ms'], trees['p50_ms'])} | {throughput} |"
            )
    return "\n".join(out)


def record_table(lines: list[dict]) -> str:
    """The table of a record's lines, by their kind (all lines of a file share one)."""
    tables = {"train_step": step_table, "serving": serving_table, "input_pipeline": input_table}
    kinds = {line.get("kind") for line in lines}
    if len(kinds) != 1 or not kinds <= tables.keys():
        raise ValueError(f"a record holds one kind of line ({', '.join(tables)}), found {kinds}")
    return tables[kinds.pop()](lines)


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
