"""tfr-predict on LETOR lines that omit features, by what the training data records.

Dense training data (no line omitted a feature) refuses a line whose features
stop before the model's last one; sparse or unrecorded training data reads the
omitted features as 0 and the summary counts those items.
"""

from __future__ import annotations

import json
import os
import shutil

import pytest

from tests.conftest import letor_line, write_lines
from tfr_rankformer.inputs.manifest import Manifest
from tfr_rankformer.inputs.training_density import (
    MISSING_FEATURES,
    manifest_density,
    training_density,
)
from tfrecords_tools.letor.letor_lists import load_letor_lists

DENSE_LINES = [letor_line(i % 3, 1 + i // 4, [0.1 * i, 1.0 + i, i % 2]) for i in range(12)]
# Lines 2 and 3 omit features: the first stops at 2 of 3, the second skips feature 2.
SPARSE_LINES = [DENSE_LINES[0], "1 qid:1 1:0.5 2:0.1\n", "0 qid:1 1:0.2 3:1\n", *DENSE_LINES[3:]]


def _convert(letor_dir, out) -> str:
    from pipelines.convert_cli import main

    argv = ["--input", str(letor_dir), "--output", str(out), "--no-progress", "--workers", "1"]
    assert main(argv + ["--log-level", "ERROR", "--max-relevance", "2"]) == 0
    return str(out)


def _letor_dir(root, train_lines) -> str:
    write_lines(root / "train.txt", train_lines)
    write_lines(root / "vali.txt", DENSE_LINES[:4])
    write_lines(root / "test.txt", DENSE_LINES[4:8])
    return str(root)


def _manifest(data_dir) -> dict:
    with open(os.path.join(data_dir, "manifest.json"), encoding="utf-8") as f:
        return json.load(f)


def _write_manifest(data_dir, manifest: dict) -> None:
    with open(os.path.join(data_dir, "manifest.json"), "w", encoding="utf-8") as f:
        json.dump(manifest, f)


@pytest.fixture(scope="module")
def datasets(tmp_path_factory):
    """Converted 3-feature data: ``dense``, ``sparse`` (2 train lines omit features)."""
    root = tmp_path_factory.mktemp("short-lines")
    return {
        "dense": _convert(_letor_dir(root / "dense-in", DENSE_LINES), root / "dense"),
        "sparse": _convert(_letor_dir(root / "sparse-in", SPARSE_LINES), root / "sparse"),
    }


@pytest.fixture(scope="module")
def dense_run(datasets, tmp_path_factory):
    """A 3-feature MLP trained 1 epoch on the dense data, and its export."""
    from tests.conftest import train_config
    from tfr_rankformer.runner import train
    from tfr_rankformer.serving.export import export_run

    model_dir = tmp_path_factory.mktemp("short-lines-run") / "mlp"
    train(train_config(datasets["dense"], model_dir, model="mlp", epochs=1), verbose=0)
    return str(model_dir), export_run(str(model_dir))


def _run_trained_on(dense_run, data_dir, where) -> str:
    """A copy of the dense run whose config names ``data_dir`` as its training data."""
    model_dir, _ = dense_run
    copy = shutil.copytree(model_dir, where)
    path = os.path.join(copy, "config.json")
    with open(path, encoding="utf-8") as f:
        config = json.load(f)
    config["data"] = str(data_dir)
    with open(path, "w", encoding="utf-8") as f:
        json.dump(config, f)
    return str(copy)


def _predict(model, input_path, out, capsys) -> tuple[int, str, str]:
    from pipelines.predict_cli import main

    rc = main(["--model", str(model), "--input", str(input_path), "--output", str(out)])
    captured = capsys.readouterr()
    return rc, captured.out, captured.err


def _short_input(tmp_path) -> str:
    """Line 2 stops at feature 2 of 3, line 3 skips feature 2."""
    lines = ["1 qid:7 1:0.5 2:1 3:0\n", "0 qid:7 1:0.1 2:3\n", "2 qid:7 1:0.9 3:1\n"]
    return write_lines(tmp_path / "q.txt", lines)


# ---------------------------------------------------------------------------
# What the converter records.
# ---------------------------------------------------------------------------


def test_the_converter_counts_lines_that_omit_features(datasets):
    dense, sparse = _manifest(datasets["dense"]), _manifest(datasets["sparse"])
    assert {s: e["input"][MISSING_FEATURES] for s, e in dense["splits"].items()} == {
        "train": 0,
        "vali": 0,
        "test": 0,
    }
    assert sparse["splits"]["train"]["input"][MISSING_FEATURES] == 2
    assert sparse["splits"]["test"]["input"][MISSING_FEATURES] == 0
    assert manifest_density(Manifest.from_json(dense)).dense is True
    assert manifest_density(Manifest.from_json(sparse)).dense is False


def test_a_manifest_without_the_count_is_unknown():
    manifest = {"splits": {"train": {"input": {"path": "t.txt"}}, "test": {"input": {}}}}
    assert manifest_density(Manifest.coerce(manifest)).dense is None
    manifest["splits"]["test"]["input"][MISSING_FEATURES] = 3  # one sparse split decides
    assert manifest_density(Manifest.coerce(manifest)).dense is False


def test_the_reader_counts_filled_items_and_their_last_features(tmp_path):
    letor = load_letor_lists(_short_input(tmp_path), 3)
    assert letor.filled_items == 2
    assert letor.last_features.tolist() == [3, 2, 3]
    assert letor.lists[0][2][1].tolist() == pytest.approx([0.1, 3.0, 0.0])


def test_training_density_follows_the_run_to_its_data(datasets, tmp_path):
    run = tmp_path / "gbdt"
    run.mkdir()
    (run / "config.json").write_text(json.dumps({"data": datasets["sparse"]}))
    assert training_density(str(run)).dense is False
    (run / "config.json").write_text(json.dumps({"data": datasets["dense"]}))
    export = run / "export" / "1"
    export.mkdir(parents=True)
    assert training_density(str(export)).dense is True  # an export inside its run
    outside = training_density(str(tmp_path))
    assert outside.dense is None and "not inside the run" in outside.reason
    (run / "config.json").write_text(json.dumps({"data": str(tmp_path / "gone")}))
    assert "cannot be read" in training_density(str(run)).reason


# ---------------------------------------------------------------------------
# tfr-predict.
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("model", ["run", "export"])
def test_dense_training_data_refuses_a_line_that_stops_short(dense_run, model, tmp_path, capsys):
    path = _short_input(tmp_path)
    out = tmp_path / "run.txt"
    model_dir, export = dense_run

    rc, printed, err = _predict(model_dir if model == "run" else export, path, out, capsys)

    assert rc == 1, printed
    assert err.splitlines() == [
        f"tfr-predict: error: {path}:2: the line's features stop at 2, the model takes 3 "
        "(its training data gave every feature on every line)"
    ]
    assert not out.exists() and sorted(os.listdir(tmp_path)) == ["q.txt"]


def test_dense_training_data_accepts_a_skipped_feature_and_counts_it(dense_run, tmp_path, capsys):
    model_dir, _ = dense_run
    path = write_lines(tmp_path / "q.txt", ["1 qid:7 1:0.5 2:1 3:0\n", "2 qid:7 1:0.9 3:1\n"])

    rc, printed, _ = _predict(model_dir, path, tmp_path / "run.txt", capsys)

    assert rc == 0
    assert "1 items were scored with 0 for features their lines omitted (of the model's 3); " in (
        printed
    )
    assert "each line still gave the last feature" in printed


def test_sparse_training_data_accepts_short_lines_and_counts_them(
    dense_run, datasets, tmp_path, capsys
):
    run = _run_trained_on(dense_run, datasets["sparse"], tmp_path / "sparse-run")
    out = tmp_path / "run.txt"

    rc, printed, err = _predict(run, _short_input(tmp_path), out, capsys)

    assert rc == 0, err
    assert len(out.read_text().splitlines()) == 3
    assert (
        "2 items were scored with 0 for features their lines omitted (of the model's 3); "
        "the training data omitted features too"
    ) in printed


def test_a_manifest_from_before_the_count_accepts_short_lines_and_counts_them(
    dense_run, datasets, tmp_path, capsys
):
    old = shutil.copytree(datasets["dense"], tmp_path / "old-data")
    manifest = _manifest(old)
    for entry in manifest["splits"].values():
        del entry["input"][MISSING_FEATURES]
    _write_manifest(old, manifest)
    run = _run_trained_on(dense_run, old, tmp_path / "old-run")

    rc, printed, err = _predict(run, _short_input(tmp_path), tmp_path / "run.txt", capsys)

    assert rc == 0, err
    assert "2 items were scored with 0" in printed
    assert f"not known (the manifest of {old} predates {MISSING_FEATURES})" in printed


def test_an_export_outside_its_run_accepts_short_lines_and_counts_them(dense_run, tmp_path, capsys):
    _, export = dense_run
    moved = shutil.copytree(export, tmp_path / "served" / "1")

    rc, printed, err = _predict(moved, _short_input(tmp_path), tmp_path / "run.txt", capsys)

    assert rc == 0, err
    assert "2 items were scored with 0" in printed and "not inside the run" in printed


def test_a_converted_split_reports_the_items_its_conversion_filled(
    dense_run, datasets, tmp_path, capsys
):
    data = shutil.copytree(datasets["dense"], tmp_path / "data")
    manifest = _manifest(data)
    manifest["splits"]["test"]["input"][MISSING_FEATURES] = 2
    _write_manifest(data, manifest)
    model_dir, _ = dense_run

    rc, printed, err = _predict(model_dir, data, tmp_path / "run.txt", capsys)

    assert rc == 0, err
    assert "2 items of the test split lacked features in tfr-convert's input" in printed
