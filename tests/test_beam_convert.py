"""``tfr-convert --runner DirectRunner`` against the local converter.

The Beam pipeline must write the same lists (qid, labels, relevance, features)
as the local converter for the same seed, in any order, and a manifest that
agrees with the local one; quantiles may differ within the sketches' stated
rank error.
"""

from __future__ import annotations

import collections
import gzip
import hashlib
import json
import os
import sys

import numpy as np
import pytest
import tensorflow as tf
from tensorflow_serving.apis import input_pb2

from pipelines.convert_cli import main
from tests.conftest import REAL_DATA, letor_line, write_lines
from tfrecords_tools.letor.letor_parser import parse_letor_lines

MQ2008 = os.path.join(os.environ.get("TFR_DATA_DIR", REAL_DATA), "MQ2008")
SYNTHETIC = ["--input", "synthetic", "--synthetic-lists", "45", "--synthetic-list-size", "20"]
# A loose bound, so that the sketches really approximate (buffers of 239 items).
EPSILON = 0.05


def _convert(*flags) -> None:
    assert main([*map(str, flags), "--no-progress", "--log-level", "WARNING"]) == 0


def _manifest(directory) -> dict:
    with open(os.path.join(directory, "manifest.json"), encoding="utf-8") as f:
        return json.load(f)


def _lists(directory, split: str) -> collections.Counter:
    """Every list of a split as (qid, labels, relevance, features), counted."""
    lists = collections.Counter()
    names = sorted(n for n in os.listdir(directory) if n.startswith(f"{split}-"))
    for record in tf.data.TFRecordDataset([os.path.join(directory, n) for n in names]):
        elwc = input_pb2.ExampleListWithContext.FromString(record.numpy())
        items = [e.features.feature for e in elwc.examples]
        lists[
            (
                elwc.context.features.feature["qid"].int64_list.value[0],
                tuple(f["label"].float_list.value[0] for f in items),
                tuple(f["relevance"].float_list.value[0] for f in items),
                tuple(tuple(f["features"].float_list.value) for f in items),
            )
        ] += 1
    return lists


def _assert_same_lists(local, beam_out) -> None:
    for split in ("train", "vali", "test"):
        expected, got = _lists(local, split), _lists(beam_out, split)
        assert sum(expected.values()) > 0
        assert got == expected, split


def _letor_features(path: str, num_features: int) -> np.ndarray:
    with open(path, "rb") as f:
        lines = f.read().split(b"\n")
    return parse_letor_lines(lines, num_features=num_features, path=path, first_line=1).features


def _quantile_rank_errors(values: np.ndarray, features: np.ndarray) -> np.ndarray:
    """``[d, q]`` distances between each quantile's rank range and its target rank.

    A value ``v`` occupies the ranks ``#(x < v) .. #(x <= v) - 1`` of the sorted
    column; quantile ``i`` of ``q`` targets rank ``i / (q - 1) * (n - 1)``.
    """
    n, q = features.shape[0], values.shape[1]
    target = np.linspace(0.0, 1.0, q) * (n - 1)
    errors = np.empty(values.shape)
    for j in range(features.shape[1]):
        column = np.sort(features[:, j])
        v = values[j].astype(np.float32)
        low = np.searchsorted(column, v, side="left")
        high = np.searchsorted(column, v, side="right") - 1
        errors[j] = np.maximum(0, np.maximum(low - target, target - high))
    return errors


