"""The public API as a user's typed program uses it: tests/typing_usage.py runs."""

from __future__ import annotations

import math
import os

import pytest

from tests import typing_usage


def test_the_registry_part_runs():
    names = typing_usage.feature_models()
    assert "rankformer" in names and "mlp" in names and "listformer" not in names


def test_the_typed_program_trains_evaluates_exports_and_scores(tiny_dataset, tmp_path):
    from pipelines.convert_cli import main as convert_main

    data = str(tmp_path / "data")
    argv = ["--input", str(tiny_dataset), "--output", data, "--workers", "1"]
    assert convert_main(argv + ["--no-progress", "--log-level", "WARNING"]) == 0
    run = str(tmp_path / "run")
    result = typing_usage.train_export_and_score(data, run)
    assert 0.0 <= result["trained"] <= 100.0 or math.isnan(result["trained"])
    # tfr.evaluate rescored the same weights on the same split.
    assert result["evaluated"] == pytest.approx(result["trained"], nan_ok=True)
    ((qid, docids, scores),) = result["scored"]
    assert (qid, docids, len(scores)) == (7, ["a", "b"], 2)
    assert all(math.isfinite(s) for s in scores)
    assert os.path.isdir(os.path.join(run, "export", "1"))
