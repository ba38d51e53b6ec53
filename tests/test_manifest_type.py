"""The typed ``Manifest``: one reader, one writer, and a lossless round trip.

Every converter path (LETOR folds, simulated clicks, text, Apache Beam) writes
through ``write_manifest``; what it writes reads back to the same manifest and
the same bytes. Bad manifests are refused naming the file and the field.
"""

from __future__ import annotations

import dataclasses
import json
import os

import pytest

from pipelines.convert_cli import main as convert_main
from tests.conftest import letor_line, write_lines
from tfr_rankformer.inputs import manifest as manifest_module
from tfr_rankformer.inputs.manifest import (
    MANIFEST_NAME,
    Manifest,
    SplitEntry,
    load_manifest,
    read_manifest,
    write_manifest,
)

SYNTHETIC = ["--input", "synthetic", "--synthetic-lists", "12", "--synthetic-list-size", "6"]
TEXT = ["--input", "synthetic-text", "--synthetic-lists", "8", "--synthetic-list-size", "4"]


@pytest.fixture
def written(monkeypatch):
    """Every manifest the one writer formats during the test, in order."""
    calls = []
    original = manifest_module.manifest_text

    def recording(manifest):
        calls.append(manifest)
        return original(manifest)

    monkeypatch.setattr(manifest_module, "manifest_text", recording)
    return calls


def _manifest_paths(root) -> list[str]:
    return sorted(
        os.path.join(folder, MANIFEST_NAME)
        for folder, _, names in os.walk(root)
        if MANIFEST_NAME in names
    )


def _convert(tmp_path, name: str, *flags) -> str:
    out = str(tmp_path / name)
    assert convert_main([*flags, "--output", out, "--no-progress"]) == 0
    return out


def _assert_written_by_the_writer(out: str, written: list[Manifest]) -> list[Manifest]:
    """Each manifest file of ``out`` is one the writer formatted, byte for byte, and
    reads back to it; its JSON object round-trips."""
    paths = _manifest_paths(out)
    assert paths and len(written) == len(paths)
    loaded = []
    for path in paths:
        with open(path, encoding="utf-8") as f:
            text = f.read()
        content = json.loads(text)
        manifest = read_manifest(path)
        assert manifest in written
        assert manifest.to_json() == content
        assert list(manifest.to_json()) == list(content)  # the key order too
        assert manifest_module.manifest_text(manifest) == text
        assert Manifest.from_json(content).to_json() == content
        loaded.append(manifest)
    return loaded


@pytest.mark.parametrize("clicks", [False, True], ids=["explicit", "clicks"])
def test_feature_vector_manifests_round_trip(tmp_path, written, clicks):
    flags = [*SYNTHETIC, *(["--simulate-clicks"] if clicks else [])]
    (manifest,) = _assert_written_by_the_writer(_convert(tmp_path, "out", *flags), written)
    assert manifest == load_manifest(str(tmp_path / "out"))
    assert not manifest.is_text and manifest.num_features == 136
    assert manifest.label_kind == ("simulated_implicit" if clicks else "explicit")
    assert manifest.label_levels == (manifest.clicks["purchase_label"] if clicks else 4)
    assert len(manifest.feature_names) == 136 and manifest.normalization["method"] == "quantile"
    train = manifest.split("train")
    assert isinstance(train, SplitEntry) and train.input_lists == 12
    assert manifest.longest_list == max(e.longest_list for e in manifest.splits.values())
    lengths = train.list_lengths(include_empty_lists=False)
    assert sum(lengths.values()) == train.num_lists - train.empty_lists
    (shard,) = manifest.split_files("d", "train")
    assert shard == os.path.join("d", "train-00000-of-00001.tfrecord")
    assert train.items_with_missing_features == 0