def _assert_manifests_agree(local: dict, beam_manifest: dict, train_features: np.ndarray):
    beam_parameters = beam_manifest["parameters"].pop("beam")
    assert beam_parameters["runner"] == "DirectRunner"
    for manifest in (local, beam_manifest):
        manifest["parameters"].pop("output")
        for entry in manifest["splits"].values():
            entry.pop("input")
    local_norm, beam_norm = local.pop("normalization"), beam_manifest.pop("normalization")
    assert beam_manifest == local
    # Moments are summed in another order: equal to float rounding.
    for section in ("standard", "log1p"):
        for key in ("mean", "std"):
            np.testing.assert_allclose(
                beam_norm[section][key], local_norm[section][key], rtol=1e-6, atol=1e-9
            )
    for key in ("min", "max", "num_items", "method", "fitted_on"):
        assert beam_norm[key] == local_norm[key], key
    n = local_norm["num_items"]
    assert train_features.shape[0] == n
    epsilon = beam_parameters["quantile_epsilon"]
    beam_q, local_q = beam_norm["quantile"], local_norm["quantile"]
    assert f"{epsilon:g} * num_items" in beam_q["sampling"]
    assert beam_q["sample_size"] == n and beam_q["num_quantiles"] == local_q["num_quantiles"]
    values = np.array(beam_q["values"])
    assert values.shape == np.array(local_q["values"]).shape
    errors = _quantile_rank_errors(values, train_features)
    assert errors.max() <= epsilon * n, errors.max()
    # The check can fail: reversed quantiles of a spread-out feature miss their ranks.
    spread = int(np.argmax(np.ptp(train_features, axis=0)))
    reversed_errors = _quantile_rank_errors(
        values[spread : spread + 1, ::-1], train_features[:, spread : spread + 1]
    )
    assert reversed_errors.max() > epsilon * n


@pytest.fixture(scope="module", params=[False, True], ids=["explicit", "clicks"])
def synthetic_pair(request, tmp_path_factory):
    """The local and the Beam conversion of the same synthetic data and seed."""
    root = tmp_path_factory.mktemp("synthetic")
    clicks = ["--simulate-clicks"] if request.param else []
    flags = [*SYNTHETIC, *clicks, "--seed", "3", "--shards", "2"]
    _convert(*flags, "--output", root / "local")
    _convert(
        *flags, "--output", root / "beam", "--runner", "DirectRunner",
        "--quantile-epsilon", EPSILON,
    )  # fmt: skip
    return root / "local", root / "beam"


def test_synthetic_lists_match_the_local_converter(synthetic_pair):
    local, beam_out = synthetic_pair
    _assert_same_lists(local, beam_out)
    assert sorted(os.listdir(beam_out)) == sorted(os.listdir(local))


def test_synthetic_manifests_agree(synthetic_pair):
    local, beam_out = synthetic_pair
    features = _letor_features(str(local / "source" / "train.txt"), 136)
    _assert_manifests_agree(_manifest(local), _manifest(beam_out), features)
    train = _manifest(beam_out)["splits"]["train"]
    # Merged from the per-list counts of the Beam workers, equal to the local ones above.
    assert sum(train["list_length_histogram"].values()) == train["num_lists"]
    assert sum(train["empty_list_length_histogram"].values()) == train["list_label_histogram"]["0"]
    entry = _manifest(beam_out)["splits"]["train"]["input"]
    assert entry.pop("bad_lines") == 0
    assert entry == _manifest(local)["splits"]["train"]["input"]


@pytest.mark.slow  # real data through Beam; fast: the synthetic pairs above, the same path
@pytest.mark.skipif(
    not os.path.isdir(os.path.join(MQ2008, "Fold1")),
    reason=f"MQ2008 is not at {MQ2008} (set TFR_DATA_DIR to the folder holding MQ2008/)",
)
def test_mq2008_fold1_matches_the_local_converter(tmp_path):
    flags = ["--input", MQ2008, "--fold", "1", "--simulate-clicks", "--seed", "1"]
    _convert(*flags, "--output", tmp_path / "local")
    _convert(*flags, "--output", tmp_path / "beam", "--runner", "DirectRunner")
    _assert_same_lists(tmp_path / "local", tmp_path / "beam")
    features = _letor_features(os.path.join(MQ2008, "Fold1", "train.txt"), 46)
    _assert_manifests_agree(_manifest(tmp_path / "local"), _manifest(tmp_path / "beam"), features)


