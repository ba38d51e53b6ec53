"""``--input tfds:NAME``: reading TFDS ranking datasets (mslr_web, istella, yahoo_ltrc).

Nothing is downloaded: the "not prepared" and "unknown name" cases use an empty
TFDS data directory, and the conversions run under ``tfds.testing.mock_data``
with a hand-made ``as_dataset_fn`` (``download_and_prepare`` is then a no-op),
so every list, label and feature written can be checked against what was fed.
"""

from __future__ import annotations

import contextlib
import json
import math

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_datasets as tfds
from tensorflow_serving.apis import input_pb2

from pipelines.convert_cli import main
from tfrecords_tools.convert import ConvertConfig, convert
from tfrecords_tools.datasets import DatasetNotFoundError
from tfrecords_tools.letor.letor_parser import LetorFormatError

NAME = "mslr_web/10k_fold1"
NUM_FEATURES = 136  # mslr_web's float_features width

# Per split, the lists fed through the mock: (query id, labels). Every split
# differs (query ids, sizes, labels), so a split written to the wrong file shows.
LISTS = {
    "train": [("10", [0, 1, 4]), ("11", [2, 2, 0, 3, 1]), ("12", [4, 0])],
    "vali": [("20", [1, 0, 0, 3]), ("21", [2])],
    "test": [("30", [3, 4, 0, 0, 1, 2])],
}

_SIGNATURE = {
    "float_features": tf.TensorSpec([None, NUM_FEATURES], tf.float64),
    "label": tf.TensorSpec([None], tf.float64),
    "query_id": tf.TensorSpec([], tf.string),
    "doc_id": tf.TensorSpec([None], tf.int64),
}


def _examples(lists: dict, seed: int = 0) -> dict:
    """TFDS-shaped examples per split: one dict per query, as the ranking builders yield."""
    rng = np.random.default_rng(seed)
    out = {}
    for split, queries in lists.items():
        out[split] = [
            {
                "float_features": rng.normal(scale=10.0, size=(len(labels), NUM_FEATURES)),
                "label": np.asarray(labels, dtype=np.float64),
                "query_id": qid,
                "doc_id": np.arange(len(labels), dtype=np.int64) + 1000 * (i + 1),
            }
            for i, (qid, labels) in enumerate(queries)
        ]
    return out


@contextlib.contextmanager
def _mock_tfds(examples: dict):
    """Mocks TFDS so that every builder yields ``examples[split]``; yields the calls seen."""
    calls = []

    # mock_data patches FileReaderBuilder._as_dataset, which TFDS calls as
    # ``self._as_dataset(split=..., shuffle_files=..., decoders=..., read_config=...)``.
    def as_dataset_fn(self, *, split, **kwargs):
        calls.append({"builder": self.name, "config": self.builder_config.name, "split": split})
        split_examples = examples[str(split)]
        return tf.data.Dataset.from_generator(
            lambda: iter(split_examples), output_signature=_SIGNATURE
        )

    with tfds.testing.mock_data(as_dataset_fn=as_dataset_fn):
        yield calls


def _read_elwc(path) -> list:
    records = tf.data.TFRecordDataset(str(path)).as_numpy_iterator()
    return [input_pb2.ExampleListWithContext.FromString(r) for r in records]


def _floats(example, name: str) -> np.ndarray:
    return np.asarray(example.features.feature[name].float_list.value, dtype=np.float32)


def _assert_nothing_written(out) -> None:
    assert not out.exists()
    leftovers = [p.name for p in out.parent.iterdir() if p.name.startswith(f".{out.name}.partial")]
    assert leftovers == []


# --- not prepared / unknown names (real TFDS, empty data directory) --------------------


def test_not_prepared_without_download_raises(tmp_path):
    out = tmp_path / "out"
    config = ConvertConfig(
        input=f"tfds:{NAME}", output=str(out), data_dir=str(tmp_path / "tfds"), tfds_download=False
    )
    with pytest.raises(DatasetNotFoundError) as excinfo:
        convert(config, progress=False)
    message = str(excinfo.value)
    assert f"tfds:{NAME}" in message
    assert "not prepared" in message
    assert "--tfds-download" in message
    assert str(tmp_path / "tfds") in message  # says where it looked
    _assert_nothing_written(out)


def test_not_prepared_cli_fails_with_message(tmp_path, capsys):
    out = tmp_path / "out"
    argv = ["--input", f"tfds:{NAME}", "--output", str(out), "--data-dir", str(tmp_path / "tfds")]
    assert main([*argv, "--no-progress"]) != 0
    captured = capsys.readouterr()
    assert "not prepared" in captured.err
    assert "--tfds-download" in captured.err
    assert "wrote" not in captured.out
    _assert_nothing_written(out)


