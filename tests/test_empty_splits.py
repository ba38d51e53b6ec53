"""Splits left without lists by ``tfr-convert --min-list-size``: tfr-convert warns,
tfr-train refuses an empty train split and leaves empty vali and test splits out,
tfr-eval names an empty split it is asked for."""

from __future__ import annotations

import json
import logging
import os

import pytest

from pipelines.convert_cli import main as convert_main
from tfr_rankformer.inputs.empty_splits import (
    EmptySplitError,
    empty_splits,
    why_empty,
    without_empty_splits,
)
from tfr_rankformer.inputs.manifest import Manifest


def _convert(source, out, min_list_size: int) -> str:
    argv = ["--input", str(source), "--output", str(out), "--min-list-size", str(min_list_size)]
    assert convert_main(argv + ["--workers", "1", "--no-progress", "--log-level", "WARNING"]) == 0
    return str(out)


def _warnings(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]


def _manifest(**vali) -> Manifest:
    train = {"num_lists": 2, "input_lists": 2, "files": {}}
    entry = {"num_lists": 0, "input_lists": 4, "files": {}, **vali}
    splits = {"train": train, "vali": entry}
    return Manifest.coerce({"parameters": {"min_list_size": 9}, "splits": splits})


# === The rule, on hand-made manifests ===


def test_why_a_split_is_empty():
    dropped = _manifest(lists_dropped={"min_list_size": 4})
    assert empty_splits(dropped) == ["vali"]
    assert why_empty(dropped, "vali", manifest_path="d/manifest.json") == (
        "--min-list-size 9 dropped all 4 of its lists: see lists_dropped in d/manifest.json"
    )
    assert why_empty(_manifest(input_lists=0), "vali") == "its input held no lists"
    # An unrecorded count is not an empty split.
    assert empty_splits(_manifest(num_lists=None)) == []


def test_empty_vali_is_left_out_with_a_warning_and_empty_train_refused(caplog):
    manifest = _manifest(lists_dropped={"min_list_size": 4})
    with caplog.at_level(logging.WARNING):
        kept = without_empty_splits(manifest, data_dir="d")
    assert list(kept.splits) == ["train"] and list(manifest.splits) == ["train", "vali"]
    assert _warnings(caplog) == [
        "the 'vali' split of d holds no lists (--min-list-size 9 dropped all 4 of its lists: "
        "see lists_dropped in d/manifest.json): it is left out of this run's evaluation"
    ]
    splits = {"train": dict(manifest.splits["vali"].to_json())}
    empty_train = Manifest.coerce({"parameters": {"min_list_size": 9}, "splits": splits})
    with pytest.raises(EmptySplitError) as info:
        without_empty_splits(empty_train, data_dir="d")
    assert str(info.value) == (
        "the 'train' split of d holds no lists (--min-list-size 9 dropped all 4 of its lists: "
        "see lists_dropped in d/manifest.json); convert the data again with a smaller "
        "--min-list-size"
    )


# === The commands ===


def test_tfr_convert_warns_naming_the_split_and_the_option(tiny_dataset, tmp_path, caplog):
    with caplog.at_level(logging.WARNING):
        out = _convert(tiny_dataset, tmp_path / "data", 3)
    with open(os.path.join(out, "manifest.json"), encoding="utf-8") as f:
        splits = json.load(f)["splits"]
    assert [splits[s]["num_lists"] for s in ("train", "vali", "test")] == [2, 0, 0]
    assert _warnings(caplog) == [
        f"the {split!r} split of {out} holds no lists (--min-list-size 3 dropped its only "
        f"list: see lists_dropped in {out}/manifest.json); tfr-train will leave it out of "
        "its evaluation"
        for split in ("vali", "test")
    ]
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        out = _convert(tiny_dataset, tmp_path / "none", 5)
    assert _warnings(caplog)[0] == (
        f"the 'train' split of {out} holds no lists (--min-list-size 5 dropped all 3 of its "
        f"lists: see lists_dropped in {out}/manifest.json); tfr-train will refuse it; convert "
        "the data again with a smaller --min-list-size"
    )


@pytest.mark.parametrize("model", ["mlp", "gbdt-1k"])
def test_tfr_train_refuses_an_empty_train_split_before_writing(
    model, tiny_dataset, tmp_path, capsys
):
    from pipelines.train_cli import main as train_main

    data = _convert(tiny_dataset, tmp_path / "data", 5)
    run = tmp_path / "run"
    argv = ["--model", model, "--data", data, "--model-dir", str(run), "--quiet"]
    assert train_main(argv) == 1
    assert capsys.readouterr().err == (
        f"tfr-train: error: the 'train' split of {data} holds no lists (--min-list-size 5 "
        f"dropped all 3 of its lists: see lists_dropped in {data}/manifest.json); convert the "
        "data again with a smaller --min-list-size\n"
    )
    assert not run.exists()


def test_empty_vali_and_test_are_left_out_of_training_and_named_by_tfr_eval(
    tiny_dataset, tmp_path, capsys, caplog
):
    from pipelines.eval_cli import main as eval_main
    from pipelines.train_cli import main as train_main

    data = _convert(tiny_dataset, tmp_path / "data", 3)
    run = str(tmp_path / "run")
    argv = ["--model", "mlp", "--data", data, "--model-dir", run, "--epochs", "2", "--quiet"]
    with caplog.at_level(logging.WARNING):
        assert train_main(argv) == 0, capsys.readouterr().err
    left_out = [m for m in _warnings(caplog) if "left out of this run's evaluation" in m]
    assert [m.split("'")[1] for m in left_out] == ["vali", "test"]
    with open(os.path.join(run, "metrics.json"), encoding="utf-8") as f:
        metrics = json.load(f)
    assert "train" in metrics and "vali" not in metrics and "test" not in metrics
    capsys.readouterr()
    assert eval_main(["--model-dir", run]) == 1
    assert capsys.readouterr().err == (
        f"tfr-eval: error: the 'test' split of {data} holds no lists (--min-list-size 3 dropped "
        f"its only list: see lists_dropped in {data}/manifest.json); there is nothing to "
        "evaluate\n"
    )
    assert eval_main(["--model-dir", run, "--split", "all"]) == 0
    assert "train" in capsys.readouterr().out
