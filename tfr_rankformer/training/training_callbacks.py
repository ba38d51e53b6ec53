"""The training loop's own Keras callbacks: throughput, progress lines, the best weights."""

from __future__ import annotations

import csv
import logging
import math
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Callable

import tensorflow as tf

from tfr_rankformer.core import fault_points
from tfr_rankformer.core.multi_worker import WorkerRole, chief_values

logger = logging.getLogger(__name__)


class Throughput(tf.keras.callbacks.Callback):
    """Adds ``lists_per_sec`` (so far in the epoch) to the logs."""

    def __init__(self, lists_per_epoch: int, steps_per_epoch: int):
        super().__init__()
        self.lists_per_epoch = lists_per_epoch
        self.steps_per_epoch = max(1, steps_per_epoch)

    def on_epoch_begin(self, epoch, logs=None):
        self._start = time.perf_counter()

    def _rate(self, lists: int) -> float:
        return lists / max(time.perf_counter() - self._start, 1e-9)

    def on_train_batch_end(self, batch, logs=None):
        fault_points.reached("train.batch")
        if logs is not None:
            done = self.lists_per_epoch * min(batch + 1, self.steps_per_epoch)
            logs["lists_per_sec"] = self._rate(done / self.steps_per_epoch)

    def on_epoch_end(self, epoch, logs=None):
        if logs is not None:
            logs["lists_per_sec"] = self._rate(self.lists_per_epoch)


def attached_to_terminal() -> bool:
    """Whether standard output and standard error are both terminals."""
    try:
        return sys.stdout.isatty() and sys.stderr.isatty()
    except (AttributeError, ValueError, OSError):
        return False


def _amount(value: float) -> str:
    """Seconds or lists per second: ``61`` from ten up, ``2.35`` below."""
    return f"{value:.0f}" if abs(value) >= 10 else f"{value:.2f}"


def _metric(value) -> str:
    """A loss or metric as the Keras bar shows it."""
    try:
        number = float(value)
    except (TypeError, ValueError):
        return str(value)
    if number != 0 and not 1e-3 <= abs(number) < 1e6:
        return f"{number:.4e}"
    return f"{number:.4f}"


class ProgressLines(tf.keras.callbacks.Callback):
    """Logs (INFO) a progress line every ``every_steps`` steps or ``every_seconds`` seconds,
    whichever comes first, and a summary at each epoch's end, for runs no terminal shows::

        epoch 1/200 step 40/81 (49%) 61 s, 152 lists/s, loss 1.2345, epoch ETA 63 s
        epoch 1/200 done: 81 steps in 125 s, 152 lists/s, loss 1.2011; validation 4.21 s, ...

    The summary's rate counts training time only. ``clock``: a monotonic clock.
    """

    def __init__(
        self,
        lists_per_epoch: int,
        steps_per_epoch: int,
        *,
        every_steps: int | None = None,
        every_seconds: float | None = 30.0,
        clock: Callable[[], float] = time.monotonic,
    ):
        super().__init__()
        self.lists_per_epoch, self.steps_per_epoch = lists_per_epoch, max(1, steps_per_epoch)
        self.every_steps, self.every_seconds, self.clock = every_steps, every_seconds, clock
        self._epoch = self._step = self._last_step = 0
        self._start = self._last_time = self._step_time = 0.0

    def _rate(self, step: int, seconds: float) -> str:
        steps = self.steps_per_epoch
        lists = round(self.lists_per_epoch * min(step, steps) / steps)
        return f"{_amount(lists / max(seconds, 1e-9))} lists/s"

    def _label(self) -> str:
        epochs = (getattr(self, "params", None) or {}).get("epochs")
        return f"epoch {self._epoch + 1}" + (f"/{epochs}" if epochs else "")

    def on_epoch_begin(self, epoch, logs=None):
        self._epoch = epoch
        self._start = self._last_time = self._step_time = self.clock()
        self._step = self._last_step = 0

    def on_train_batch_end(self, batch, logs=None):
        # Keras passes the index of the last step run (several under steps_per_execution).
        now, step, steps = self.clock(), batch + 1, self.steps_per_epoch
        self._step, self._step_time = step, now
        due_steps = self.every_steps is not None and step - self._last_step >= self.every_steps
        due_time = self.every_seconds is not None and now - self._last_time >= self.every_seconds
        if not (due_steps or due_time):
            return
        self._last_step, self._last_time, elapsed = step, now, now - self._start
        line = f"{self._label()} step {step}/{steps} ({100 * min(step, steps) // steps}%) "
        line += f"{_amount(elapsed)} s, {self._rate(step, elapsed)}"
        if logs and "loss" in logs:
            line += f", loss {_metric(logs['loss'])}"
        logger.info("%s, epoch ETA %s s", line, _amount(max(steps - step, 0) * elapsed / step))

    def on_epoch_end(self, epoch, logs=None):
        logs, train = logs or {}, self._step_time - self._start
        line = f"{self._label()} done: {self._step} steps in {_amount(train)} s, "
        line += self._rate(self._step, train)
        if "loss" in logs:
            line += f", loss {_metric(logs['loss'])}"
        validation = [f"{k} {_metric(v)}" for k, v in logs.items() if k.startswith("val_")]
        if validation:
            line += f"; validation {_amount(self.clock() - self._step_time)} s, "
            line += ", ".join(validation)
        logger.info("%s", line)


class BestWeights(tf.keras.callbacks.Callback):
    """Saves the whole model's weights when ``monitor`` improves (``None``: every epoch);
    every worker follows the chief and saves (collectively), the others to scratch."""

    def __init__(
        self,
        model: tf.keras.Model,
        path: str,
        *,
        monitor: str | None,
        mode: str,
        history: str,
        worker: WorkerRole | None = None,
        strategy: tf.distribute.Strategy | None = None,
    ):
        super().__init__()
        self.whole = model
        self.path = path
        self.monitor = monitor
        self.sign = 1.0 if mode == "max" else -1.0
        self.best = -math.inf
        self.worker = worker or WorkerRole()
        self.strategy = strategy
        # A resumed run must beat the epochs logged before it was stopped.
        if monitor and os.path.isfile(history):
            with open(history, encoding="utf-8") as f:
                for row in csv.DictReader(f):
                    if row.get(monitor):
                        self.best = max(self.best, self.sign * float(row[monitor]))

    def on_epoch_end(self, epoch, logs=None):
        if self.monitor is not None:
            value = (logs or {}).get(self.monitor)
            improved = value is not None and self.sign * value > self.best
            if self.worker.multi_worker:
                # A non-chief may have read a history the chief has since replaced.
                improved = chief_values(self.strategy, [float(improved)])[0] > 0
            if not improved:
                return
            self.best = self.sign * value
        if self.worker.is_chief:
            self.whole.save_weights(self.path)
            fault_points.reached("train.checkpoint")
            return
        scratch = tempfile.mkdtemp(prefix="tfr-best-weights-")
        try:
            self.whole.save_weights(os.path.join(scratch, os.path.basename(self.path)))
        finally:
            shutil.rmtree(scratch, ignore_errors=True)
