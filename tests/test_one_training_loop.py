"""Every neural family trains through the one loop (``training.loop``): the same plan,
the same callbacks, progress lines and memory refusal for text as for feature vectors."""

from __future__ import annotations

import importlib
import json
import logging
import os
import signal
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

from pipelines.train_cli import main as train_main  # noqa: E402
from tests.conftest import train_config  # noqa: E402
from tests.test_listformer_training import SMALL, write_text_lists  # noqa: E402
from tfr_rankformer.core.fault_points import ENV  # noqa: E402
from tfr_rankformer.core.model_families import family_of  # noqa: E402
from tfr_rankformer.core.multi_worker import WorkerRole  # noqa: E402
from tfr_rankformer.features.feature_family import FeatureFamily  # noqa: E402
from tfr_rankformer.runner import train  # noqa: E402
from tfr_rankformer.text import text_data  # noqa: E402
from tfr_rankformer.text.text_family import TextFamily  # noqa: E402
from tfr_rankformer.training import (
    loop,  # noqa: E402
    training_setup,  # noqa: E402
)
from tfr_rankformer.training.run_plan import SAFETY_MARGIN, MemoryLimitError  # noqa: E402
from tfr_rankformer.training.train_config import TrainConfig  # noqa: E402
from tfr_rankformer.training.training_callbacks import ProgressLines  # noqa: E402


@pytest.fixture
def recorded(monkeypatch):
    """The callbacks each run's loop built, in order of the runs."""
    calls = []
    original = training_setup.run_callbacks

    def record(*args, **kwargs):
        callbacks, monitor = original(*args, **kwargs)
        calls.append([type(c).__name__ for c in callbacks])
        return callbacks, monitor

    monkeypatch.setattr(loop, "run_callbacks", record)
    # Progress lines as where no terminal shows a bar.
    monkeypatch.setattr(loop, "attached_to_terminal", lambda: False)
    return calls


def _text_config(tmp_path, **settings) -> TrainConfig:
    data = write_text_lists(str(tmp_path / "text"), lists=(("train", 16), ("vali", 4)))
    small = dict(width=16, num_layers=1, num_heads=2, ff_dim=32, dropout=0.0, vocab_size=120)
    small.update(max_document_tokens=8, batch_size=8, epochs=1)
    small.update(settings)
    return TrainConfig.from_flat(
        dict(model="listformer", data=data, model_dir=str(tmp_path / "run"), **small)
    )


def test_text_and_feature_runs_share_the_plan_callbacks_and_progress_lines(
    tmp_path, dataset, recorded, caplog
):
    assert isinstance(family_of("listformer").load(), TextFamily)
    assert isinstance(family_of("rankformer").load(), FeatureFamily)
    caplog.set_level(logging.INFO)
    # No final evaluation: the loop's callbacks and lines are what is compared.
    text = train(_text_config(tmp_path, evaluate_splits=()), verbose=1, progress_seconds=1e-3)
    features = train(
        train_config(dataset, tmp_path / "features", epochs=1, evaluate_splits=()),
        verbose=1,
        progress_seconds=1e-3,
    )
    text_callbacks, feature_callbacks = recorded
    # The same loop's callbacks, the family's validation in the same place.
    assert text_callbacks[0] == feature_callbacks[0] == "Throughput"
    assert text_callbacks[2:] == feature_callbacks[2:]
    assert text_callbacks[1] == "LambdaCallback"
    assert feature_callbacks[1] == "EvaluationCallback"
    assert ProgressLines.__name__ in text_callbacks and "BackupAndRestore" in text_callbacks
    plans = [r.message for r in caplog.records if r.message.startswith("plan: ")]
    assert len(plans) == 2 and "documents" in plans[0] and "memory about" in plans[0]
    lines = [r.message for r in caplog.records if r.name.endswith("training_callbacks")]
    assert any(line.startswith("epoch 1/1 done") for line in lines)
    for metrics in (text, features):  # one summary layout
        assert {"estimated_peak_bytes", "steps_per_epoch", "buckets"} <= set(metrics["training"])


def test_the_second_text_loop_is_gone():
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module("tfr_rankformer.text.text_training")


def test_a_text_run_that_cannot_fit_is_refused_before_its_first_step(tmp_path, capsys):
    big = dict(max_document_tokens=250, width=64, ff_dim=256)
    config = _text_config(tmp_path, **big)
    memory = family_of("listformer").load().prepare(config, worker=WorkerRole()).plan.memory
    # Room for the runtime and half the largest step.
    limit = (memory.runtime + memory.pipeline + memory.step / 2) * SAFETY_MARGIN / 2**30
    with pytest.raises(MemoryLimitError, match="fit with --batch-size [0-9]+"):
        train(TrainConfig.from_flat({**config.to_json(), "memory_limit": limit}))
    assert not (tmp_path / "run").exists()  # nothing written
    data = str(tmp_path / "text")
    flags = ["--model", "listformer", "--data", data, "--model-dir", str(tmp_path / "cli")]
    flags += [*SMALL, "--max-document-tokens", "250", "--width", "64", "--ff-dim", "256"]
    flags += ["--memory-limit", f"{limit:.3f}", "--batch-items", "12000", "--quiet"]
    assert train_main(flags) != 0
    assert "fit with --batch-items" in capsys.readouterr().err
    assert not (tmp_path / "cli").exists()
    with pytest.raises(MemoryLimitError, match="runtime and the input pipeline alone"):
        train(TrainConfig.from_flat({**config.to_json(), "memory_limit": 0.3}))


