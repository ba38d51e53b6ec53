"""``tfr-convert --input elwc:...``: TF-Ranking-style ELWC into the project's layout.

The records are written here with ``tf.train`` protos the way TF-Ranking's
examples write them: one float feature per name (``custom_features_1`` ...),
an int64 ``relevance`` label per item, and context features of their own.
"""

from __future__ import annotations

import collections
import json
import os

import numpy as np
import pytest
import tensorflow as tf
from tensorflow_serving.apis import input_pb2

from pipelines.convert_cli import main as convert_main  # noqa: E402
from pipelines.train_cli import main as train_main  # noqa: E402
from tfrecords_tools.datasets import DatasetNotFoundError  # noqa: E402
from tfrecords_tools.elwc_input import ElwcConfig, elwc_split_files, resolve_feature_names  # noqa: E402

D = 5
FEATURES = f"custom_features_{{1..{D}}}"


def _item(values: dict, relevance) -> tf.train.Example:
    feature = {
        k: tf.train.Feature(float_list=tf.train.FloatList(value=[v])) for k, v in values.items()
    }
    if relevance is not None:
        feature["relevance"] = tf.train.Feature(int64_list=tf.train.Int64List(value=[relevance]))
    return tf.train.Example(features=tf.train.Features(feature=feature))


def _elwc(items: list[tf.train.Example], context: dict | None = None) -> bytes:
    elwc = input_pb2.ExampleListWithContext(examples=items)
    for name, feature in (context or {}).items():
        elwc.context.features.feature[name].CopyFrom(feature)
    return elwc.SerializeToString()


def _write(path, records: list[bytes]) -> str:
    with tf.io.TFRecordWriter(str(path)) as writer:
        for record in records:
            writer.write(record)
    return str(path)


def _lists(rng, num_lists: int, *, drop_feature: bool = False) -> tuple[list[bytes], list]:
    """Records, and per list its [n, D] features (missing as 0) and labels."""
    records, expected = [], []
    for q in range(num_lists):
        n = int(rng.integers(2, 6))
        values = rng.normal(size=(n, D)).astype(np.float32)
        labels = rng.integers(0, 3, size=n)
        items = []
        for i in range(n):
            row = {f"custom_features_{j + 1}": float(values[i, j]) for j in range(D)}
            row["other_feature"] = 1.0  # not asked for: reported as unused
            if drop_feature and i == 0:
                del row["custom_features_3"]
                values[i, 2] = 0.0
            items.append(_item(row, int(labels[i])))
        context = {
            "query_id": tf.train.Feature(int64_list=tf.train.Int64List(value=[100 + q])),
            "query_tokens": tf.train.Feature(bytes_list=tf.train.BytesList(value=[b"a", b"b"])),
        }
        records.append(_elwc(items, context))
        expected.append((100 + q, values, labels))
    return records, expected


@pytest.fixture(scope="module")
def elwc_dir(tmp_path_factory):
    root = tmp_path_factory.mktemp("elwc")
    rng = np.random.default_rng(0)
    expected = {}
    for split, count in (("train", 40), ("vali", 8), ("test", 8)):
        records, expected[split] = _lists(rng, count, drop_feature=split == "train")
        _write(root / f"{split}_numerical_elwc.tfrecord", records)
    return root, expected


def _read_output(directory, split: str) -> list:
    names = sorted(n for n in os.listdir(directory) if n.startswith(f"{split}-"))
    out = []
    for record in tf.data.TFRecordDataset([os.path.join(directory, n) for n in names]):
        elwc = input_pb2.ExampleListWithContext.FromString(record.numpy())
        items = [e.features.feature for e in elwc.examples]
        out.append(
            (
                elwc.context.features.feature["qid"].int64_list.value[0],
                np.array([list(f["features"].float_list.value) for f in items], np.float32),
                [f["relevance"].float_list.value[0] for f in items],
                list(elwc.context.features.feature["query_tokens"].bytes_list.value),
            )
        )
    return out


@pytest.fixture(scope="module")
def converted(elwc_dir, tmp_path_factory):
    root, _ = elwc_dir
    out = tmp_path_factory.mktemp("converted") / "data"
    flags = ["--input", f"elwc:{root}", "--output", str(out), "--no-progress"]
    flags += ["--elwc-features", "custom_features_*", "--elwc-qid", "query_id"]
    flags += ["--elwc-context", "query_tokens"]
    assert convert_main(flags) == 0
    return out


