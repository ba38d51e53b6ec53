"""The input pipeline benchmark runs end to end on tiny lists and records its run
(timings not checked); its table is printed from the record."""

from __future__ import annotations

from pipelines.benchmarks import speed_records


def _line(memory: list, stream: list, raw: list | None = None) -> dict:
    return {
        "kind": "input_pipeline",
        "cpu": "Some CPU; avx2 fma",
        "cores": 2,
        "load_average": {"before": "0.10 0.20 0.30", "after": "1.00 0.50 0.40"},
        "lists": 1000,
        "items": 16000,
        "longest": 16,
        "features": 136,
        "batch_items": 32768,
        "lists_per_second_by_epoch": {"memory": memory, "stream": stream}
        | ({} if raw is None else {"raw": raw}),
    }


def test_the_table_gives_each_modes_medians_and_the_ratios_to_their_anchors():
    line = _line([[10, 400, 600], [30, 500, 100]], [[20, 200, 300], [40, 250, 260]], [[80], [60]])
    row = speed_records.record_table([line]).splitlines()[2]
    # Medians: memory first 20, later of 400, 600, 500, 100 = 450; stream 30, 255; raw 70.
    assert row == (
        "| Some CPU; avx2 fma (2; 0.10 0.20 0.30, 1.00 0.50 0.40) | 1,000 x 16 (16) x 136 "
        "| 20, 450 | 30, 255 | 1.76x | 70 (0.29x) |"
    )


def test_a_run_of_one_epoch_or_without_a_mode_prints_dashes():
    row = speed_records.input_table([_line([[10]], [[20]])]).splitlines()[2]
    assert row.endswith("| 10, — | 20, — | — | — |")
    line = _line([[10, 30]], [], [[40]])
    del line["lists_per_second_by_epoch"]["stream"]
    assert (
        speed_records.input_table([line])
        .splitlines()[2]
        .endswith("| 10, 30 | — | — | 40 (0.25x) |")
    )


def test_input_bench_reports_and_records_both_modes(tmp_path, capsys):
    from pipelines.benchmarks import input_bench
    from pipelines.benchmarks.bench_support import cpu_extensions, read_lines

    record = tmp_path / "input.jsonl"
    flags = ["--lists", "40", "--items", "3", "--features", "5", "--epochs", "2"]
    flags += ["--repeats", "1", "--batch-items", "64", "--record", str(record)]
    assert input_bench.main(flags) == 0
    out = capsys.readouterr().out
    assert f"CPU: {cpu_extensions()}" in out and "40 lists, 120 items (longest 3) x 5" in out
    for mode in ("memory", "stream", "raw"):
        assert f"{mode}: median epoch 1 " in out
    (line,) = read_lines(str(record))
    assert (line["lists"], line["items"], line["features"]) == (40, 120, 5)
    rates = line["lists_per_second_by_epoch"]
    assert set(rates) == {"memory", "stream", "raw"}
    assert all(len(runs) == 1 and len(runs[0]) == 2 for runs in rates.values())
    assert speed_records.main([str(record)]) == 0
    (row,) = capsys.readouterr().out.splitlines()[2:]
    assert row.startswith(f"| {cpu_extensions()} (") and "| 40 x 3 (3) x 5 |" in row
