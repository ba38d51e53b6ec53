"""Data with nothing to learn or measure, named before training: a training split in
which no list has two different labels is refused (every family), a split with nothing to
measure is left out with a warning, features that carry no signal are warned about by name,
and no metric is written as NaN."""

from __future__ import annotations

import json
import logging
import math

import pytest
from conftest import letor_line, write_lines

from pipelines.convert_cli import main as convert_main
from pipelines.train_cli import main as train_main
from tfr_rankformer.inputs.empty_splits import EmptySplitError, without_empty_splits
from tfr_rankformer.inputs.manifest import Manifest
from tfr_rankformer.text.text_plan import plan_text_run


def _manifest(train_labels: dict, vali_labels: dict, low=(0.0, 0.0), high=(1.0, 1.0)):
    splits = {
        "train": {"num_lists": 2, "label_histogram": train_labels, "files": {}},
        "vali": {"num_lists": 2, "label_histogram": vali_labels, "files": {}},
    }
    normalization = {"min": list(low), "max": list(high)}
    return Manifest.coerce(
        {"num_features": 2, "feature_names": ["bm25", "pagerank"], "splits": splits,
         "normalization": normalization}
    )  # fmt: skip


def test_a_training_split_of_one_label_is_refused_and_a_vali_split_left_out(caplog):
    with pytest.raises(EmptySplitError, match="^the 'train' split of d has no list with two "):
        without_empty_splits(_manifest({"0": 9, "2": 0}, {"0": 3, "1": 1}), data_dir="d")
    with caplog.at_level(logging.WARNING):
        kept = without_empty_splits(_manifest({"0": 9, "1": 2}, {"1": 4}), data_dir="d")
    assert list(kept.splits) == ["train"]
    assert [r.getMessage() for r in caplog.records] == [
        "the 'vali' split of d has no list with two different labels (every item's label is "
        "1: label_histogram in its manifest.json): nothing to measure, it is left out of this "
        "run's evaluation"
    ]


def test_features_of_one_value_are_warned_about_by_name_and_count(caplog):
    manifest = _manifest({"0": 9, "1": 2}, {"0": 3, "1": 1}, low=(0.5, 0.0), high=(0.5, 2.0))
    with caplog.at_level(logging.WARNING):
        without_empty_splits(manifest, data_dir="d")
    assert [r.getMessage() for r in caplog.records] == [
        "1 of the 2 features of d hold one value on every training item (std 0: min = max in "
        "its manifest.json's normalization): bm25; they carry no signal to rank by"
    ]


def test_a_text_run_whose_lists_all_hold_one_label_is_refused():
    class Config:
        data = "text-data"

    scan = {"lists_with_two_labels": 0, "lengths": {3: 2}, "longest_list": 3}
    with pytest.raises(EmptySplitError, match="'train' split of text-data has no list with two"):
        plan_text_run(Config(), scan, shape=None, cap=100, include_empty=True)


def _converted(tmp_path, train_label, features) -> str:
    root = tmp_path / "letor"
    for split, qids in (("train", range(3)), ("vali", [7]), ("test", [8])):
        lines = [
            letor_line(train_label(i) if split == "train" else i % 3, q, features(q, i))
            for q in qids
            for i in range(4)
        ]
        write_lines(root / f"{split}.txt", lines)
    out = str(tmp_path / "data")
    argv = ["--input", str(root), "--output", out, "--no-progress", "--log-level", "WARNING"]
    assert convert_main(argv) == 0
    return out


@pytest.mark.parametrize("model", ["gbdt-1k"])  # mlp: a rejected-input case
def test_tfr_train_refuses_labels_that_are_all_zero(model, tmp_path, capsys):
    data = _converted(tmp_path, lambda i: 0, lambda q, i: [0.1 * i, 1.0, i % 2])
    run = tmp_path / "run"
    argv = ["--model", model, "--data", data, "--model-dir", str(run), "--quiet"]
    assert train_main(argv + ["--include-empty-lists"]) == 1
    assert capsys.readouterr().err == (
        f"tfr-train: error: the 'train' split of {data} has no list with two different labels "
        "(every item's label is 0: label_histogram in its manifest.json): there is nothing to "
        "learn; train on data whose lists hold items of different labels\n"
    )
    assert not run.exists()


@pytest.mark.slow  # a training run: over 20 s on a shared machine
def test_constant_features_train_to_finite_metrics_with_a_warning(tmp_path, caplog):
    data = _converted(tmp_path, lambda i: i % 3, lambda q, i: [1.0, 2.0, 3.0])
    run = tmp_path / "run"
    argv = ["--model", "mlp", "--data", data, "--model-dir", str(run), "--epochs", "1"]
    with caplog.at_level(logging.WARNING):
        assert train_main(argv + ["--quiet"]) == 0
    assert any("3 of the 3 features" in r.getMessage() for r in caplog.records)
    metrics = json.loads((run / "metrics.json").read_text())
    values = [v for split in ("train", "vali", "test") for v in metrics[split].values()]
    assert all(math.isfinite(v) for v in values if isinstance(v, float))
    assert metrics["test"]["ndcg_y@10"] > 0


def test_features_fixed_within_every_list_are_warned_about(tmp_path, caplog):
    # feature_1 is the list's number, feature_3 one value everywhere.
    data = _converted(tmp_path, lambda i: i % 3, lambda q, i: [q, 0.1 * i, 1.0])
    run = tmp_path / "run"
    argv = ["--model", "gbdt-1k", "--data", data, "--model-dir", str(run), "--quiet"]
    with caplog.at_level(logging.WARNING):
        assert train_main(argv + ["--lgb-param", "num_iterations=3"]) == 0
    messages = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert f"1 of the 3 features of {data} hold one value on every training item" in messages[0]
    assert messages[1] == (
        f"1 of the 3 features of {data} hold one value within every training list: "
        "feature_1; they cannot order a list's items"
    )
