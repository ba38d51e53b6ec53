"""The manifest's list-length histograms agree with the lists actually written.

``list_length_histogram`` counts every written list by its number of items,
``empty_list_length_histogram`` only those whose list label (highest label)
is 0; training plans length-bucketed batches and steps per epoch from them.
"""

from __future__ import annotations

import collections
import json
import os

import pytest
import tensorflow as tf
from tensorflow_serving.apis import input_pb2

from pipelines.convert_cli import main
from tfrecords_tools.convert import ConvertConfig, convert
from tfrecords_tools.synthetic import SyntheticConfig, generate_letor


def _manifest(directory) -> dict:
    with open(os.path.join(directory, "manifest.json"), encoding="utf-8") as f:
        return json.load(f)


def _histogram(values) -> dict:
    counts = collections.Counter(values)
    return {str(k): counts[k] for k in sorted(counts)}


def _written(directory, files) -> list[tuple[int, float]]:
    """``(items, list label)`` of every list in the split's files."""
    lists = []
    for name in files:
        for record in tf.data.TFRecordDataset(os.path.join(directory, name)):
            elwc = input_pb2.ExampleListWithContext.FromString(record.numpy())
            labels = [e.features.feature["label"].float_list.value[0] for e in elwc.examples]
            lists.append((len(labels), max(labels)))
    return lists


def assert_length_histograms_match_the_records(directory) -> dict:
    """Checks every split of ``directory``'s manifest; returns the manifest."""
    manifest = _manifest(directory)
    for split, entry in manifest["splits"].items():
        lengths = entry["list_length_histogram"]
        empty = entry["empty_list_length_histogram"]
        assert sum(lengths.values()) == entry["num_lists"], split
        assert sum(int(n) * c for n, c in lengths.items()) == entry["num_items"], split
        assert sum(empty.values()) == entry["list_label_histogram"].get("0", 0), split
        assert all(c <= lengths[n] for n, c in empty.items()), split
        if entry["num_lists"]:
            assert max(int(n) for n in lengths) == entry["longest_list"], split
        written = _written(directory, entry["files"])
        assert lengths == _histogram(n for n, _ in written), split
        assert empty == _histogram(n for n, t in written if t == 0), split
    return manifest


def test_plain_letor_lists(tiny_dataset, tmp_path):
    out = tmp_path / "out"
    assert main(["--input", str(tiny_dataset), "--output", str(out), "--no-progress"]) == 0
    splits = assert_length_histograms_match_the_records(out)["splits"]
    assert splits["train"]["list_length_histogram"] == {"2": 1, "3": 1, "4": 1}
    assert splits["train"]["empty_list_length_histogram"] == {"2": 1}
    assert splits["vali"]["list_length_histogram"] == {"2": 1}
    assert splits["vali"]["empty_list_length_histogram"] == {}


def test_simulated_click_lists(tiny_dataset, tmp_path):
    out = tmp_path / "out"
    args = ["--input", str(tiny_dataset), "--output", str(out), "--simulate-clicks"]
    assert main([*args, "--bootstraps", "5", "--sample-size", "3", "--no-progress"]) == 0
    train = assert_length_histograms_match_the_records(out)["splits"]["train"]
    # min(|J|, N_s) items per simulated list: qid 2 has two items, the others three or more.
    assert train["list_length_histogram"] == {"2": 5, "3": 10}
    assert train["num_lists"] == 15


@pytest.fixture(scope="module")
def synthetic_source(tmp_path_factory):
    root = tmp_path_factory.mktemp("synthetic")
    config = SyntheticConfig(
        train_queries=60, vali_queries=10, test_queries=10, mean_list_size=30, seed=7
    )
    generate_letor(str(root), config)
    return root


@pytest.mark.parametrize(
    "settings",
    [
        dict(simulate_clicks=False),
        dict(simulate_clicks=False, max_list_size=25, min_list_size=12),
        dict(simulate_clicks=True, workers=2, chunk_bytes=100_000, shards=2),
    ],
    ids=["plain", "subsampled", "clicks-in-blocks"],
)
def test_synthetic_lists_in_every_way_of_writing(synthetic_source, tmp_path, settings):
    config = ConvertConfig(
        input=str(synthetic_source),
        output=str(tmp_path / "out"),
        seed=1,
        num_features=136,
        max_relevance=4,
        **{"workers": 1, **settings},
    )
    convert(config, progress=False)
    train = assert_length_histograms_match_the_records(tmp_path / "out")["splits"]["train"]
    if settings.get("max_list_size"):
        assert set(train["list_length_histogram"]) <= {str(n) for n in range(12, 26)}
        assert train["lists_dropped"]["min_list_size"] > 0
    else:
        assert train["empty_list_length_histogram"]  # some lists hold no relevant item


def test_web30k_spread_from_the_command_line(tmp_path):
    out = tmp_path / "syn"
    args = ["--input", "synthetic", "--output", str(out), "--no-progress"]
    args += ["--synthetic-lists", "60", "--synthetic-list-size", "12"]
    assert main([*args, "--synthetic-length-spread", "web30k"]) == 0
    manifest = assert_length_histograms_match_the_records(out)
    assert manifest["parameters"]["synthetic"]["length_spread"] == "web30k"
    lengths = [
        int(n) for split in manifest["splits"].values() for n in split["list_length_histogram"]
    ]
    # Within 1 and round(12 x 1251 / 120) = 125; lists of one item are written too.
    assert min(lengths) >= 1 and max(lengths) <= 125