def _gzip(path, lines) -> str:
    with gzip.open(path, "wt", encoding="ascii") as f:
        f.writelines(lines)
    return str(path)


def test_a_list_split_across_gz_files_is_one_list(tmp_path):
    first = [
        letor_line(2, 1, [0.5, 1, 3]),
        letor_line(0, 1, [0.1, 0, 2]),
        letor_line(1, 2, [1, 1, 1]),
    ]
    second = [letor_line(1, 1, [0.3, 2, 1]), letor_line(0, 3, [0.2, 0.5, 0])]
    shards = tmp_path / "shards"
    shards.mkdir()
    paths = [_gzip(shards / "train-0.txt.gz", first), _gzip(shards / "train-1.txt.gz", second)]
    # The local converter reads the same items with each list contiguous.
    write_lines(tmp_path / "whole" / "train.txt", [*first[:2], second[0], first[2], second[1]])
    _convert("--input", tmp_path / "whole", "--output", tmp_path / "local")
    _convert(
        "--runner", "DirectRunner", "--train-files", shards / "train-*.txt.gz",
        "--num-features", 3, "--max-relevance", 2, "--output", tmp_path / "beam",
    )  # fmt: skip
    lists = _lists(tmp_path / "beam", "train")
    assert lists == _lists(tmp_path / "local", "train")
    qid1 = [key for key in lists if key[0] == 1]
    assert len(qid1) == 1 and qid1[0][1] == (2.0, 0.0, 1.0)  # file order, then line order
    entry = _manifest(tmp_path / "beam")["splits"]["train"]
    assert (entry["num_lists"], entry["num_items"]) == (3, 5)
    # qid 1 joined from both files: 3 items; qid 2: 1 item; qid 3: 1 item with label 0.
    assert entry["list_length_histogram"] == {"1": 2, "3": 1}
    assert entry["empty_list_length_histogram"] == {"1": 1}
    assert entry["input"]["patterns"] == [str(shards / "train-*.txt.gz")]
    assert [f["path"] for f in entry["input"]["files"]] == paths
    for info, path in zip(entry["input"]["files"], paths):
        with open(path, "rb") as f:
            assert info["sha256"] == hashlib.sha256(f.read()).hexdigest()
        assert info["lines"] == 3 if path.endswith("0.txt.gz") else info["lines"] == 2


def _bad_input(tmp_path) -> str:
    lines = [
        letor_line(1, 1, [0.5, 0.1, 0.2]),
        "x qid:1 1:0.4 2:0.3 3:0.9\n",  # line 2: malformed label
        letor_line(0, 1, [0.4, 0.3, 0.9]),
        letor_line(7, 2, [0.7, 0.2, 0.1]),  # line 4: label above --max-relevance
        letor_line(2, 2, [0.1, 0.2, 0.3]),
    ]
    return write_lines(tmp_path / "in" / "train.txt", lines)


def _local_error(tmp_path, capsys, lines: list[str]) -> str:
    """The local converter's message for a file holding ``lines``."""
    path = write_lines(tmp_path / "one" / "train.txt", lines)
    flags = ["--input", os.path.dirname(path), "--output", str(tmp_path / "one_out")]
    assert main([*flags, "--max-relevance", "2", "--num-features", "3", "--no-progress"]) == 1
    return capsys.readouterr().err.split(f"{path}:1: ", 1)[1].strip()


