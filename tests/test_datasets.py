"""LETOR directory layouts and known dataset names."""

from __future__ import annotations

import pytest

from tfrecords_tools.datasets import (
    DatasetNotFoundError,
    find_dataset_dir,
    find_folds,
    get_dataset,
)


def _touch(path):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("0 qid:1 1:0\n")


def test_fold_layout(tmp_path):
    for fold in (1, 2, 10):
        for split in ("train", "vali", "test"):
            _touch(tmp_path / f"Fold{fold}" / f"{split}.txt")
    folds = find_folds(str(tmp_path))
    assert list(folds) == [1, 2, 10]
    assert sorted(folds[2]) == ["test", "train", "vali"]


def test_single_set_nested_gz_and_valid_spelling(tmp_path):
    _touch(tmp_path / "sample" / "train.txt.gz")
    _touch(tmp_path / "sample" / "valid.txt")
    folds = find_folds(str(tmp_path))
    assert list(folds) == [None]
    assert folds[None]["train"].endswith("train.txt.gz")
    assert folds[None]["vali"].endswith("valid.txt")


def test_yahoo_prefix_selects_the_set(tmp_path):
    for prefix in ("set1", "set2"):
        for split in ("train", "valid", "test"):
            _touch(tmp_path / f"{prefix}.{split}.txt")
    folds = find_folds(str(tmp_path), prefix="set1.")
    assert all("set1." in path for path in folds[None].values())


def test_missing_train_is_a_clear_error(tmp_path):
    _touch(tmp_path / "test.txt")
    with pytest.raises(DatasetNotFoundError, match="no train file"):
        find_folds(str(tmp_path))


def test_names_ignore_case_and_dashes():
    assert get_dataset("mslr_web30k").name == "MSLR-WEB30K"
    assert get_dataset("yahoo set 1").num_features == 699
    assert get_dataset("unknown") is None


def test_lookup_error_names_places_and_download_page(tmp_path):
    with pytest.raises(DatasetNotFoundError) as error:
        find_dataset_dir(get_dataset("MSLR-WEB30K"), [str(tmp_path / "a"), str(tmp_path / "b")])
    message = str(error.value)
    assert str(tmp_path / "a") in message and str(tmp_path / "b") in message
    assert "https://www.microsoft.com/en-us/research/project/mslr/" in message