@pytest.mark.parametrize("name", ["no_such_dataset_xyz", "mslr_web/no_such_config"])
def test_unknown_tfds_name_raises(tmp_path, name):
    out = tmp_path / "out"
    config = ConvertConfig(
        input=f"tfds:{name}", output=str(out), data_dir=str(tmp_path / "tfds"), tfds_download=True
    )
    with pytest.raises(DatasetNotFoundError, match="not a tensorflow-datasets dataset") as excinfo:
        convert(config, progress=False)
    assert f"tfds:{name}" in str(excinfo.value)
    _assert_nothing_written(out)


def test_unknown_tfds_name_cli(tmp_path, capsys):
    out = tmp_path / "out"
    code = main(["--input", "tfds:no_such_dataset_xyz", "--output", str(out), "--no-progress"])
    assert code != 0
    err = capsys.readouterr().err
    assert "tfds:no_such_dataset_xyz" in err
    assert "not a tensorflow-datasets dataset" in err
    assert not out.exists()


# --- mocked TFDS data -------------------------------------------------------------------


def test_mocked_dataset_converts_to_elwc(tmp_path):
    examples = _examples(LISTS)
    out = tmp_path / "out"
    config = ConvertConfig(
        input=f"tfds:{NAME}", output=str(out), data_dir=str(tmp_path / "tfds"), tfds_download=True
    )
    with _mock_tfds(examples) as calls:
        manifests = convert(config, progress=False)

    # Each split was read once, from the named builder and config.
    assert sorted(c["split"] for c in calls) == sorted(LISTS)
    assert {(c["builder"], c["config"]) for c in calls} == {("mslr_web", "10k_fold1")}

    manifest = json.loads((out / "manifest.json").read_text())
    assert [m.to_json() for m in manifests] == [manifest]
    assert manifest["num_features"] == NUM_FEATURES
    assert len(manifest["feature_names"]) == NUM_FEATURES
    assert manifest["max_relevance"] == 4
    assert manifest["source"]["kind"] == "tfds"
    assert manifest["source"]["input"] == f"tfds:{NAME}"
    assert manifest["label_kind"] == "explicit"
    assert set(manifest["splits"]) == set(LISTS)

    for split, queries in LISTS.items():
        entry = manifest["splits"][split]
        all_labels = [label for _, labels in queries for label in labels]
        assert entry["num_lists"] == entry["input_lists"] == len(queries)
        assert entry["num_items"] == entry["input_items"] == len(all_labels)
        histogram = {str(k): all_labels.count(k) for k in sorted(set(all_labels))}
        assert entry["label_histogram"] == histogram
        assert entry["relevance_histogram"] == histogram
        assert entry["items_dropped"] == {} and entry["lists_dropped"] == {}
        assert entry["input"]["tfds"] == NAME
        assert entry["input"]["tfds_split"] == split
        file_name = f"{split}-00000-of-00001.tfrecord"
        assert entry["files"] == {file_name: len(queries)}

        # The split's file holds exactly its lists, in order, as ELWC.
        records = _read_elwc(out / file_name)
        assert len(records) == len(queries)
        for elwc, fed in zip(records, examples[split]):
            qid = elwc.context.features.feature["qid"].int64_list.value
            assert list(qid) == [int(fed["query_id"])]
            assert len(elwc.examples) == len(fed["label"])
            for item, example in enumerate(elwc.examples):
                features = _floats(example, "features")
                assert features.shape == (NUM_FEATURES,)
                want = fed["float_features"][item].astype(np.float32)
                np.testing.assert_array_equal(features, want)
                assert _floats(example, "label").tolist() == [fed["label"][item]]
                assert _floats(example, "relevance").tolist() == [fed["label"][item]]

    # The normalisation statistics were fitted on the train features only.
    assert manifest["normalization"] is not None


def test_mocked_dataset_through_cli(tmp_path, capsys):
    examples = _examples(LISTS, seed=1)
    out = tmp_path / "out"
    argv = ["--input", f"tfds:{NAME}", "--output", str(out), "--data-dir", str(tmp_path / "tfds")]
    with _mock_tfds(examples) as calls:
        # mock_data leaves the dataset unprepared: without the flag, nothing is read.
        assert main([*argv, "--no-progress"]) != 0
        assert "--tfds-download" in capsys.readouterr().err
        assert calls == []
        assert not out.exists()

        assert main([*argv, "--tfds-download", "--no-progress"]) == 0
    stdout = capsys.readouterr().out
    assert "train 3 lists / 10 items" in stdout
    assert "vali 2 lists / 5 items" in stdout
    assert "test 1 lists / 6 items" in stdout
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["parameters"]["tfds_download"] is True
    assert manifest["source"]["kind"] == "tfds"


