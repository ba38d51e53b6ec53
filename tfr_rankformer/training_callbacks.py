"""The training loop's own Keras callbacks: throughput in the logs, and the best weights."""

from __future__ import annotations

import csv
import math
import os
import shutil
import tempfile
import time

import tensorflow as tf

from tfr_rankformer.multi_worker import WorkerRole, chief_values

__all__ = ["Throughput", "BestWeights"]


class Throughput(tf.keras.callbacks.Callback):
    """Adds ``lists_per_sec`` (training lists per second so far in the epoch) to the logs,
    so the progress bar shows it after every batch."""

    def __init__(self, lists_per_epoch: int, batch_size: int):
        super().__init__()
        self.lists_per_epoch = lists_per_epoch
        self.batch_size = batch_size

    def on_epoch_begin(self, epoch, logs=None):
        self._start = time.perf_counter()

    def _rate(self, lists: int) -> float:
        return lists / max(time.perf_counter() - self._start, 1e-9)

    def on_train_batch_end(self, batch, logs=None):
        if logs is not None:
            logs["lists_per_sec"] = self._rate(
                min((batch + 1) * self.batch_size, self.lists_per_epoch)
            )

    def on_epoch_end(self, epoch, logs=None):
        if logs is not None:
            logs["lists_per_sec"] = self._rate(self.lists_per_epoch)


class BestWeights(tf.keras.callbacks.Callback):
    """Saves the whole model's weights (normalisation included) when ``monitor`` improves,
    or after every epoch when ``monitor`` is ``None`` (so the last epoch's are kept).

    Under multi-worker training (``strategy`` given) every worker follows the
    chief's decision, and every worker saves, since saving may read variables
    collectively: the chief to ``path``, the others to a scratch directory that
    they delete at once.
    """

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
            return
        scratch = tempfile.mkdtemp(prefix="tfr-best-weights-")
        try:
            self.whole.save_weights(os.path.join(scratch, os.path.basename(self.path)))
        finally:
            shutil.rmtree(scratch, ignore_errors=True)
