"""LibSVM files as TF-Ranking ships them: features in any order, some indices repeated.

TF-Ranking's example data (``tensorflow_ranking/examples/data/train.txt``) lists
19 of 136 features per line in random order, and some lines repeat an index;
its LibSVM reader keeps the last value. The file built here has that shape.
"""

from __future__ import annotations

import json
import os

import numpy as np
import pytest

from pipelines.convert_cli import main
from tfrecords_tools.convert import ConvertConfig, convert
from tfrecords_tools.letor.feature_count import scan_letor_file
from tfrecords_tools.letor.letor_parser import LetorFormatError, parse_letor_lines

NUM_FEATURES = 136


def _tf_ranking_lines(num_lists: int, *, seed: int) -> tuple[list[str], int, int]:
    """Lines of 19 shuffled features each; returns them, and the unsorted and repeated counts."""
    rng = np.random.default_rng(seed)
    lines, unsorted, repeated = [], 0, 0
    for qid in range(1, num_lists + 1):
        for _ in range(int(rng.integers(2, 6))):
            indices = rng.integers(1, NUM_FEATURES + 1, size=19)
            values = rng.uniform(-1, 1, size=19)
            tokens = " ".join(f"{i}:{v:.6f}" for i, v in zip(indices, values))
            lines.append(f"{int(rng.integers(0, 3))} qid:{qid} {tokens}\n")
            unsorted += bool(np.any(np.diff(indices) < 0))
            repeated += len(set(indices.tolist())) < len(indices)
    return lines, unsorted, repeated


def _expected(lines: list[str], keep: str) -> np.ndarray:
    """The features each line means, built independently of the parser."""
    out = np.zeros((len(lines), NUM_FEATURES), dtype=np.float32)
    for row, line in enumerate(lines):
        pairs = [t.split(":") for t in line.split()[2:]]
        for index, value in reversed(pairs) if keep == "first" else pairs:
            out[row, int(index) - 1] = np.float32(float(value))
    return out


def test_unsorted_line_is_sorted_and_counted():
    parsed = parse_letor_lines(
        [b"1 qid:4 3:0.3 1:0.1 2:0.2", b"0 qid:4 1:1 2:2 3:3"],
        num_features=3,
        path="f.txt",
        first_line=1,
    )
    np.testing.assert_array_equal(parsed.features, np.float32([[0.1, 0.2, 0.3], [1, 2, 3]]))
    assert (parsed.unsorted_lines, parsed.duplicate_lines) == (1, 0)


@pytest.mark.parametrize("keep, value", [("last", 0.9), ("first", 0.1)])
def test_repeated_index_keeps_one_value(keep, value):
    parsed = parse_letor_lines(
        [b"1 qid:4 2:0.1 1:0.5 2:0.9"], num_features=2, path="f.txt", first_line=7, duplicates=keep
    )
    np.testing.assert_array_equal(parsed.features, np.float32([[0.5, value]]))
    assert (parsed.unsorted_lines, parsed.duplicate_lines) == (1, 1)


def test_repeated_index_is_an_error_naming_the_option():
    with pytest.raises(LetorFormatError) as info:
        parse_letor_lines(
            [b"1 qid:4 2:0.1 1:0.5 2:0.9"], num_features=2, path="f.txt", first_line=7
        )
    assert info.value.line == 7 and info.value.token == "2:0.9"
    assert "--duplicate-features" in str(info.value)


def test_unknown_policy_is_refused():
    with pytest.raises(ValueError, match="duplicate-feature policy 'mean'"):
        ConvertConfig(input="x", output="y", duplicate_features="mean")


def test_scan_finds_the_largest_index_anywhere_on_the_line(tmp_path):
    path = tmp_path / "train.txt"
    path.write_text("2 qid:1 115:0.5 5:0.1\n1 qid:1 3:0.2\n")
    scan = scan_letor_file(str(path))
    assert (scan.max_index, scan.max_label, scan.widest_line) == (115, 2, 1)


@pytest.fixture(scope="module")
def tf_ranking_dir(tmp_path_factory):
    root = tmp_path_factory.mktemp("tfr_libsvm")
    counts = {}
    for split, lists, seed in (("train", 60, 0), ("vali", 10, 1), ("test", 10, 2)):
        lines, unsorted, repeated = _tf_ranking_lines(lists, seed=seed)
        (root / f"{split}.txt").write_text("".join(lines))
        counts[split] = (lines, unsorted, repeated)
    return root, counts


@pytest.mark.parametrize("workers", [1, 2])
def test_tf_ranking_file_converts_with_last_and_counts_lines(tf_ranking_dir, tmp_path, workers):
    root, counts = tf_ranking_dir
    lines, unsorted, repeated = counts["train"]
    assert unsorted > 0 and repeated > 0  # the file has both shapes
    config = ConvertConfig(
        input=str(root),
        output=str(tmp_path / "out"),
        duplicate_features="last",
        workers=workers,
        chunk_bytes=2048,  # many blocks
    )
    (manifest,) = convert(config, progress=False)
    entry = manifest.splits["train"]
    assert entry.input["unsorted_feature_lines"] == unsorted
    assert entry.input["duplicate_feature_lines"] == repeated
    assert entry.num_items == len(lines)
    assert manifest.num_features == NUM_FEATURES

    import tensorflow as tf
    from tensorflow_serving.apis import input_pb2

    shards = sorted(str(p) for p in (tmp_path / "out").glob("train-*.tfrecord"))
    rows = []
    for record in tf.data.TFRecordDataset(shards):
        elwc = input_pb2.ExampleListWithContext.FromString(record.numpy())
        rows += [list(e.features.feature["features"].float_list.value) for e in elwc.examples]
    np.testing.assert_array_equal(np.array(rows, np.float32), _expected(lines, "last"))


def test_cli_refuses_the_file_by_default_and_names_the_option(tf_ranking_dir, tmp_path, capsys):
    root, _ = tf_ranking_dir
    out = tmp_path / "out"
    assert main(["--input", str(root), "--output", str(out), "--no-progress"]) == 1
    err = capsys.readouterr().err
    assert "is duplicated on the line" in err and "--duplicate-features" in err
    assert not out.exists()


def test_cli_first_keeps_the_first_value(tf_ranking_dir, tmp_path):
    root, counts = tf_ranking_dir
    out = tmp_path / "out"
    flags = ["--input", str(root), "--output", str(out), "--no-progress", "--workers", "1"]
    assert main([*flags, "--duplicate-features", "first"]) == 0
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["parameters"]["duplicate_features"] == "first"
    assert manifest["splits"]["test"]["input"]["duplicate_feature_lines"] == counts["test"][2]
    assert os.path.exists(out / "test-00000-of-00001.tfrecord")
