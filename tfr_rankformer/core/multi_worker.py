"""Multi-worker training: this process's place in the job, and values shared from the chief.
The training workers of ``TF_CONFIG`` are the ``chief`` task, if any, then the ``worker``
tasks, numbered as ``MultiWorkerMirroredStrategy`` does; other task types do not train.
"""

from __future__ import annotations

import dataclasses
import json
import os

import tensorflow as tf

_TRAINING_TASKS = ("chief", "worker")


@dataclasses.dataclass(frozen=True)
class WorkerRole:
    """One training worker's ``index`` among the job's ``count`` (the chief is 0)."""

    index: int = 0
    count: int = 1

    def __post_init__(self):
        if self.count < 1 or not 0 <= self.index < self.count:
            raise ValueError(f"worker index must be in [0, {self.count}), got {self.index}")

    @property
    def is_chief(self) -> bool:
        """The worker that writes the run's files."""
        return self.index == 0

    @property
    def multi_worker(self) -> bool:
        return self.count > 1


def worker_role(tf_config: str | dict | None = None) -> WorkerRole:
    """This worker's role in ``tf_config`` (default: ``$TF_CONFIG``); a ``ValueError``
    names what is wrong with it."""
    if tf_config is None:
        tf_config = os.environ.get("TF_CONFIG", "")
    if isinstance(tf_config, str):
        try:
            tf_config = json.loads(tf_config) if tf_config.strip() else {}
        except json.JSONDecodeError as e:
            raise ValueError(f"TF_CONFIG is not valid JSON: {e}") from None
    cluster = tf_config.get("cluster") or {}
    chiefs = len(cluster.get("chief", []))
    count = chiefs + len(cluster.get("worker", []))
    if count <= 1:
        return WorkerRole()
    task = tf_config.get("task") or {}
    kind, index = task.get("type"), int(task.get("index", 0))
    if kind not in _TRAINING_TASKS:
        raise ValueError(
            f"TF_CONFIG task type {kind!r} does not train; run tfr-train as one of "
            f"{_TRAINING_TASKS}"
        )
    if index >= len(cluster.get(kind, [])):
        raise ValueError(f"TF_CONFIG names {kind} {index}, but the cluster has no such task")
    return WorkerRole(index=index + (chiefs if kind == "worker" else 0), count=count)


def chief_values(strategy: tf.distribute.Strategy, values: list[float]) -> list[float]:
    """The chief's ``values`` on every worker (all must call it)."""
    local = tf.constant(values, tf.float64)
    contributions = strategy.experimental_distribute_values_from_function(
        lambda context: local if context.replica_id_in_sync_group == 0 else tf.zeros_like(local)
    )
    return strategy.reduce(tf.distribute.ReduceOp.SUM, contributions, axis=None).numpy().tolist()


class SharedValidation(tf.keras.callbacks.Callback):
    """Gives every worker the chief's ``val_*`` logs: workers that rounded differently
    could otherwise stop early apart, and their collective steps would stop matching."""

    def __init__(self, strategy: tf.distribute.Strategy):
        super().__init__()
        self.strategy = strategy

    def on_epoch_end(self, epoch, logs=None):
        keys = sorted(k for k in (logs or {}) if k.startswith("val_"))
        if keys:
            logs.update(zip(keys, chief_values(self.strategy, [float(logs[k]) for k in keys])))
