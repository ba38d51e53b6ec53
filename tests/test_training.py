"""Training end to end on small synthetic data: learning, checkpoints, resuming, settings."""

from __future__ import annotations

import csv
import json
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest
import tensorflow as tf

from pipelines.train_cli import main as train_main  # noqa: E402
from tests.conftest import SMALL  # noqa: E402
from tests.conftest import train_config as _config  # noqa: E402
from tfr_rankformer.inputs import data  # noqa: E402
from tfr_rankformer.inputs.manifest import load_manifest
from tfr_rankformer.ranking.evaluation import predict_lists  # noqa: E402
from tfr_rankformer.ranking.ranking_metrics import evaluate_rankings  # noqa: E402
from tfr_rankformer.runner import evaluate as evaluate_run  # noqa: E402
from tfr_rankformer.runner import train  # noqa: E402
from tfr_rankformer.training import loop  # noqa: E402
from tfr_rankformer.training.train_config import TrainConfig  # noqa: E402
from tfr_rankformer.training.training_callbacks import BestWeights  # noqa: E402
from tfr_rankformer.training.training_setup import load_run  # noqa: E402


def _history(model_dir):
    with open(os.path.join(model_dir, "history.csv"), encoding="utf-8") as f:
        return list(csv.DictReader(f))


def test_training_lowers_the_loss_and_beats_random_ranking(trained, dataset):
    model_dir, metrics = trained
    history = _history(model_dir)
    assert len(history) == 6
    assert float(history[-1]["loss"]) < float(history[0]["loss"])
    assert "val_ndcg_y@10" in history[0] and float(history[0]["lists_per_sec"]) > 0
    manifest = load_manifest(dataset)
    predicted = predict_lists(
        load_run(model_dir)[2],
        data.evaluation_dataset(dataset, manifest, split="test", batch_size=64),
    )
    rng = np.random.default_rng(0)
    random_scores = rng.random(predicted["scores"].shape)
    random_ndcg = evaluate_rankings(
        random_scores, predicted["label"], predicted["relevance"], predicted["mask"]
    )["ndcg_r@10"]
    assert metrics["test"]["ndcg_r@10"] > random_ndcg + 5
    for key in (
        "ndcg_y@1",
        "ndcg_y@5",
        "ndcg_y@10",
        "ndcg_r@10",
        "ndcg_y@10_tmax",
        "list_acc_t>=1",
        "list_auc_t>=1",
        "list_acc_t>=2",
        "list_auc_t>=2",
    ):
        assert key in metrics["test"]
    assert metrics["training"]["strategy"] == "_DefaultDistributionStrategy"
    assert metrics["settings"]["alpha"] == 1.0  # the released strength


def test_run_directory_and_reloaded_checkpoint_reproduce_the_metrics(trained):
    model_dir, metrics = trained
    for name in ("config.json", "metrics.json", "history.csv", "logs", "checkpoints"):
        assert os.path.exists(os.path.join(model_dir, name)), name
    again = evaluate_run(model_dir, splits=["test", "vali"])
    assert again["test"] == metrics["test"] and again["vali"] == metrics["vali"]
    # A second model restored from the same checkpoint predicts identically.
    _, _, first = load_run(model_dir)
    _, _, second = load_run(model_dir)
    features = np.random.default_rng(2).normal(size=(3, 7, 136)).astype(np.float32)
    mask = np.ones((3, 7), bool)
    a = first({"features": features, "mask": mask}, training=False)
    b = second({"features": features, "mask": mask}, training=False)
    np.testing.assert_array_equal(a["scores"].numpy(), b["scores"].numpy())


def test_mlp_and_transformer_train_without_a_list_head(dataset, mlp_run, tmp_path):
    config = _config(
        dataset, tmp_path / "transformer", model="transformer", epochs=2, evaluate_splits=["test"]
    )
    for metrics in (mlp_run[1], train(config, verbose=0)):
        assert "list_auc_t>=1" not in metrics["test"]
        assert metrics["settings"]["alpha"] == 0.0


