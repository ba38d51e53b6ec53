"""The serving latency benchmark runs end to end on a tiny setting (timings not checked)."""

from __future__ import annotations

import pytest

pytest.importorskip("tensorflow")

from pipelines.benchmarks import serve_bench  # noqa: E402


def test_serve_bench_reports_both_models(capsys):
    assert serve_bench.main(["--features", "8", "--repeats", "3", "--trees", "5"]) == 0
    out = capsys.readouterr().out
    for label in (
        "rankformer ELWC, 1 list of 16",
        "rankformer tensors, 1 list of 128",
        "lightgbm 5 trees, 128 items",
        "throughput, batch 64",
    ):
        assert label in out


def test_the_default_normalisation_is_the_converters_and_each_length_gets_its_ratio(capsys):
    from pipelines.benchmarks.bench_support import cpu_extensions
    from tfrecords_tools.convert import ConvertConfig

    assert serve_bench.build_parser().parse_args([]).normalization == ConvertConfig.normalize
    assert serve_bench.main(["--features", "4", "--repeats", "2", "--trees", "3"]) == 0
    out = capsys.readouterr().out
    assert f"CPU: {cpu_extensions()}" in out and "4 features, quantile normalisation" in out
    for n in (16, 128):
        assert f"rankformer ELWC, 1 list of {n}: p50 " in out and "x LightGBM's" in out


def test_the_stand_in_quantile_table_is_what_the_model_applies():
    import numpy as np

    from pipelines.benchmarks.bench_support import feature_manifest
    from tfr_rankformer.model.feature_normalization import FeatureNormalization

    manifest = feature_manifest(3, "quantile")
    layer = FeatureNormalization.from_manifest(manifest)
    table = np.asarray(layer.quantiles)
    assert layer.method == "quantile" and table.shape == (3, 1000)
    assert np.all(np.diff(table, axis=1) >= 0) and np.any(np.diff(table, axis=1) == 0)


def test_a_recorded_run_reprints_one_row_per_length_with_its_ratio(tmp_path, capsys):
    from pipelines.benchmarks import speed_records
    from pipelines.benchmarks.bench_support import cpu_extensions

    record = tmp_path / "serve.jsonl"
    flags = ["--features", "4", "--repeats", "2", "--trees", "3", "--record", str(record)]
    assert serve_bench.main(flags + ["--normalization", "standard"]) == 0
    (line,) = speed_records.read_records(str(record))
    assert line["kind"] == "serving" and line["normalization"] == "standard"
    assert line["threads"] == {"intra_op": 0, "inter_op": 0} and len(line["calls"]) == 6
    capsys.readouterr()
    assert speed_records.main([str(record)]) == 0
    rows = capsys.readouterr().out.splitlines()[2:]
    assert len(rows) == 2
    elwc, trees = line["calls"][3], line["calls"][5]  # 128 items: ELWC, tensors, LightGBM
    assert rows[1].startswith(f"| {cpu_extensions()} | standard | default, default | 128 |")
    rates = line["batch_64_lists_per_second"]
    assert rows[1].endswith(
        f"| {elwc['p50_ms'] / trees['p50_ms']:.2f}x "
        f"| {rates['rankformer_elwc']:,}, {rates['lightgbm']:,} |"
    )


def test_a_record_mixing_kinds_is_refused(tmp_path, capsys):
    from pipelines.benchmarks import speed_records

    record = tmp_path / "mixed.jsonl"
    record.write_text('{"kind": "serving"}\n{"kind": "train_step"}\n')
    assert speed_records.main([str(record)]) == 1
    assert "one kind of line" in capsys.readouterr().err