def test_elwc_converts_to_the_layout(elwc_dir, converted):
    _, expected = elwc_dir
    out = converted
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["num_features"] == D and manifest["max_relevance"] == 2
    assert manifest["feature_names"] == [f"custom_features_{j}" for j in range(1, D + 1)]
    assert manifest["source"]["kind"] == "elwc"
    assert manifest["elwc"]["context"]["query_tokens"]["dtype"] == "string"
    train = manifest["splits"]["train"]
    assert train["num_lists"] == 40
    assert train["input"]["missing_feature_values"] == 40  # one per train list
    assert train["input"]["items_with_missing_features"] == 40
    assert train["input"]["unused_item_features"] == ["other_feature"]
    assert manifest["splits"]["test"]["input"]["missing_feature_values"] == 0
    assert manifest["normalization"]["num_items"] == train["num_items"]

    got = _read_output(out, "train")
    assert [g[0] for g in got] == [e[0] for e in expected["train"]]
    # Items per written list, of every list and of those whose highest label is 0.
    lengths = collections.Counter(len(g[2]) for g in got)
    empty = collections.Counter(len(g[2]) for g in got if max(g[2]) == 0)
    assert train["list_length_histogram"] == {str(n): c for n, c in lengths.items()}
    assert train["empty_list_length_histogram"] == {str(n): c for n, c in empty.items()}
    for (_, features, relevance, tokens), (_, values, labels) in zip(got, expected["train"]):
        np.testing.assert_array_equal(features, values)
        assert relevance == labels.tolist()
        assert tokens == [b"a", b"b"]


def test_rankformer_trains_on_converted_elwc(converted, tmp_path):
    out = converted
    model_dir = tmp_path / "run"
    train_flags = ["--model", "rankformer", "--data", str(out), "--model-dir", str(model_dir)]
    train_flags += ["--epochs", "1", "--batch-size", "16", "--quiet", "--no-export"]
    train_flags += ["--num-layers", "1", "--ff-dim", "32", "--head-hidden", "16"]  # small
    assert train_main(train_flags) == 0
    metrics = json.loads((model_dir / "metrics.json").read_text())
    assert np.isfinite(metrics["test"]["ndcg_r@10"])


def test_gbdt_trains_on_converted_elwc(converted, tmp_path):
    model_dir = tmp_path / "gbdt"
    flags = ["--model", "gbdt-1k", "--data", str(converted), "--model-dir", str(model_dir)]
    flags += ["--trees", "5", "--lgb-param", "min_data_in_leaf=2", "--num-threads", "1"]
    assert train_main(flags) == 0
    metrics = json.loads((model_dir / "metrics.json").read_text())
    assert np.isfinite(metrics["test"]["ndcg_r@10"])


def test_explicit_splits_and_a_range(elwc_dir, tmp_path):
    root, expected = elwc_dir
    out = tmp_path / "data"
    spec = f"elwc:train={root}/train_*.tfrecord,test={root}/test_*.tfrecord"
    flags = ["--input", spec, "--output", str(out), "--no-progress"]
    assert convert_main([*flags, "--elwc-features", "custom_features_{5..1}"]) == 0
    manifest = json.loads((out / "manifest.json").read_text())
    assert sorted(manifest["splits"]) == ["test", "train"]
    got = _read_output_without_context(out, "test")
    # Lists are numbered per split without --elwc-qid; the range reverses the columns.
    assert [g[0] for g in got] == list(range(1, 9))
    np.testing.assert_array_equal(got[0][1], expected["test"][0][1][:, ::-1])


def _read_output_without_context(directory, split):
    names = sorted(n for n in os.listdir(directory) if n.startswith(f"{split}-"))
    out = []
    for record in tf.data.TFRecordDataset([os.path.join(directory, n) for n in names]):
        elwc = input_pb2.ExampleListWithContext.FromString(record.numpy())
        features = [list(e.features.feature["features"].float_list.value) for e in elwc.examples]
        out.append((elwc.context.features.feature["qid"].int64_list.value[0], np.array(features)))
    return out


def _bad_case(tmp_path, records: list[bytes], *extra: str) -> str:
    root = tmp_path / "bad"
    root.mkdir()
    _write(root / "train.tfrecord", records)
    out = tmp_path / "out"
    flags = ["--input", f"elwc:{root}", "--output", str(out), "--no-progress"]
    assert convert_main([*flags, "--elwc-features", FEATURES, *extra]) == 1
    assert not out.exists()
    assert not [n for n in os.listdir(tmp_path) if "partial" in n]
    return str(root / "train.tfrecord")


