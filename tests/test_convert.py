"""``tfr-convert`` end to end: outputs, manifest, determinism, options."""

from __future__ import annotations

import gzip
import json
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf
from tensorflow_serving.apis import input_pb2

from pipelines.convert_cli import main
from tests.conftest import letor_line, write_lines
from tfrecords_tools.convert import ConvertConfig, convert
from tfrecords_tools.synthetic import SyntheticConfig, generate_letor


def _manifest(directory):
    with open(os.path.join(directory, "manifest.json"), encoding="utf-8") as f:
        return json.load(f)


def _read(path):
    return [
        input_pb2.ExampleListWithContext.FromString(r.numpy())
        for r in tf.data.TFRecordDataset(str(path))
    ]


def _shard_bytes(directory):
    return {
        name: open(os.path.join(directory, name), "rb").read()
        for name in sorted(os.listdir(directory))
        if name.endswith(".tfrecord")
    }


def _items(elwc):
    rows = []
    for example in elwc.examples:
        f = example.features.feature
        rows.append(
            (
                list(f["features"].float_list.value),
                f["label"].float_list.value[0],
                f["relevance"].float_list.value[0],
            )
        )
    return rows


def test_plain_conversion_keeps_every_item(tiny_dataset, tmp_path):
    out = tmp_path / "out"
    assert main(["--input", str(tiny_dataset), "--output", str(out), "--no-progress"]) == 0
    manifest = _manifest(out)
    assert manifest["num_features"] == 3 and manifest["max_relevance"] == 2
    train = manifest["splits"]["train"]
    assert (train["num_lists"], train["num_items"], train["num_features"]) == (3, 9, 3)
    assert train["label_histogram"] == {"0": 4, "1": 3, "2": 2}
    assert train["list_label_histogram"] == {"0": 1, "2": 2}
    assert train["list_length_histogram"] == {"2": 1, "3": 1, "4": 1}
    assert train["empty_list_length_histogram"] == {"2": 1}  # qid 2: labels 0, 0
    assert train["items_dropped"] == {} and train["lists_dropped"] == {}
    assert len(train["input"]["sha256"]) == 64 and train["input"]["lines"] == 9
    lists = _read(out / "train-00000-of-00001.tfrecord")
    assert [e.context.features.feature["qid"].int64_list.value[0] for e in lists] == [1, 2, 3]
    first = _items(lists[0])
    assert first[0] == ([0.5, 1.0, 3.0], 2.0, 2.0)
    assert [row[1] for row in first] == [2.0, 0.0, 1.0]
    assert set(manifest["splits"]) == {"train", "vali", "test"}
    norm = manifest["normalization"]
    assert norm["method"] == "quantile" and norm["num_items"] == 9
    assert len(norm["quantile"]["values"]) == 3 and len(norm["quantile"]["values"][0]) == 1000
    train_features = np.array(
        [
            [0.5, 1.0, 3.0],
            [0.1, 0.0, 2.0],
            [0.3, 2.0, 1.0],
            [0.2, 0.5, 0.0],
            [0.9, 0.1, 4.0],
            [1.5, 0.2, 0.7],
            [0.0, 0.0, 0.0],
            [0.4, 0.8, 1.2],
            [2.5, 1.1, 0.3],
        ],
        dtype=np.float32,
    )
    np.testing.assert_allclose(norm["standard"]["mean"], train_features.mean(0), rtol=1e-6)
    np.testing.assert_allclose(norm["max"], train_features.max(0))


