"""Prints a speed benchmark's record as a table, every row naming its CPU."""

from __future__ import annotations

import statistics
import sys

from pipelines.benchmarks.bench_support import parser, read_lines

STEP_RECORD = "train_step.jsonl"
SERVING_RECORD = "serve_latency.jsonl"
TEXT_SERVING_RECORD = "text_serve_latency.jsonl"
INPUT_RECORD = "input_pipeline.jsonl"


def epoch_medians(runs: list[list[float]]) -> tuple[float, float | None]:
    """The median first epoch of ``runs`` (lists/s by epoch), and of the later ones."""
    later = [rate for run in runs for rate in run[1:]]
    return statistics.median(run[0] for run in runs), statistics.median(later) if later else None


def input_table(lines: list[dict]) -> str:
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
        parsing = "—" if raw is None else f"{raw:,.0f} ({_ratio(held_first, raw)})"
        out.append(
            f"| {line['cpu']} ({line['cores']}; {load['before']}, {load['after']}) "
            f"| {line['lists']:,} x {line['items'] / line['lists']:.0f} ({line['longest']}) "
            f"x {line['features']} | {_rates(*cells['memory'])} | {_rates(*cells['stream'])} "
            f"| {_ratio(held, read)} | {parsing} |"
        )
    return "\n".join(out)


def _ratio(a: float | None, b: float | None) -> str:
    return f"{a / b:.2f}x" if a and b else "—"


def _rates(first: float | None, later: float | None) -> str:
    if first is None:
        return "—"
    return f"{first:,.0f}, {'—' if later is None else f'{later:,.0f}'}"


def step_table(lines: list[dict]) -> str:
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
        peak = line.get("peak_gflops")  # our matmul GFLOP/s as a share of it
        gflops = rates["ours"] * line["matmul_flops_per_list"] / 1e9
        share = f"{gflops / peak:.0%} of {peak:.0f}" if peak else "—"
        others = [
            f"{side.removeprefix('ours, ')} {rate:,.0f} ({_ratio(rate, rates['ours'])})"
            for side, rate in rates.items()
            if side not in ("ours", "authors")
        ]
        out.append(
            f"| {line['cpu']} | {'—' if cap == 'none' else cap} | "
            f"{line['model']}, {line['features']} | {rates['ours']:,.0f} ({line['batch_size']}) "
            f"| {theirs} | {ratio} | {share} | {'; '.join(others) or '—'} |"
        )
    return "\n".join(out)


def serving_table(lines: list[dict]) -> str:
    out = [
        "| CPU | normalisation | TensorFlow threads (intra-op, inter-op) | items "
        "| RankFormer ELWC p50 / p99 ms | tensors p50 ms | LightGBM p50 ms (trees) "
        "| ELWC p50 / LightGBM's | batch 64 lists of 16, lists/s: RankFormer ELWC, LightGBM |",
        "|---|---|---|---:|---|---:|---|---:|---|",
    ]
    for line in lines:
        calls = line["calls"]  # each length's ELWC, tensors and LightGBM calls, in order
        threads = line["threads"]
        pools = ", ".join(str(threads[k] or "default") for k in ("intra_op", "inter_op"))
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


def text_serving_table(lines: list[dict]) -> str:
    """One row per precision of each run: the Listformer beside sentence-transformers."""
    out = [
        "| CPU (cores; load average) | documents | similarity | precision "
        "| Listformer p50 / p99 ms "
        "| sentence-transformers p50 / p99 ms | Listformer / sentence-transformers, p50 |",
        "|---|---:|---|---|---|---|---:|",
    ]
    for line in lines:
        calls = {c["call"]: c for c in line["calls"]}
        for name, ours in calls.items():
            if not name.startswith("listformer "):
                continue
            precision = name.split()[1]
            anchor = calls[f"sentence-transformers {precision}"]
            out.append(
                f"| {line['cpu']} ({line['cores']}; {line['load_average'][0]}) "
                f"| {line['documents']} | {line['similarity']} | {precision} "
                f"| {ours['p50_ms']:,.0f} / "
                f"{ours['p99_ms']:,.0f} | {anchor['p50_ms']:,.0f} / {anchor['p99_ms']:,.0f} "
                f"| {_ratio(ours['p50_ms'], anchor['p50_ms'])} |"
            )
    return "\n".join(out)


def record_table(lines: list[dict]) -> str:
    """The table of a record's lines, by their kind (one a file)."""
    tables = {
        "train_step": step_table,
        "serving": serving_table,
        "text_serving": text_serving_table,
        "input_pipeline": input_table,
    }
    kinds = {line.get("kind") for line in lines}
    if len(kinds) != 1 or not kinds <= tables.keys():
        raise ValueError(f"a record holds one kind of line ({', '.join(tables)}), found {kinds}")
    return tables[kinds.pop()](lines)


def main(argv: list[str] | None = None) -> int:
    p = parser(__doc__, prog="speed_records")
    p.add_argument("record", help="a record of train_bench, serve_bench or input_bench")
    try:
        print(record_table(read_lines(p.parse_args(argv).record)))
    except (OSError, ValueError, KeyError) as error:
        print(f"speed_records: error: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
