"""The training benchmark's FLOP count (its timings are not tested)."""

from __future__ import annotations

import pytest

from pipelines.benchmarks.train_bench import forward_flops  # noqa: E402
from tfr_rankformer.model.model_config import ModelConfig  # noqa: E402


def test_mlp_flops_by_hand():
    arch = ModelConfig(mlp_units=(4, 2))
    # Per item: 3x4 + 4x2 + 2x1 multiply-adds = 22; 2 FLOPs each; 5 items.
    assert forward_flops("mlp", 3, 5, arch) == 2 * 5 * 22


def test_encoder_flops_by_hand():
    arch = ModelConfig(num_layers=1, ff_dim=8, head_hidden=2)
    d, items = 4, 3
    tokens = items + 1
    encoder = tokens * (4 * d * d + 2 * d * 8 + 2 * tokens * d)
    score_head = items * (d * 2 + 2) + d * 2  # the [CLS] half of the product once per list
    list_head = d * 2 + 2 * 2
    assert forward_flops("transformer", d, items, arch) == 2 * (encoder + score_head)
    assert forward_flops("rankformer", d, items, arch) == 2 * (encoder + score_head + list_head)


def test_without_the_released_code_it_times_our_side_and_says_how(capsys, tmp_path, monkeypatch):
    from pipelines.benchmarks.train_bench import main

    monkeypatch.delenv("RANKFORMER_OFFICIAL_PYTHON", raising=False)
    assert (
        main(
            ["--models", "mlp", "--batch-size", "4", "--items", "3", "--steps", "1"]
            + ["--rounds", "2", "--official-dir", str(tmp_path)]
        )
        == 0
    )
    out = capsys.readouterr().out
    assert "--official-python" in out  # the set-up note
    assert "CPU:" in out and out.count("mlp            46 round") == 2
    assert "mlp            46: ours" in out and "; ratio" not in out


def test_each_precision_is_one_more_side_of_the_rounds(capsys, tmp_path, monkeypatch):
    from pipelines.benchmarks.train_bench import main

    monkeypatch.delenv("RANKFORMER_OFFICIAL_PYTHON", raising=False)
    flags = ["--models", "mlp", "--batch-size", "4", "--items", "3", "--steps", "1"]
    flags += ["--rounds", "2", "--official-dir", str(tmp_path)]
    assert main(flags + ["--precision", "float32", "--precision", "bf16"]) == 0
    out = capsys.readouterr().out
    assert "precision float32, bf16" in out
    assert out.count("lists/s") >= 2 and out.count("ours, bf16") == 3  # 2 rounds, the median
    assert "bf16 / float32" in out


def test_unknown_models_are_refused():
    from pipelines.benchmarks.train_bench import main

    with pytest.raises(SystemExit):
        main(["--models", "mlp,gbdt"])


def test_peak_prints_the_ceiling_a_matmul_bound_step_allows(capsys, tmp_path, monkeypatch):
    import re

    from pipelines.benchmarks.train_bench import main

    monkeypatch.delenv("RANKFORMER_OFFICIAL_PYTHON", raising=False)
    args = ["--models", "transformer", "--batch-size", "8", "--items", "3", "--features", "8"]
    assert main(args + ["--steps", "1", "--rounds", "1", "--peak"]) == 0
    out = capsys.readouterr().out
    ours = float(re.search(r"transformer     8: ours ([\d,.]+)", out)[1].replace(",", ""))
    found = re.search(
        r"matmul peak ([\d.]+) GFLOP/s; ours at (\d+)% of it; at the peak ([\d,]+)", out
    )
    peak, share, ceiling = float(found[1]), int(found[2]), float(found[3].replace(",", ""))
    assert peak > 0 and share < 100
    # A tiny step is far from matmul-bound, so the ceiling lies above it.
    assert ceiling > ours
    assert "the authors'" not in out  # no ratio without their code


