"""ProgressLines: progress lines in the log for training runs without a terminal."""

from __future__ import annotations

import logging
import sys

import numpy as np
import pytest
import tensorflow as tf

from tfr_rankformer.training.training_callbacks import ProgressLines, attached_to_terminal

LOGGER = "tfr_rankformer.training.training_callbacks"


class FakeClock:
    """A clock the test moves by hand."""

    def __init__(self, now: float = 1000.0):
        self.now = now

    def __call__(self) -> float:
        return self.now


class FakeStream:
    def __init__(self, tty):
        self.tty = tty

    def isatty(self) -> bool:
        if isinstance(self.tty, Exception):
            raise self.tty
        return self.tty


def progress_lines(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == LOGGER]


@pytest.fixture
def progress_caplog(caplog):
    caplog.set_level(logging.INFO, logger=LOGGER)
    return caplog


def test_lines_every_n_steps_and_after_every_seconds(progress_caplog):
    clock = FakeClock()
    callback = ProgressLines(1620, 81, every_steps=10, every_seconds=25, clock=clock)
    callback.set_params({"epochs": 200, "steps": 81, "verbose": 0})
    callback.on_epoch_begin(0)
    for step in range(1, 82):
        # One second a step, but step 21 takes 30 s: it gets a line for the time alone.
        clock.now += 30 if step == 21 else 1
        callback.on_train_batch_end(step - 1, {"loss": 0.5})
    lines = progress_lines(progress_caplog)
    steps = [int(line.split(" step ")[1].split("/")[0]) for line in lines]
    assert steps == [10, 20, 21, 31, 41, 51, 61, 71, 81]
    # 20 lists a step; rate = lists so far / elapsed; ETA = steps left * mean step seconds.
    assert lines[0] == "epoch 1/200 step 10/81 (12%) 10 s, 20 lists/s, loss 0.5000, " + (
        "epoch ETA 71 s"
    )
    assert lines[1] == "epoch 1/200 step 20/81 (24%) 20 s, 20 lists/s, loss 0.5000, " + (
        "epoch ETA 61 s"
    )
    # Step 21 at 50 s: 420 lists / 50 s, and 60 steps * 50/21 s = 142.9 s left.
    assert lines[2] == "epoch 1/200 step 21/81 (25%) 50 s, 8.40 lists/s, loss 0.5000, " + (
        "epoch ETA 143 s"
    )
    # Step 31 at 60 s: 620 lists / 60 s, and 50 steps * 60/31 s = 96.8 s left.
    assert lines[3] == "epoch 1/200 step 31/81 (38%) 60 s, 10 lists/s, loss 0.5000, " + (
        "epoch ETA 97 s"
    )
    assert lines[-1].startswith("epoch 1/200 step 81/81 (100%) 110 s, 15 lists/s,")
    assert lines[-1].endswith("epoch ETA 0.00 s")

    progress_caplog.clear()
    clock.now += 5  # validation
    logs = {"loss": 0.25, "lists_per_sec": 14.7, "val_loss": 0.3, "val_ndcg_10": 0.412345}
    callback.on_epoch_end(0, logs)
    assert progress_lines(progress_caplog) == [
        "epoch 1/200 done: 81 steps in 110 s, 15 lists/s, loss 0.2500; "
        "validation 5.00 s, val_loss 0.3000, val_ndcg_10 0.4123"
    ]

    # The next epoch counts from its own start: nothing before 10 steps or 25 s.
    progress_caplog.clear()
    callback.on_epoch_begin(1)
    for step in range(1, 10):
        clock.now += 2
        callback.on_train_batch_end(step - 1, {"loss": 1.5e-5})
    assert progress_lines(progress_caplog) == []
    clock.now += 2
    callback.on_train_batch_end(9, {"loss": 1.5e-5})
    assert progress_lines(progress_caplog) == [
        "epoch 2/200 step 10/81 (12%) 20 s, 10 lists/s, loss 1.5000e-05, epoch ETA 142 s"
    ]


def test_fit_logs_every_step_and_every_epoch(progress_caplog):
    rng = np.random.default_rng(0)
    x, y = rng.normal(size=(12, 3)).astype("float32"), rng.normal(size=(12, 1))
    model = tf.keras.Sequential([tf.keras.Input(shape=(3,)), tf.keras.layers.Dense(1)])
    model.compile(optimizer="sgd", loss="mse")
    callback = ProgressLines(12, 3, every_steps=1, every_seconds=None)
    model.fit(
        x,
        y,
        batch_size=4,
        epochs=2,
        verbose=0,
        validation_data=(x[:4], y[:4]),
        callbacks=[callback],
    )
    lines = progress_lines(progress_caplog)
    assert len(lines) == 8, lines
    for epoch in (1, 2):
        block = lines[(epoch - 1) * 4 : epoch * 4]
        for step, line in enumerate(block[:3], start=1):
            assert line.startswith(f"epoch {epoch}/2 step {step}/3 ("), line
            assert " lists/s, loss " in line and ", epoch ETA " in line, line
        assert block[3].startswith(f"epoch {epoch}/2 done: 3 steps in "), block[3]
        assert ", loss " in block[3] and "; validation " in block[3], block[3]
        assert ", val_loss " in block[3], block[3]


def test_attached_to_terminal(monkeypatch, capsys):
    assert attached_to_terminal() is False  # pytest captures both streams
    for stdout, stderr, expected in [
        (True, True, True),
        (True, False, False),
        (False, True, False),
        (False, False, False),
        (True, ValueError("I/O operation on closed file"), False),
    ]:
        monkeypatch.setattr(sys, "stdout", FakeStream(stdout))
        monkeypatch.setattr(sys, "stderr", FakeStream(stderr))
        assert attached_to_terminal() is expected, (stdout, stderr)
    monkeypatch.setattr(sys, "stderr", None)
    assert attached_to_terminal() is False
    monkeypatch.setattr(sys, "stderr", object())
    assert attached_to_terminal() is False
