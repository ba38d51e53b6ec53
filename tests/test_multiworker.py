"""Multi-worker training: worker roles, input sharding, and two workers on localhost."""

from __future__ import annotations

import collections
import json
import logging
import os
import signal
import socket
import subprocess
import sys
import time

import numpy as np
import pytest
import tensorflow as tf

from pipelines.export_cli import main as export_main  # noqa: E402
from tfr_rankformer.core import elwc_schema  # noqa: E402
from tfr_rankformer.core.multi_worker import WorkerRole, worker_role  # noqa: E402
from tfr_rankformer.inputs import data  # noqa: E402
from tfr_rankformer.inputs.manifest import load_manifest

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TIMEOUT_S = 300


def _cluster(*ports, chief=None):
    cluster = {"worker": [f"127.0.0.1:{p}" for p in ports]}
    if chief is not None:
        cluster["chief"] = [f"127.0.0.1:{chief}"]
    return cluster


def test_worker_role_follows_tf_config():
    assert worker_role("") == WorkerRole(0, 1) and worker_role({}).is_chief
    one = {"cluster": _cluster(1), "task": {"type": "worker", "index": 0}}
    assert worker_role(json.dumps(one)) == WorkerRole(0, 1)
    second = {"cluster": _cluster(1, 2), "task": {"type": "worker", "index": 1}}
    role = worker_role(json.dumps(second))
    assert role == WorkerRole(1, 2) and not role.is_chief and role.multi_worker
    # With a chief task, the chief is first and worker i comes at i + 1.
    with_chief = {"cluster": _cluster(1, 2, chief=3), "task": {"type": "worker", "index": 0}}
    assert worker_role(with_chief) == WorkerRole(1, 3)
    with_chief["task"] = {"type": "chief", "index": 0}
    assert worker_role(with_chief).is_chief
    with pytest.raises(ValueError, match="does not train"):
        worker_role({"cluster": _cluster(1, 2), "task": {"type": "evaluator", "index": 0}})
    with pytest.raises(ValueError, match="no such task"):
        worker_role({"cluster": _cluster(1, 2), "task": {"type": "worker", "index": 2}})
    with pytest.raises(ValueError, match="not valid JSON"):
        worker_role("{cluster")


def test_files_are_dealt_to_workers_without_overlap():
    files = [f"train-{i:05d}" for i in range(5)]
    shards = [data.shard_for_worker(files, WorkerRole(i, 2)) for i in range(2)]
    assert shards[0].files == ("train-00000", "train-00002", "train-00004")
    assert shards[1].files == ("train-00001", "train-00003")
    assert all(s.record_stride == 1 for s in shards)
    assert data.shard_for_worker(files, WorkerRole()).files == tuple(files)


def test_fewer_files_than_workers_shards_by_record_and_warns(caplog):
    with caplog.at_level(logging.WARNING, logger="tfr_rankformer.inputs.data"):
        shard = data.shard_for_worker(["train-00000"], WorkerRole(2, 3))
    assert shard == data.WorkerShard(("train-00000",), record_stride=3, record_offset=2)
    assert "1 training file(s) for 3 workers" in caplog.text
    assert "tfr-convert --shards" in caplog.text


@pytest.fixture(scope="module")
def sharded(tmp_path_factory):
    """Synthetic data in two files per split: 48 training lists of about 12 items."""
    from pipelines.convert_cli import main as convert_main

    out = tmp_path_factory.mktemp("data") / "sharded"
    flags = ["--input", "synthetic", "--output", str(out), "--simulate-clicks", "--shards", "2"]
    flags += ["--synthetic-lists", "24", "--synthetic-list-size", "12", "--bootstraps", "2"]
    assert convert_main(flags + ["--workers", "1", "--no-progress", "--log-level", "WARNING"]) == 0
    return str(out)


def _qids(shard, num_features) -> collections.Counter:
    lists = data.parsed_lists(shard, num_features, list_size=16)
    return collections.Counter(int(e[elwc_schema.QID]) for e in lists.as_numpy_iterator())


@pytest.mark.parametrize("by", ["file", "record"])
def test_worker_shards_split_the_lists_between_them(sharded, by):
    manifest = load_manifest(sharded)
    files = manifest.split_files(sharded, "train")
    if by == "record":
        files = files[:1]  # one file for two workers
    every = _qids(files, manifest.num_features)
    parts = [
        _qids(data.shard_for_worker(files, WorkerRole(i, 2)), manifest.num_features)
        for i in range(2)
    ]
    assert all(0 < sum(p.values()) < sum(every.values()) for p in parts)
    assert parts[0] + parts[1] == every