def test_text_manifest_round_trips(tmp_path, written):
    (manifest,) = _assert_written_by_the_writer(_convert(tmp_path, "text", *TEXT), written)
    assert manifest.is_text and manifest.num_features is None
    assert (manifest.query_feature, manifest.label_feature) == ("query_tokens", "relevance")
    assert set(manifest.extra) >= {"elwc", "tokenizer", "input"}
    assert {"documents_truncated", "lists_without_relevant"} <= set(manifest.filtered)
    assert all(type(count) is int for count in manifest.filtered.values())
    with pytest.raises(ValueError, match="'num_features' is missing"):
        load_manifest(str(tmp_path / "text"))  # the feature-vector reader refuses it


def test_every_fold_is_written_by_the_writer(tmp_path, written):
    for fold in (1, 2):
        for split in ("train", "test"):
            write_lines(
                tmp_path / "src" / f"Fold{fold}" / f"{split}.txt",
                [letor_line(q % 3, 10 * fold + q, [q, fold]) for q in range(4)],
            )
    flags = ["--input", str(tmp_path / "src"), "--folds", "all"]
    manifests = _assert_written_by_the_writer(_convert(tmp_path, "out", *flags), written)
    assert sorted(m.fold for m in manifests) == [1, 2]


def test_the_beam_converter_writes_through_the_writer(tmp_path, written):
    flags = [*SYNTHETIC, "--runner", "DirectRunner"]
    (manifest,) = _assert_written_by_the_writer(_convert(tmp_path, "beam", *flags), written)
    assert list(manifest.parameters)[-1] == "beam"


def _written_manifest(tmp_path, content) -> str:
    text = content if isinstance(content, str) else json.dumps(content)
    (tmp_path / MANIFEST_NAME).write_text(text, encoding="utf-8")
    return str(tmp_path / MANIFEST_NAME)


def _valid() -> dict:
    return {
        "num_features": 3,
        "max_relevance": 2,
        "splits": {"train": {"num_lists": 2, "files": {"train-00000-of-00001.tfrecord": 2}}},
    }


def _with(path: str, value) -> dict:
    """``_valid()`` with the value at the dotted ``path`` replaced (``...``: removed)."""
    content = _valid()
    *parents, key = path.split(".")
    place = content
    for parent in parents:
        place = place[parent]
    if value is ...:
        del place[key]
    else:
        place[key] = value
    return content


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (_with("num_features", ...), "the manifest's 'num_features' is missing or not a JSON"),
        (_with("num_features", "3"), "the manifest's 'num_features' is missing or not a JSON"),
        (_with("num_features", True), "the manifest's 'num_features' is missing or not a JSON"),
        (_with("splits", ...), "the manifest's 'splits' is missing or not a JSON object"),
        (_with("splits", []), "the manifest's 'splits' is missing or not a JSON object"),
        (_with("splits.train.files", ...), "split 'train' lists no 'files' object"),
        (_with("splits.train", 5), "split 'train' lists no 'files' object"),
        (_with("splits.train.num_lists", "2"), "'splits.train.num_lists' is not a JSON integer"),
        (_with("splits.train.files", {"a": 1.5}), "'splits.train.files' is not a JSON object of"),
        (_with("max_relevance", 2.0), "the manifest's 'max_relevance' is not a JSON integer"),
        (_with("feature_names", [1, 2, 3]), "'feature_names' is not a JSON array of strings"),
        (_with("normalization", [0]), "the manifest's 'normalization' is not a JSON object"),
        (_with("label_kind", 1), "the manifest's 'label_kind' is not a JSON string"),
        ([1, 2], "the manifest is not a JSON object"),
        ('{"num_features": 3,', "manifest.json:1:20: the manifest is not valid JSON"),
    ],
)
def test_bad_manifests_name_the_file_and_the_field(tmp_path, content, message):
    path = _written_manifest(tmp_path, content)
    with pytest.raises(ValueError, match="rerun tfr-convert") as raised:
        load_manifest(str(tmp_path))
    assert str(raised.value).startswith(path)
    assert message in str(raised.value)


