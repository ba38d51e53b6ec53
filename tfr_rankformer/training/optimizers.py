"""The optimizers (``adamw``, ``adam``; epsilon placed as ``torch.optim`` or as Keras) and
learning-rate schedules of ``tfr-train`` runs.
"""

from __future__ import annotations

import tensorflow as tf

from tfr_rankformer.model.serializable import serializable
from tfr_rankformer.training.train_config import TrainConfig


class _PyTorchEpsilon:
    """Adam's update with epsilon added to the bias-corrected ``sqrt(v_hat)``, as
    ``torch.optim``; the rest is Keras's. Sparse gradients are made dense."""

    def update_step(self, gradient, variable):
        if self.amsgrad:
            raise ValueError("amsgrad is not supported with PyTorch's epsilon")
        dtype = variable.dtype
        rate = tf.cast(self.learning_rate, dtype)
        step = tf.cast(self.iterations + 1, dtype)
        beta_1, beta_2 = tf.cast(self.beta_1, dtype), tf.cast(self.beta_2, dtype)
        index = self._index_dict[self._var_key(variable)]
        m, v = self._momentums[index], self._velocities[index]
        gradient = tf.convert_to_tensor(gradient)
        m.assign_add((gradient - m) * (1 - beta_1))
        v.assign_add((tf.square(gradient) - v) * (1 - beta_2))
        step_size = rate / (1 - tf.pow(beta_1, step))
        corrected_sqrt_v = tf.sqrt(v) / tf.sqrt(1 - tf.pow(beta_2, step))
        variable.assign_sub(m * step_size / (corrected_sqrt_v + self.epsilon))


@serializable
class PyTorchAdam(_PyTorchEpsilon, tf.keras.optimizers.Adam):
    """Keras's ``Adam`` with ``torch.optim.Adam``'s epsilon placement."""


@serializable
class PyTorchAdamW(_PyTorchEpsilon, tf.keras.optimizers.AdamW):
    """Keras's ``AdamW`` with ``torch.optim.AdamW``'s epsilon placement."""


class _Schedule(tf.keras.optimizers.schedules.LearningRateSchedule):
    def get_config(self):  # the base raises; subclasses add their arguments
        return {}


@serializable
class InverseSqrtDecay(_Schedule):
    """Constant rate, then ``rate * sqrt(start / step)`` from step ``start`` on, per step
    (``lr_schedule="step_inverse_sqrt"``)."""

    def __init__(self, learning_rate: float, start_step: int):
        self.learning_rate = learning_rate
        self.start_step = start_step

    def __call__(self, step):
        step = tf.cast(step, tf.float32)
        start = tf.cast(max(self.start_step, 1), tf.float32)
        factor = tf.minimum(1.0, tf.sqrt(start / tf.maximum(step, 1.0)))
        return self.learning_rate * factor


@serializable
class EpochSchedule(_Schedule):
    """A rate that changes once per epoch ``e``, as PyTorch's ``LambdaLR``/``StepLR``:
    ``epoch_inverse_sqrt`` ``(e - start + 1) ** -0.5`` from ``start``; ``step_decay``
    ``0.1 ** (e // start)``."""

    def __init__(self, learning_rate: float, steps_per_epoch: int, kind: str, start: int):
        if kind not in ("epoch_inverse_sqrt", "step_decay"):
            raise ValueError(f"Unknown per-epoch schedule {kind!r}")
        self.learning_rate = learning_rate
        self.steps_per_epoch = steps_per_epoch
        self.kind = kind
        self.start = start

    def __call__(self, step):
        epoch = tf.math.floordiv(tf.cast(step, tf.int64), max(self.steps_per_epoch, 1))
        epoch = tf.cast(epoch, tf.float32)
        start = float(max(self.start, 1))
        if self.kind == "step_decay":
            factor = tf.pow(0.1, tf.floor(epoch / start))
        else:
            factor = tf.where(epoch < start, 1.0, tf.math.rsqrt(tf.maximum(epoch - start + 1, 1)))
        return self.learning_rate * factor


def learning_rate_schedule(config: TrainConfig, steps_per_epoch: int):
    """The run's learning-rate schedule (``config.lr_schedule``)."""
    if config.lr_schedule == "step_inverse_sqrt":
        start = config.decay_after_epoch * steps_per_epoch
        return InverseSqrtDecay(config.learning_rate, start)
    return EpochSchedule(
        config.learning_rate, steps_per_epoch, config.lr_schedule, config.decay_after_epoch
    )


def build_optimizer(config: TrainConfig, steps_per_epoch: int) -> tf.keras.optimizers.Optimizer:
    """The run's optimizer with its learning-rate schedule."""
    schedule = learning_rate_schedule(config, steps_per_epoch)
    pytorch = config.adam_epsilon == "pytorch"
    # epsilon 1e-8: PyTorch's default, which both reference implementations use.
    if config.optimizer == "adam":
        adam = PyTorchAdam if pytorch else tf.keras.optimizers.Adam
        return adam(learning_rate=schedule, epsilon=1e-8)
    adamw = PyTorchAdamW if pytorch else tf.keras.optimizers.AdamW
    return adamw(learning_rate=schedule, weight_decay=config.weight_decay, epsilon=1e-8)