def _free_ports(count: int) -> list[int]:
    sockets = [socket.socket(socket.AF_INET, socket.SOCK_STREAM) for _ in range(count)]
    try:
        for s in sockets:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in sockets]
    finally:
        for s in sockets:
            s.close()


def _tail(path, size=3000) -> str:
    with open(path, encoding="utf-8", errors="replace") as f:
        return f.read()[-size:]


def _run_workers(commands, envs, logs) -> list[int]:
    """Runs the workers' commands at once; kills every process group at the end."""
    processes = []
    try:
        for command, env, log in zip(commands, envs, logs):
            with open(log, "w", encoding="utf-8") as out:
                processes.append(
                    subprocess.Popen(
                        command,
                        cwd=REPO,
                        env=env,
                        stdout=out,
                        stderr=subprocess.STDOUT,
                        start_new_session=True,
                    )
                )
        deadline = time.monotonic() + TIMEOUT_S
        for process in processes:
            process.wait(timeout=max(deadline - time.monotonic(), 1))
        return [p.returncode for p in processes]
    finally:
        for process in processes:
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGKILL)
            process.wait()


@pytest.mark.slow
def test_two_workers_train_alike_and_only_the_chief_writes(sharded, tmp_path):
    ports = _free_ports(2)
    cluster = {"worker": [f"127.0.0.1:{p}" for p in ports]}
    flags = ["--model", "rankformer", "--data", sharded, "--epochs", "2", "--batch-size", "16"]
    flags += ["--list-size", "12", "--num-layers", "1", "--num-heads", "1", "--ff-dim", "16"]
    flags += ["--head-hidden", "8", "--dropout", "0.1", "--seed", "5", "--quiet", "--no-export"]
    commands, envs, logs = [], [], []
    for index in range(2):
        tf_config = {"cluster": cluster, "task": {"type": "worker", "index": index}}
        envs.append(dict(os.environ, TF_CONFIG=json.dumps(tf_config), CUDA_VISIBLE_DEVICES=""))
        commands.append(
            [sys.executable, "-m", "pipelines.train_cli", *flags]
            + ["--model-dir", str(tmp_path / f"worker{index}")]
            + ["--final-weights", str(tmp_path / f"final{index}.npz"), "--log-level", "INFO"]
        )
        logs.append(tmp_path / f"worker{index}.log")
    codes = _run_workers(commands, envs, logs)
    assert codes == [0, 0], "\n".join(_tail(log) for log in logs)

    # Each worker read its own training file.
    for index in range(2):
        assert f"worker {index} of 2 reads 1 of 2 files: train-0000{index}-of-00002" in _tail(
            logs[index], size=10**7
        )
    # Both ended training with the same weights, after two epochs.
    final = [np.load(tmp_path / f"final{index}.npz") for index in range(2)]
    assert final[0].files and final[0].files == final[1].files
    for name in final[0].files:
        np.testing.assert_array_equal(final[0][name], final[1][name])
    chief = tmp_path / "worker0"
    metrics = json.loads((chief / "metrics.json").read_text())
    assert {"train", "vali", "test"} <= set(metrics)
    assert metrics["training"]["workers"] == 2 and metrics["training"]["epochs_completed"] == 2
    assert np.isfinite(metrics["test"]["ndcg_y@10"])
    assert len((chief / "history.csv").read_text().splitlines()) == 3
    # The non-chief wrote nothing into its model directory (Keras's backup scratch is gone).
    other = tmp_path / "worker1"
    assert not other.exists() or not list(other.rglob("*")), list(other.rglob("*"))

    # tfr-export of the chief's run, in one process after training; the export loads and scores.
    assert export_main(["--model-dir", str(chief)]) == 0
    served = tf.saved_model.load(str(chief / "export" / "1"))
    features = np.random.default_rng(0).normal(size=(2, 5, 136)).astype(np.float32)
    mask = np.array([[True] * 5, [True] * 3 + [False] * 2])
    outputs = served.signatures["predict_tensors"](features=features, mask=mask)
    assert outputs["scores"].shape == (2, 5)
    assert np.isfinite(outputs["scores"].numpy()[mask]).all()