def test_peer_models_and_other_losses_train_and_reload(dataset, tmp_path, capsys):
    # context_aware with the item-level ordinal loss and a fixed positional encoding.
    flags = ["--data", dataset, "--epochs", "1", "--batch-size", "64", "--no-export", "--quiet"]
    flags += ["--evaluate-splits", "test"]
    flags += ["--num-layers", "1", "--ff-dim", "16", "--d-fc", "8", "--log-level", "WARNING"]
    context_dir = str(tmp_path / "context_aware")
    assert (
        train_main(
            [*flags, "--model", "context_aware", "--loss", "ordinal", "--model-dir", context_dir]
            + ["--positional-encoding", "fixed"]
        )
        == 0
    )
    # summary_token_ranker with its list head on, and LambdaLoss's NDCG-Loss2++.
    summary_dir = str(tmp_path / "summary_token_ranker")
    assert (
        train_main(
            [*flags, "--model", "summary_token_ranker", "--loss", "ndcg_loss2pp", "--alpha", "0.25"]
            + ["--global-tokens", "2", "--num-heads", "1", "--model-dir", summary_dir]
        )
        == 0
    )
    for model_dir in (context_dir, summary_dir):
        with open(os.path.join(model_dir, "metrics.json"), encoding="utf-8") as f:
            metrics = json.load(f)
        assert np.isfinite(metrics["test"]["ndcg_y@10"])
        # The checkpoint reloads into the same model (item-level logits included).
        assert evaluate_run(model_dir, splits=["test"])["test"] == metrics["test"]
    assert metrics["settings"]["architecture"]["global_tokens"] == 2
    assert "list_auc_t>=1" in metrics["test"]
    with open(os.path.join(context_dir, "config.json"), encoding="utf-8") as f:
        settings = json.load(f)
    assert settings["loss"] == "ordinal" and settings["architecture"]["num_heads"] == 2
    assert settings["architecture"]["positional_encoding"] == "fixed"


def test_training_list_policy():
    def config(**kw):
        return TrainConfig(data="d", model_dir="m", **kw)

    # The released code trains every model on every list.
    assert config(model="transformer").training_includes_empty_lists()
    # The paper's policy under its scaling: only a list head sees t = 0 lists.
    paper = dict(loss_scaling="paper")
    assert config(model="rankformer", **paper).training_includes_empty_lists()
    assert not config(model="rankformer", alpha=0.0, **paper).training_includes_empty_lists()
    assert not config(model="transformer", **paper).training_includes_empty_lists()
    assert not config(model="mlp", **paper).training_includes_empty_lists()
    assert not config(model="context_aware").training_includes_empty_lists()
    assert config(model="mlp", include_empty_lists=True, **paper).training_includes_empty_lists()
    with pytest.raises(ValueError, match="list head"):
        config(model="mlp", alpha=0.5)


def test_strategy_follows_tf_config(monkeypatch):
    created = []
    monkeypatch.setattr(
        tf.distribute, "MultiWorkerMirroredStrategy", lambda: created.append("multi") or "multi"
    )
    monkeypatch.setenv(
        "TF_CONFIG",
        json.dumps(
            {
                "cluster": {"worker": ["127.0.0.1:1", "127.0.0.1:2"]},
                "task": {"type": "worker", "index": 0},
            }
        ),
    )
    assert loop.choose_strategy() == "multi"
    monkeypatch.delenv("TF_CONFIG")
    assert loop.choose_strategy() is tf.distribute.get_strategy()