def test_a_manifest_that_is_not_utf8_or_absent(tmp_path):
    (tmp_path / MANIFEST_NAME).write_bytes(b'{"a": "\xff"}')
    with pytest.raises(ValueError, match=r"manifest.json: the manifest is not UTF-8 text \(byte"):
        load_manifest(str(tmp_path))
    with pytest.raises(FileNotFoundError, match="holds no manifest.json"):
        load_manifest(str(tmp_path / "nowhere"))


def test_a_tolerant_read_checks_types_but_not_presence(tmp_path):
    manifest = read_manifest(_written_manifest(tmp_path, {"kind": "text"}), complete=False)
    assert manifest.is_text and manifest.splits == {} and manifest.to_json() == {"kind": "text"}
    path = _written_manifest(tmp_path, {"splits": {"train": [1]}})
    with pytest.raises(ValueError, match=r"'splits\.train' is not a JSON object"):
        read_manifest(path, complete=False)


def test_a_hand_made_dict_is_coerced_and_builds_a_model():
    import tensorflow as tf

    from tfr_rankformer.core.elwc_schema import FEATURES, MASK
    from tfr_rankformer.model.model_config import ModelConfig
    from tfr_rankformer.model.models import build_model

    minimal = {"num_features": 3, "normalization": {"method": "none"}}
    manifest = Manifest.coerce(minimal)
    assert manifest.to_json() == minimal and Manifest.coerce(manifest) is manifest
    assert Manifest.coerce({"max_relevance": 4}).label_levels == 4
    with pytest.raises(TypeError, match="not int"):
        Manifest.coerce(3)
    with pytest.raises(ValueError, match="manifest: the manifest's 'num_features' is not a"):
        Manifest.coerce({"num_features": "3"})
    model = build_model("rankformer", minimal, ModelConfig(num_layers=1), None)
    scores = model({FEATURES: tf.zeros([2, 4, 3]), MASK: tf.ones([2, 4], tf.bool)})["scores"]
    assert scores.shape == (2, 4)


def test_a_manifest_is_read_only_and_replace_keeps_the_key_order(tmp_path):
    manifest = Manifest.from_json({"seed": 1, "note": "kept", **_valid()})
    with pytest.raises(dataclasses.FrozenInstanceError):
        manifest.num_features = 4
    with pytest.raises(TypeError):
        manifest.splits["train"].files["x"] = 1
    assert manifest.extra == {"note": "kept"}
    changed = dataclasses.replace(manifest, seed=2, label_kind="explicit")
    assert list(changed.to_json()) == [*manifest.to_json(), "label_kind"]
    assert changed.to_json()["seed"] == 2
    path = write_manifest(str(tmp_path), changed)
    assert read_manifest(path) == changed
    built = Manifest(num_features=2, splits={"train": {"files": {"a": 1}}})
    assert built.to_json() == {"num_features": 2, "splits": {"train": {"files": {"a": 1}}}}


def test_a_text_directory_without_a_manifest_still_loads(tmp_path):
    from tfr_rankformer.text.text_data import load_text_data
    from tfr_rankformer.training.text_config import TextConfig

    (tmp_path / "train-00000-of-00001.tfrecord").write_bytes(b"")
    data = load_text_data(str(tmp_path), TextConfig())
    assert data.files == {"train": [str(tmp_path / "train-00000-of-00001.tfrecord")]}
    assert (data.query_feature, data.document_feature) == ("query_tokens", "document_tokens")
    _written_manifest(tmp_path, {"kind": "text", "query_feature": "q", "splits": {}})
    assert load_text_data(str(tmp_path), TextConfig()).query_feature == "q"
    _written_manifest(tmp_path, _valid())
    with pytest.raises(ValueError, match="describes feature-vector lists"):
        load_text_data(str(tmp_path), TextConfig())