def _good_items(n: int = 2) -> list:
    return [_item({f"custom_features_{j}": 0.5 for j in range(1, D + 1)}, 1) for _ in range(n)]


def _bytes_feature() -> dict:
    return {"custom_features_2": tf.train.Feature(bytes_list=tf.train.BytesList(value=[b"x"]))}


BAD_RECORDS = [
    pytest.param(
        lambda: _elwc([_item({"custom_features_1": 1.0}, None)]),
        "record 2, item 1, feature 'relevance': the item has no label feature",
        id="no-label",
    ),
    pytest.param(
        lambda: _elwc([_item({"custom_features_1": float("nan")}, 1)]),
        "record 2, item 1, feature 'custom_features_1': value is NaN or infinite",
        id="nan",
    ),
    pytest.param(
        lambda: _elwc([*_good_items(), _item({}, -1)]),
        "record 2, item 3, feature 'relevance': label must be one non-negative integer",
        id="negative-label",
    ),
    pytest.param(
        lambda: _elwc([tf.train.Example(features=tf.train.Features(feature=_bytes_feature()))]),
        "record 2, item 1, feature 'custom_features_2': holds bytes",
        id="bytes-feature",
    ),
    pytest.param(
        lambda: b"\xff\xff\xff", "record 2: not an ExampleListWithContext", id="not-proto"
    ),
    pytest.param(lambda: _elwc([]), "record 2: the list has no items", id="empty-list"),
]


@pytest.mark.parametrize("make_record, message", BAD_RECORDS)
def test_bad_record_names_file_record_item_and_field(tmp_path, capsys, make_record, message):
    path = _bad_case(tmp_path, [_elwc(_good_items()), make_record()])
    err = capsys.readouterr().err
    assert f"tfr-convert: error: {path}: {message}" in err


def test_truncated_file_is_reported(tmp_path, capsys):
    root = tmp_path / "src"
    root.mkdir()
    path = _write(root / "train.tfrecord", [_elwc(_good_items()), _elwc(_good_items())])
    with open(path, "rb+") as f:
        f.truncate(os.path.getsize(path) - 3)
    out = tmp_path / "out"
    flags = ["--input", f"elwc:{root}", "--output", str(out), "--elwc-features", FEATURES]
    assert convert_main(flags) == 1
    assert f"{path}: record 2: truncated record" in capsys.readouterr().err


def test_feature_patterns_and_split_names(tmp_path):
    names = {f"custom_features_{j}" for j in (1, 2, 10)} | {"x"}
    assert resolve_feature_names(("custom_features_*",), names) == [
        "custom_features_1",
        "custom_features_2",
        "custom_features_10",
    ]
    assert resolve_feature_names(("x", "f_{2..3}"), names) == ["x", "f_2", "f_3"]
    with pytest.raises(ValueError, match="matches no item feature"):
        resolve_feature_names(("nope_*",), names)
    with pytest.raises(ValueError, match="twice"):
        resolve_feature_names(("x", "x"), names)
    with pytest.raises(ValueError, match="--elwc-features"):
        resolve_feature_names((), names)
    for name in ("train-00000-of-00002", "eval_elwc.tfrecord", "test.tfrecord", "notes.txt"):
        (tmp_path / name).write_bytes(b"")
    assert elwc_split_files(f"elwc:{tmp_path}") == {
        "train": [str(tmp_path / "train-00000-of-00002")],
        "vali": [str(tmp_path / "eval_elwc.tfrecord")],
        "test": [str(tmp_path / "test.tfrecord")],
    }
    with pytest.raises(DatasetNotFoundError, match="notes.txt matches"):
        elwc_split_files(f"elwc:{tmp_path}/*")
    assert ElwcConfig(features="a, b", context="c").features == ("a", "b")


def test_beam_runner_refuses_elwc_input(elwc_dir, tmp_path, capsys):
    root, _ = elwc_dir
    flags = ["--input", f"elwc:{root}", "--output", str(tmp_path / "out"), "--no-progress"]
    flags += ["--elwc-features", FEATURES, "--runner", "DirectRunner"]
    assert convert_main(flags) == 1
    assert "convert an elwc: input without --runner" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()
