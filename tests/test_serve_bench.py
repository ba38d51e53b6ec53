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