def test_a_killed_text_run_resumes(tmp_path):
    data = write_text_lists(str(tmp_path / "text"), lists=(("train", 16), ("vali", 4)))
    model_dir = str(tmp_path / "run")
    flags = ["--model", "listformer", "--data", data, "--model-dir", model_dir, "--quiet"]
    flags += [*SMALL, "--batch-size", "8", "--epochs", "2", "--evaluate-splits", "none"]
    command = [sys.executable, "-m", "pipelines.train_cli", *flags]
    # Killed after its third step: the second epoch's first (2 steps an epoch).
    killed = subprocess.run(command, env={**os.environ, ENV: "train.batch:3"}, check=False)
    assert killed.returncode == -signal.SIGKILL
    assert train_main([*flags, "--resume", "--no-export"]) == 0
    with open(os.path.join(model_dir, "metrics.json"), encoding="utf-8") as f:
        training_entry = json.load(f)["training"]
    assert training_entry["epochs_completed"] == 2 and training_entry["epochs_this_run"] == 1


def _element(labels, valid):
    n = len(labels)
    return {
        "query": tf.constant("q"),
        "documents": tf.constant([f"d{i}" for i in range(n)]),
        "mask": tf.constant([i < valid for i in range(n)]),
        "label": tf.constant(labels, tf.float32),
    }


@pytest.mark.parametrize("cap, kept", [(4, 4), (2, 2), (20, 8)])
def test_sampled_lists_keep_the_judged_relevant_documents_first(cap, kept):
    labels = [0, 2, 0, 0, 1, 0, 0, 3, -1, -1]  # 8 documents, then padding
    for key in range(5):
        out = text_data.sample_documents(_element(labels, 8), cap, tf.constant(key, tf.int64))
        got = out["label"].numpy()
        assert len(got) == kept and out["mask"].numpy().all()  # padding dropped
        assert (got > 0).sum() == min(3, kept)  # every relevant one, up to the cap
        names = [d.decode() for d in out["documents"].numpy()]
        assert [labels[int(d[1:])] for d in names] == got.tolist()  # aligned
    same = [
        text_data.sample_documents(_element(labels, 8), 4, tf.constant(7, tf.int64))
        for _ in range(2)
    ]
    np.testing.assert_array_equal(same[0]["documents"], same[1]["documents"])


def test_long_text_evaluations_log_progress(caplog):
    from tfr_rankformer.text.text_runs import _EvaluationProgress

    now = [0.0]
    progress = _EvaluationProgress("vali", every=30.0, clock=lambda: now[0])
    with caplog.at_level(logging.INFO):
        for _ in range(5):
            now[0] += 20.0  # a list every 20 s: a line at 40 s and at 80 s
            progress.lists_done(1)
    lines = [r.getMessage() for r in caplog.records]
    assert lines == [
        "evaluating vali: 2 lists in 40 s, 0.05 lists/s",
        "evaluating vali: 4 lists in 80 s, 0.05 lists/s",
    ]


def test_the_final_evaluation_takes_the_splits_asked_for_in_every_family(tmp_path, dataset):
    text = train(_text_config(tmp_path, evaluate_splits=("vali",)), verbose=0)
    features = train(
        train_config(dataset, tmp_path / "features", epochs=1, evaluate_splits=()), verbose=0
    )
    assert set(text) == {"vali", "training", "settings"}
    assert set(features) == {"training", "settings"}
    assert list(features["settings"]["evaluate_splits"]) == []
    with pytest.raises(ValueError, match="`evaluate_splits` must be some of"):
        train_config(dataset, tmp_path / "bad", evaluate_splits=("valid",))


@pytest.mark.parametrize(
    "flag,error",
    [("train,valid", "choose from train, vali, test, or none"), ("none", None)],
)
def test_evaluate_splits_flag(tmp_path, dataset, flag, error, capsys):
    argv = ["--model", "mlp", "--data", dataset, "--model-dir", str(tmp_path / "run")]
    argv += ["--epochs", "1", "--no-export", "--evaluate-splits", flag]
    if error:
        with pytest.raises(SystemExit):
            train_main(argv)
        assert error in capsys.readouterr().err
        return
    assert train_main(argv) == 0
    metrics = json.loads((tmp_path / "run" / "metrics.json").read_text())
    assert set(metrics) == {"training", "settings"}