def test_their_own_batch_size_sets_their_steps_and_their_rate(capsys, monkeypatch):
    from pipelines.benchmarks import train_bench

    asked = []

    class FakeTimer:  # the released code's timer: 0.5 s per step of its batch
        def __init__(self, setup, model, d, *, batch, items, threads):
            asked.append(batch)

        def seconds(self, steps):
            asked.append(steps)
            return [0.5] * steps

        def close(self):
            pass

    monkeypatch.setattr(train_bench, "official_setup", lambda args: ("dir", "python"))
    monkeypatch.setattr(train_bench, "OfficialTimer", FakeTimer)
    args = ["--models", "mlp", "--batch-size", "8", "--items", "3", "--steps", "2"]
    assert train_bench.main(args + ["--rounds", "1", "--official-batch-size", "2"]) == 0
    out = capsys.readouterr().out
    # Our 2 steps of 8 lists: 8 of their steps of 2 lists, at 2 / 0.5 = 4 lists/s.
    assert asked == [2, 8]
    assert "(theirs 2)" in out and "authors 4 lists/s" in out


def test_a_record_line_per_model_reprints_as_a_table_naming_the_cpu(capsys, monkeypatch, tmp_path):
    from pipelines.benchmarks import speed_records, train_bench
    from pipelines.benchmarks.bench_support import cpu_extensions, read_lines

    class FakeTimer:  # the released code: 0.5 s per step of 2 lists
        def __init__(self, setup, model, d, *, batch, items, threads):
            pass

        def seconds(self, steps):
            return [0.5] * steps

        def close(self):
            pass

    monkeypatch.setattr(train_bench, "official_setup", lambda args: ("dir", "python"))
    monkeypatch.setattr(train_bench, "OfficialTimer", FakeTimer)
    monkeypatch.setenv("ONEDNN_MAX_CPU_ISA", "AVX2")
    record = tmp_path / "steps.jsonl"
    args = ["--models", "mlp", "--batch-size", "8", "--items", "3", "--steps", "1"]
    args += ["--features", "4,6", "--rounds", "1", "--official-batch-size", "2", "--peak"]
    assert train_bench.main(args + ["--record", str(record)]) == 0
    lines = read_lines(str(record))
    assert [(line["model"], line["features"]) for line in lines] == [("mlp", 4), ("mlp", 6)]
    assert lines[0]["cpu"] == cpu_extensions() and lines[0]["onednn_max_cpu_isa"] == "AVX2"
    assert lines[0]["median_lists_per_second"]["authors"] == 4.0  # 2 lists / 0.5 s
    arch = train_bench.TrainConfig(model="mlp", data="-", model_dir="-").architecture
    assert lines[1]["matmul_flops_per_list"] == 3 * train_bench.forward_flops("mlp", 6, 3, arch)
    capsys.readouterr()
    assert speed_records.main([str(record)]) == 0
    rows = capsys.readouterr().out.splitlines()[2:]
    ours = lines[1]["median_lists_per_second"]["ours"]
    share = ours * lines[1]["matmul_flops_per_list"] / 1e9 / lines[1]["peak_gflops"]
    assert rows[1].startswith(f"| {cpu_extensions()} | AVX2 | mlp, 6 | {ours:,.0f} (8) | 4 (2) |")
    assert rows[1].endswith(
        f"| {ours / 4:.2f}x | {share:.0%} of {lines[1]['peak_gflops']:.0f} | — |"
    )


def test_a_broken_record_line_is_named(tmp_path, capsys):
    from pipelines.benchmarks import speed_records

    record = tmp_path / "steps.jsonl"
    record.write_text('{"model": "mlp"}\n\n[1, 2]\n')
    assert speed_records.main([str(record)]) == 1
    assert f"{record}, line 3: not a JSON object" in capsys.readouterr().err


def test_our_other_steps_are_recorded_as_ratios_to_our_first(tmp_path, monkeypatch):
    from pipelines.benchmarks import speed_records, train_bench
    from pipelines.benchmarks.bench_support import read_lines

    monkeypatch.delenv("RANKFORMER_OFFICIAL_PYTHON", raising=False)
    record = tmp_path / "steps.jsonl"
    args = ["--models", "mlp", "--batch-size", "4", "--items", "3", "--steps", "1"]
    args += ["--rounds", "1", "--precision", "float32", "--precision", "bf16"]
    assert train_bench.main(args + ["--record", str(record)]) == 0
    (line,) = read_lines(str(record))
    rates = line["median_lists_per_second"]
    assert set(rates) == {"ours", "ours, bf16"} and line["peak_gflops"] is None
    row = speed_records.step_table([line]).splitlines()[2]
    ratio = rates["ours, bf16"] / rates["ours"]
    assert row.endswith(f"| — | — | — | bf16 {rates['ours, bf16']:,.0f} ({ratio:.2f}x) |")