@pytest.mark.parametrize(
    "bad_label, reason",
    [(0.5, "non-negative integers"), (2.25, "non-negative integers"), (-1.0, "non-negative")],
)
def test_mocked_non_integer_labels_fail(tmp_path, bad_label, reason):
    lists = {
        split: [(q, list(map(float, labels))) for q, labels in queries]
        for split, queries in LISTS.items()
    }
    lists["train"][1][1][2] = bad_label  # the second list of train
    out = tmp_path / "out"
    config = ConvertConfig(
        input=f"tfds:{NAME}", output=str(out), data_dir=str(tmp_path / "tfds"), tfds_download=True
    )
    with _mock_tfds(_examples(lists)), pytest.raises(LetorFormatError) as excinfo:
        convert(config, progress=False)
    error = excinfo.value
    assert f"tfds:{NAME}" in str(error)
    assert error.path == f"tfds:{NAME}[train]"
    assert error.line == 6  # the item's position in the split: 3 items, then the third of 5
    assert "list 2, qid 11" in error.message
    assert reason in error.message
    assert repr(bad_label) in str(error)
    _assert_nothing_written(out)


def test_mocked_label_above_max_relevance_fails(tmp_path):
    lists = dict(LISTS)
    lists["vali"] = [("20", [1, 0, 0, 3]), ("21", [2, 5])]  # mslr_web's labels stop at 4
    out = tmp_path / "out"
    config = ConvertConfig(
        input=f"tfds:{NAME}", output=str(out), data_dir=str(tmp_path / "tfds"), tfds_download=True
    )
    with _mock_tfds(_examples(lists)), pytest.raises(LetorFormatError) as excinfo:
        convert(config, progress=False)
    assert f"tfds:{NAME}" in str(excinfo.value)
    assert "maximum relevance 4" in str(excinfo.value)
    assert excinfo.value.path == f"tfds:{NAME}[vali]"
    assert excinfo.value.line == 6  # items are numbered across the split: 4 + 2
    _assert_nothing_written(out)


def test_mocked_non_finite_feature_fails(tmp_path):
    examples = _examples(LISTS)
    examples["test"][0]["float_features"][3, 17] = math.nan
    out = tmp_path / "out"
    config = ConvertConfig(
        input=f"tfds:{NAME}", output=str(out), data_dir=str(tmp_path / "tfds"), tfds_download=True
    )
    with _mock_tfds(examples), pytest.raises(LetorFormatError, match="NaN or infinite") as excinfo:
        convert(config, progress=False)
    assert excinfo.value.path == f"tfds:{NAME}[test]"
    assert excinfo.value.line == 4  # the fourth item of the split's first list
    _assert_nothing_written(out)


def test_non_ranking_dataset_is_refused_before_any_download(tmp_path):
    out = tmp_path / "out"
    config = ConvertConfig(
        input="tfds:mnist", output=str(out), data_dir=str(tmp_path / "tfds"), tfds_download=True
    )
    with pytest.raises(DatasetNotFoundError, match="not a learning-to-rank dataset"):
        convert(config, progress=False)
    assert not (tmp_path / "tfds").exists()
    _assert_nothing_written(out)


def test_query_ids_that_are_not_integers(tmp_path):
    lists = dict(LISTS)
    lists["train"] = [("--5", [0, 1]), ("abc", [1]), ("7", [2, 0])]
    out = tmp_path / "out"
    config = ConvertConfig(
        input=f"tfds:{NAME}", output=str(out), data_dir=str(tmp_path / "tfds"), tfds_download=True
    )
    with _mock_tfds(_examples(lists)):
        convert(config, progress=False)
    records = _read_elwc(out / "train-00000-of-00001.tfrecord")
    qids = sorted(r.context.features.feature["qid"].int64_list.value[0] for r in records)
    assert qids == [-2, -1, 7]  # non-numeric ids become minus the list number


def test_repeated_query_id_fails(tmp_path):
    lists = dict(LISTS)
    lists["train"] = [("4", [0, 1]), ("5", [1]), ("4", [2, 0])]
    out = tmp_path / "out"
    config = ConvertConfig(
        input=f"tfds:{NAME}", output=str(out), data_dir=str(tmp_path / "tfds"), tfds_download=True
    )
    with _mock_tfds(_examples(lists)), pytest.raises(LetorFormatError, match="qid 4 appears again"):
        convert(config, progress=False)
    _assert_nothing_written(out)