def test_simulated_clicks_follow_the_settings(tiny_dataset, tmp_path):
    out = tmp_path / "out"
    code = main(
        [
            "--input",
            str(tiny_dataset),
            "--output",
            str(out),
            "--simulate-clicks",
            "--bootstraps",
            "4",
            "--sample-size",
            "2",
            "--purchase-label",
            "4",
            "--no-progress",
        ]
    )
    assert code == 0
    manifest = _manifest(out)
    train = manifest["splits"]["train"]
    assert manifest["label_kind"] == "simulated_implicit"
    assert (train["input_lists"], train["num_lists"], train["num_items"]) == (3, 12, 24)
    assert set(train["label_histogram"]) <= {"0", "1", "4"}
    assert sum(train["intent_histogram"].values()) == 12
    assert train["list_length_histogram"] == {"2": 12}
    empty = train["list_label_histogram"].get("0", 0)
    assert train["empty_list_length_histogram"] == ({"2": empty} if empty else {})
    assert manifest["parameters"]["clicks"]["purchase_label"] == 4
    for elwc in _read(out / "train-00000-of-00001.tfrecord"):
        rows = _items(elwc)
        assert len(rows) == 2
        # The explicit label travels with its item.
        assert all(r[2] in (0.0, 1.0, 2.0) for r in rows)


@pytest.fixture(scope="module")
def synthetic_source(tmp_path_factory):
    root = tmp_path_factory.mktemp("synthetic")
    generate_letor(
        str(root),
        SyntheticConfig(
            train_queries=60, vali_queries=10, test_queries=10, mean_list_size=30, seed=5
        ),
    )
    return root


def _convert(source, out, **overrides):
    settings = dict(
        input=str(source),
        output=str(out),
        simulate_clicks=True,
        seed=1,
        num_features=136,
        max_relevance=4,
        workers=1,
    )
    settings.update(overrides)
    return convert(ConvertConfig(**settings), progress=False)


def test_same_seed_gives_byte_identical_output(synthetic_source, tmp_path):
    _convert(synthetic_source, tmp_path / "a")
    _convert(synthetic_source, tmp_path / "b")
    _convert(synthetic_source, tmp_path / "c", seed=2)
    assert _shard_bytes(tmp_path / "a") == _shard_bytes(tmp_path / "b")
    first, second = _manifest(tmp_path / "a"), _manifest(tmp_path / "b")
    assert first["parameters"].pop("output") != second["parameters"].pop("output")
    assert first == second
    assert _shard_bytes(tmp_path / "a") != _shard_bytes(tmp_path / "c")


def test_workers_and_block_size_do_not_change_the_output(synthetic_source, tmp_path):
    _convert(synthetic_source, tmp_path / "one", shards=3)
    _convert(synthetic_source, tmp_path / "two", shards=3, workers=2, chunk_bytes=100_000)
    assert _shard_bytes(tmp_path / "one") == _shard_bytes(tmp_path / "two")
    one, two = _manifest(tmp_path / "one"), _manifest(tmp_path / "two")
    assert one["splits"] == two["splits"]
    assert one["normalization"] == two["normalization"]


def test_shards_split_the_lists(synthetic_source, tmp_path):
    _convert(synthetic_source, tmp_path / "out", shards=3, simulate_clicks=False)
    train = _manifest(tmp_path / "out")["splits"]["train"]
    assert len(train["files"]) == 3 and sum(train["files"].values()) == train["num_lists"] == 60
    read = sum(len(_read(tmp_path / "out" / name)) for name in train["files"])
    assert read == 60


def test_list_size_limits_are_counted(synthetic_source, tmp_path):
    _convert(
        synthetic_source,
        tmp_path / "out",
        simulate_clicks=False,
        max_list_size=20,
        min_list_size=10,
    )
    train = _manifest(tmp_path / "out")["splits"]["train"]
    dropped_items = sum(train["items_dropped"].values())
    assert train["items_dropped"]["max_list_size"] > 0
    assert train["lists_dropped"].get("min_list_size", 0) > 0
    assert train["num_items"] + dropped_items == train["input_items"]
    assert train["num_lists"] + train["lists_dropped"]["min_list_size"] == train["input_lists"]
    sizes = [len(e.examples) for e in _read(tmp_path / "out" / "train-00000-of-00001.tfrecord")]
    assert max(sizes) == 20 and min(sizes) >= 10


