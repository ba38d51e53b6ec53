"""The serving latency benchmark runs end to end on a tiny setting (timings not checked)."""

from __future__ import annotations

import pytest

from pipelines.benchmarks import serve_bench  # noqa: E402


def test_serve_bench_reports_and_records_both_models_at_the_default_normalisation(capsys, tmp_path):
    from pipelines.benchmarks import speed_records
    from pipelines.benchmarks.bench_support import cpu_extensions, read_lines
    from tfrecords_tools.convert import ConvertConfig

    assert serve_bench.build_parser().parse_args([]).normalization == ConvertConfig.normalize
    record = tmp_path / "serve.jsonl"
    flags = ["--features", "8", "--repeats", "3", "--trees", "5", "--record", str(record)]
    assert serve_bench.main(flags) == 0
    out = capsys.readouterr().out
    for label in (
        "rankformer ELWC, 1 list of 16",
        "rankformer tensors, 1 list of 128",
        "lightgbm 5 trees, 128 items",
        "throughput, batch 64",
    ):
        assert label in out
    assert f"CPU: {cpu_extensions()}" in out and "8 features, quantile normalisation" in out
    for n in (16, 128):
        assert f"rankformer ELWC, 1 list of {n}: p50 " in out and "x LightGBM's" in out
    (line,) = read_lines(str(record))
    assert line["kind"] == "serving" and line["normalization"] == "quantile"
    assert line["threads"] == {"intra_op": 0, "inter_op": 0} and len(line["calls"]) == 6
    assert speed_records.main([str(record)]) == 0
    rows = capsys.readouterr().out.splitlines()[2:]
    assert len(rows) == 2
    elwc, trees = line["calls"][3], line["calls"][5]  # 128 items: ELWC, tensors, LightGBM
    assert rows[1].startswith(f"| {cpu_extensions()} | quantile | default, default | 128 |")
    rates = line["batch_64_lists_per_second"]
    assert rows[1].endswith(
        f"| {elwc['p50_ms'] / trees['p50_ms']:.2f}x "
        f"| {rates['rankformer_elwc']:,}, {rates['lightgbm']:,} |"
    )


def test_the_stand_in_quantile_table_is_what_the_model_applies():
    import numpy as np

    from pipelines.benchmarks.bench_support import feature_manifest
    from tfr_rankformer.model.feature_normalization import FeatureNormalization

    manifest = feature_manifest(3, "quantile")
    layer = FeatureNormalization.from_manifest(manifest)
    table = np.asarray(layer.quantiles)
    assert layer.method == "quantile" and table.shape == (3, 1000)
    assert np.all(np.diff(table, axis=1) >= 0) and np.any(np.diff(table, axis=1) == 0)


def test_a_record_mixing_kinds_is_refused(tmp_path, capsys):
    from pipelines.benchmarks import speed_records

    record = tmp_path / "mixed.jsonl"
    record.write_text('{"kind": "serving"}\n{"kind": "train_step"}\n')
    assert speed_records.main([str(record)]) == 1
    assert "one kind of line" in capsys.readouterr().err


@pytest.mark.slow  # two exports and torch's start
def test_text_mode_times_the_listformer_beside_sentence_transformers(capsys, tmp_path):
    from pipelines.benchmarks import speed_records
    from pipelines.benchmarks.bench_support import read_lines
    from tests.bert_checkpoints import write_checkpoint

    checkpoint, data = tmp_path / "bert", tmp_path / "data"
    write_checkpoint(str(checkpoint))
    data.mkdir()
    words = "the quick brown fox jump over lazy dog search engine rank document".split()
    (data / "collection.tsv").write_text(
        "".join(f"d{i}\t{' '.join(words[i:] + words[:i])}\n" for i in range(6))
    )
    (data / "queries.tsv").write_text("1\tquick fox\n2\tlazy dog search\n")
    record = tmp_path / "text.jsonl"
    flags = ["--family", "text", "--checkpoint", str(checkpoint), "--data", str(data)]
    flags += ["--query", "2", "--documents", "4", "--repeats", "2", "--record", str(record)]
    flags += ["--query-tokens", "8", "--document-tokens", "16"]
    assert serve_bench.main([*flags, "--precisions", "float32", "bf16"]) == 0
    out = capsys.readouterr().out
    assert "1 query, 4 documents" in out and "listformer bf16: p50 " in out
    (line,) = read_lines(str(record))
    names = [call["call"] for call in line["calls"]]
    assert line["kind"] == "text_serving" and line["documents"] == 4
    assert names == [
        "listformer float32",
        "listformer bf16",
        "sentence-transformers float32",
        "sentence-transformers bf16",
    ]
    assert speed_records.main([str(record)]) == 0
    rows = capsys.readouterr().out.splitlines()[2:]
    assert [row.split(" | ")[2:4] for row in rows] == [
        ["checkpoint", "float32"],
        ["checkpoint", "bf16"],
    ]
    assert serve_bench.main([*flags, "--query", "3"]) == 1
    assert "--query 3: " in capsys.readouterr().err