def test_bad_lines_fail_the_run_and_go_to_the_dead_letter_file(tmp_path, capsys):
    path = _bad_input(tmp_path)
    out, dead = tmp_path / "out", tmp_path / "dead.txt"
    flags = ["--runner", "DirectRunner", "--input", tmp_path / "in", "--output", out]
    flags += ["--max-relevance", 2, "--bad-lines", dead, "--no-progress"]
    assert main(list(map(str, flags))) == 1
    err = capsys.readouterr().err
    assert "2 invalid line(s), more than --max-bad-lines 0" in err and str(dead) in err
    assert not out.exists()
    assert [p for p in os.listdir(tmp_path) if "partial" in p] == []
    rows = sorted(line.split("\t") for line in dead.read_text().splitlines())
    assert [(r[0], r[1]) for r in rows] == [(path, "2"), (path, "4")]
    # The local converter's messages for the same lines.
    assert rows[0][2] == _local_error(tmp_path, capsys, ["x qid:1 1:0.4 2:0.3 3:0.9\n"])
    assert rows[1][2] == _local_error(tmp_path, capsys, [letor_line(7, 2, [0.7, 0.2, 0.1])])


def test_enough_max_bad_lines_let_the_run_pass(tmp_path, capsys):
    _bad_input(tmp_path)
    out = tmp_path / "out"
    flags = ["--runner", "DirectRunner", "--input", tmp_path / "in", "--output", out]
    flags += ["--max-relevance", 2, "--max-bad-lines", 2, "--no-progress"]
    assert main(list(map(str, flags))) == 0
    assert "set aside 2 invalid line(s)" in capsys.readouterr().out
    train = _manifest(out)["splits"]["train"]
    assert train["input"]["bad_lines"] == 2
    assert (train["num_lists"], train["num_items"]) == (2, 3)
    assert len(open(f"{out}.bad_lines.txt").read().splitlines()) == 2


def test_beam_options_need_runner(tiny_dataset, tmp_path, capsys):
    flags = ["--input", str(tiny_dataset), "--output", str(tmp_path / "out")]
    with pytest.raises(SystemExit):
        main([*flags, "--project", "p"])
    assert "unrecognized arguments: --project p" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main([*flags, "--max-bad-lines", "3"])
    assert "--max-bad-lines need --runner" in capsys.readouterr().err


def test_runner_without_beam_says_how_to_install_it(tiny_dataset, tmp_path, capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "apache_beam", None)
    monkeypatch.setitem(sys.modules, "tfrecords_tools.beam.beam_convert", None)
    flags = ["--input", str(tiny_dataset), "--output", str(tmp_path / "out")]
    assert main([*flags, "--runner", "DirectRunner"]) == 1
    assert "pip install .[beam]" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_unsorted_and_repeated_indices_agree_with_the_local_converter(tmp_path):
    """TF-Ranking's LibSVM shape: shuffled indices, one repeated, the last value kept."""
    train = [
        "2 qid:1 3:0.3 1:0.1 2:0.2\n",
        "0 qid:1 2:0.5 2:0.7 1:0.4\n",  # repeated and unsorted
        "1 qid:2 1:1 2:2 3:3\n",
        "1 qid:2 3:0.1 1:0.9\n",
    ]
    write_lines(tmp_path / "in" / "train.txt", train)
    flags = ["--input", tmp_path / "in", "--duplicate-features", "last", "--max-relevance", 2]
    _convert(*flags, "--output", tmp_path / "local")
    _convert(*flags, "--output", tmp_path / "beam", "--runner", "DirectRunner")
    lists = _lists(tmp_path / "beam", "train")
    assert lists == _lists(tmp_path / "local", "train")
    assert (1, (2.0, 0.0), (2.0, 0.0), ((0.1, 0.2, 0.3), (0.4, 0.7, 0.0))) in {
        (q, y, r, tuple(tuple(round(v, 6) for v in f) for f in fs)) for q, y, r, fs in lists
    }
    local = _manifest(tmp_path / "local")["splits"]["train"]["input"]
    beam_entry = _manifest(tmp_path / "beam")["splits"]["train"]["input"]
    assert (local["unsorted_feature_lines"], local["duplicate_feature_lines"]) == (3, 1)
    assert beam_entry["unsorted_feature_lines"] == 3 and beam_entry["duplicate_feature_lines"] == 1
    # Lines 2 and 4 omit an index (3, then 2).
    assert local["items_with_missing_features"] == beam_entry["items_with_missing_features"] == 2