def test_gzip_input_gives_the_same_shards(synthetic_source, tmp_path):
    packed = tmp_path / "packed"
    packed.mkdir()
    for name in os.listdir(synthetic_source):
        with (
            open(synthetic_source / name, "rb") as src,
            gzip.open(packed / f"{name}.gz", "wb") as dst,
        ):
            shutil.copyfileobj(src, dst)
    _convert(synthetic_source, tmp_path / "plain")
    _convert(packed, tmp_path / "gz", workers=2, chunk_bytes=200_000)
    assert _shard_bytes(tmp_path / "plain") == _shard_bytes(tmp_path / "gz")


def test_all_folds_write_one_directory_each(tmp_path):
    for fold in (1, 2):
        for split in ("train", "test"):
            write_lines(
                tmp_path / "src" / f"Fold{fold}" / f"{split}.txt",
                [letor_line(fold, 10 * fold + q, [q, fold]) for q in range(3)],
            )
    assert (
        main(
            [
                "--input",
                str(tmp_path / "src"),
                "--output",
                str(tmp_path / "out"),
                "--folds",
                "all",
                "--no-progress",
            ]
        )
        == 0
    )
    for fold in (1, 2):
        manifest = _manifest(tmp_path / "out" / f"Fold{fold}")
        assert manifest["source"]["fold"] == fold
        assert set(manifest["splits"]) == {"train", "test"}
    assert (
        main(
            [
                "--input",
                str(tmp_path / "src"),
                "--output",
                str(tmp_path / "f2"),
                "--fold",
                "2",
                "--no-progress",
            ]
        )
        == 0
    )
    assert _manifest(tmp_path / "f2")["source"]["fold"] == 2


def test_known_dataset_is_found_under_data_dir_or_env(tiny_dataset, tmp_path, monkeypatch, capsys):
    data_dir = tmp_path / "datasets"
    shutil.copytree(tiny_dataset, data_dir / "MQ2008")
    code = main(
        [
            "--input",
            "MQ2008",
            "--data-dir",
            str(data_dir),
            "--output",
            str(tmp_path / "a"),
            "--no-progress",
        ]
    )
    assert code == 0 and _manifest(tmp_path / "a")["num_features"] == 46
    monkeypatch.setenv("TFR_DATA_DIR", str(data_dir))
    assert main(["--input", "mq2008", "--output", str(tmp_path / "b"), "--no-progress"]) == 0
    monkeypatch.delenv("TFR_DATA_DIR")
    monkeypatch.chdir(tmp_path)
    code = main(["--input", "MSLR-WEB30K", "--output", str(tmp_path / "c"), "--no-progress"])
    err = capsys.readouterr().err
    assert code == 1 and "MSLR-WEB30K was not found" in err and "/research/project/mslr/" in err
    assert not (tmp_path / "c").exists()


def test_existing_output_needs_overwrite(tiny_dataset, tmp_path, capsys):
    out = tmp_path / "out"
    argv = ["--input", str(tiny_dataset), "--output", str(out), "--no-progress"]
    assert main(argv) == 0
    (out / "train-00000-of-00001.tfrecord").write_bytes(b"old")
    assert main(argv) == 1
    assert "pass --overwrite" in capsys.readouterr().err
    assert (out / "train-00000-of-00001.tfrecord").read_bytes() == b"old"
    assert main(argv + ["--overwrite"]) == 0
    assert (out / "train-00000-of-00001.tfrecord").read_bytes() != b"old"


def test_overwrite_keeps_a_directory_tfr_convert_did_not_write(tiny_dataset, tmp_path, capsys):
    out = tmp_path / "out"
    out.mkdir()
    (out / "keep.txt").write_text("mine")
    argv = ["--input", str(tiny_dataset), "--output", str(out), "--no-progress"]
    for extra in ([], ["--overwrite"]):
        assert main(argv + extra) == 1
        assert "was not written by tfr-convert: it holds keep.txt" in capsys.readouterr().err
        assert os.listdir(out) == ["keep.txt"]


