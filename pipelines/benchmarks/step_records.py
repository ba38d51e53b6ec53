"""``train_bench``'s record: one JSON line per model and feature count, and its table.

``train_bench --record FILE`` appends a line for each model and feature count
it timed: the CPU's model and vector extensions, the oneDNN instruction-set
cap (``ONEDNN_MAX_CPU_ISA``, ``none`` when unset), each side's median
round in lists/s, the float32 matmul peak measured in the same run
(``--peak``) and our share of it. :func:`step_table` prints the lines as a
table, one row per line, so that a speed ratio is always shown beside the
CPU it was measured on; ``results_tables`` places it in docs/results.md.

Reprint: ``python -m pipelines.benchmarks.step_records docs/records/train_step.jsonl``.
"""

from __future__ import annotations

import json
import os
import sys

__all__ = ["STEP_RECORD", "append_record", "read_records", "step_line", "step_table"]

STEP_RECORD = "train_step.jsonl"


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


def append_record(path: str, line: dict) -> None:
    """Appends ``line`` to the JSON-lines file ``path`` (made if missing)."""
    with open(path, "a", encoding="utf-8") as f:
        f.write(json.dumps(line, sort_keys=True) + "\n")


def read_records(path: str) -> list[dict]:
    """The lines of ``path``.

    Raises:
      ValueError: naming the file and line of a line that is not a JSON object.
    """
    lines = []
    with open(path, encoding="utf-8") as f:
        for number, text in enumerate(f, 1):
            if not text.strip():
                continue
            try:
                line = json.loads(text)
            except json.JSONDecodeError as error:
                raise ValueError(f"{path}, line {number}: not JSON ({error.msg})") from None
            if not isinstance(line, dict):
                raise ValueError(f"{path}, line {number}: not a JSON object")
            lines.append(line)
    return lines


def _share(line: dict) -> str:
    """Our share of the recorded float32 matmul peak, or a dash without one."""
    if not line.get("peak_gflops"):
        return "—"
    ours = line["median_lists_per_second"]["ours"] * line["matmul_flops_per_list"] / 1e9
    return f"{ours / line['peak_gflops']:.0%} of {line['peak_gflops']:.0f}"


def step_table(lines: list[dict]) -> str:
    """The lines as a markdown table, one row each."""
    out = [
        "| CPU | oneDNN capped at | model, features | ours, lists/s (batch) "
        "| authors' code, lists/s (batch) | ours / authors | share of the float32 matmul peak "
        "(GFLOP/s) |",
        "|---|---|---|---|---|---|---|",
    ]
    for line in lines:
        rates = line["median_lists_per_second"]
        theirs, ratio = "—", "—"
        if "authors" in rates:
            theirs = f"{rates['authors']:,.0f} ({line['official_batch_size']})"
            ratio = f"{rates['ours'] / rates['authors']:.2f}x"
        cap = line["onednn_max_cpu_isa"]
        out.append(
            f"| {line['cpu']} | {'—' if cap == 'none' else cap} | "
            f"{line['model']}, {line['features']} | {rates['ours']:,.0f} ({line['batch_size']}) "
            f"| {theirs} | {ratio} | {_share(line)} |"
        )
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 1 or argv[0].startswith("-"):
        print(f"usage: python -m pipelines.benchmarks.step_records RECORD\n\n{__doc__}")
        return 2
    try:
        print(step_table(read_records(argv[0])))
    except (OSError, ValueError, KeyError) as error:
        print(f"step_records: error: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