@pytest.mark.slow  # test_fault_injection kills a run at a set step and checks the same
def test_a_killed_run_resumes_where_it_stopped(dataset, tmp_path):
    model_dir = tmp_path / "run"
    config = tmp_path / "train.json"
    config.write_text(json.dumps({"architecture": SMALL, "batch_size": 16, "seed": 1}))
    command = [
        sys.executable,
        "-m",
        "pipelines.train_cli",
        "--data",
        dataset,
        "--model-dir",
        str(model_dir),
        "--epochs",
        "6",
        "--config",
        str(config),
        "--quiet",
        "--log-level",
        "WARNING",
    ]
    first = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 240
    while time.time() < deadline and first.poll() is None:
        if os.path.exists(model_dir / "history.csv") and len(_history(model_dir)) >= 2:
            break
        time.sleep(0.2)
    assert first.poll() is None, "the run finished before it could be killed"
    first.send_signal(signal.SIGKILL)
    first.wait()
    logged = [int(row["epoch"]) for row in _history(model_dir)]
    assert logged and logged[0] == 0 and max(logged) < 5
    second = subprocess.run([*command, "--resume"], capture_output=True, text=True, timeout=600)
    assert second.returncode == 0, second.stderr[-2000:]
    resumed = [int(row["epoch"]) for row in _history(model_dir)][len(logged) :]
    # It continued after the last backed-up epoch instead of starting again at 0.
    assert resumed and resumed[0] > 0 and resumed[0] >= max(logged)
    assert resumed[-1] == 5
    metrics = json.loads((model_dir / "metrics.json").read_text())
    assert metrics["test"]["num_lists"] > 0
    assert metrics["training"]["epochs_completed"] == 6
    assert metrics["training"]["epochs_this_run"] == 6 - resumed[0]


def test_best_weights_remember_the_epochs_before_a_restart(tmp_path):
    history = tmp_path / "history.csv"
    history.write_text("epoch,val_ndcg_y@10\n0,40.5\n1,47.25\n2,45.0\n")
    callback = BestWeights(
        None, str(tmp_path / "best"), monitor="val_ndcg_y@10", mode="max", history=str(history)
    )
    assert callback.best == 47.25
    fresh = BestWeights(
        None,
        str(tmp_path / "best"),
        monitor="val_ndcg_y@10",
        mode="max",
        history=str(tmp_path / "none.csv"),
    )
    assert fresh.best == float("-inf")


def test_cli_reports_a_missing_dataset(tmp_path, capsys):
    code = train_main(["--data", str(tmp_path / "nothing"), "--model-dir", str(tmp_path / "m")])
    assert code == 1 and "no manifest.json" in capsys.readouterr().err


_MIRRORED = """
import json, sys
import tensorflow as tf
cpu = tf.config.list_physical_devices("CPU")[0]
tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
from tfr_rankformer import runner
from tfr_rankformer.training import loop
from tfr_rankformer.training.train_config import TrainConfig
loop.choose_strategy = lambda: tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
metrics = runner.train(TrainConfig.from_json(json.loads(sys.argv[1])), verbose=0)
print("RESULT " + json.dumps({"strategy": metrics["training"]["strategy"],
                              "ndcg": metrics["test"]["ndcg_y@10"]}))
"""


@pytest.mark.slow
def test_two_replica_mirrored_strategy_trains(dataset, tmp_path):
    # Two logical CPU devices stand in for two GPUs: replicas, all-reduce, and the
    # dropout generators in replica context.
    settings = {
        "model": "rankformer",
        "data": dataset,
        "model_dir": str(tmp_path / "run"),
        "epochs": 2,
        "batch_size": 32,
        "architecture": SMALL,
    }
    done = subprocess.run(
        [sys.executable, "-c", _MIRRORED, json.dumps(settings)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout.split("RESULT ")[-1])
    assert result["strategy"] == "MirroredStrategy" and 0 < result["ndcg"] <= 100


def test_eval_cli_prints_the_table_and_its_convention(trained, capsys, tmp_path):
    from pipelines.eval_cli import main as eval_main

    model_dir, metrics = trained
    assert eval_main(["--model-dir", model_dir, "--split", "test"]) == 0
    out = capsys.readouterr().out
    assert "ndcg_y@10" in out and "lists whose labels are all equal are left out" in out
    assert f"{metrics['test']['ndcg_y@10']:.2f}" in out
    assert eval_main(["--model-dir", str(tmp_path)]) == 1
    assert "is not a trained run" in capsys.readouterr().err
