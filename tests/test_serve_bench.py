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