def test_config_file_with_flag_overrides(tiny_dataset, tmp_path):
    config = tmp_path / "convert.json"
    config.write_text(
        json.dumps(
            {
                "input": str(tiny_dataset),
                "output": str(tmp_path / "x"),
                "shards": 2,
                "seed": 9,
                "clicks": {"bootstraps": 3},
            }
        )
    )
    assert main(["--config", str(config), "--seed", "4", "--simulate-clicks", "--no-progress"]) == 0
    parameters = _manifest(tmp_path / "x")["parameters"]
    assert (parameters["shards"], parameters["seed"]) == (2, 4)
    assert parameters["clicks"]["bootstraps"] == 3


def test_unknown_config_keys_are_rejected(tiny_dataset, tmp_path, capsys):
    config = tmp_path / "convert.json"
    config.write_text(
        json.dumps({"input": str(tiny_dataset), "output": str(tmp_path / "x"), "shard": 2})
    )
    assert main(["--config", str(config), "--no-progress"]) == 1
    assert "shard" in capsys.readouterr().err


def test_help_lists_every_option(capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["--help"])
    assert exit_info.value.code == 0
    text = capsys.readouterr().out
    for option in (
        "--input",
        "--output",
        "--fold",
        "--folds",
        "--shards",
        "--max-list-size",
        "--simulate-clicks",
        "--sample-size",
        "--bootstraps",
        "--kappa",
        "--click-noise",
        "--purchase-label",
        "--seed",
        "--normalize",
        "--data-dir",
        "--overwrite",
        "--config",
        "--tfds-download",
    ):
        assert option in text


def test_synthetic_input_keeps_its_generated_source(tmp_path):
    out = tmp_path / "syn"
    assert (
        main(
            [
                "--input",
                "synthetic",
                "--output",
                str(out),
                "--synthetic-lists",
                "12",
                "--synthetic-list-size",
                "10",
                "--no-progress",
            ]
        )
        == 0
    )
    manifest = _manifest(out)
    assert manifest["source"]["kind"] == "synthetic" and manifest["num_features"] == 136
    assert manifest["splits"]["train"]["input_lists"] == 12
    assert manifest["splits"]["vali"]["input_lists"] == 4
    assert manifest["splits"]["train"]["input"]["path"] == os.path.join("source", "train.txt")
    assert (out / "source" / "train.txt").exists()


def test_spawned_workers_give_the_same_output(synthetic_source, tmp_path, monkeypatch):
    # macOS and Windows start workers with spawn rather than fork.
    import tfrecords_tools.block_processing as parse_workers

    _convert(synthetic_source, tmp_path / "one")
    monkeypatch.setattr(parse_workers, "_start_method", lambda: "spawn")
    _convert(synthetic_source, tmp_path / "spawned", workers=2, chunk_bytes=150_000)
    assert _shard_bytes(tmp_path / "one") == _shard_bytes(tmp_path / "spawned")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="fork is Linux's")
def test_workers_are_forked_only_from_a_single_threaded_process(synthetic_source, tmp_path):
    # Forking beside other threads (TensorFlow's) can crash a worker and hang
    # the pool: a process with threads takes its workers from a fork server.
    code = (
        "import threading\n"
        "from tfrecords_tools.block_processing import _start_method\n"
        "print(_start_method())\n"
        "stop = threading.Event()\n"
        "threading.Thread(target=stop.wait).start()\n"
        "print(_start_method())\n"
        "stop.set()\n"
    )
    found = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout.split()
    assert found == ["fork", "forkserver"]
    # With a thread running here, the workers come from the fork server, and
    # the output is the same as with one process.
    import threading

    import tfrecords_tools.block_processing as parse_workers

    stop = threading.Event()
    thread = threading.Thread(target=stop.wait)
    thread.start()
    try:
        assert parse_workers._start_method() == "forkserver"
        _convert(synthetic_source, tmp_path / "one")
        _convert(synthetic_source, tmp_path / "served", workers=2, chunk_bytes=150_000)
    finally:
        stop.set()
        thread.join()
    assert _shard_bytes(tmp_path / "one") == _shard_bytes(tmp_path / "served")
