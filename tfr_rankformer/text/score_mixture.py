"""A re-ranker's score as a residual over what ranks the lists before training.

``s_j = h(z_j) + a * std(cos_j) + b * std(f_j)``: the head on ``[SEP]_j``, the checkpoint's
cosine and the first stage's score standardised per list, with learned ``a``, ``b``. The head
starts at zero, ``a`` at 1, ``b`` at 0 (1 alone), so the untrained model ranks as the
checkpoint does. Weights are stored divided by ``_RATE`` so that Adam at a fine-tuning rate
moves them.
"""

from __future__ import annotations

import tensorflow as tf

from tfr_rankformer.model.serializable import serializable

__all__ = ["ScoreMixture", "standardized"]

_RATE = 100.0
_EPSILON = 1e-6


def standardized(values: tf.Tensor, mask: tf.Tensor) -> tf.Tensor:
    """``values [B, N]`` standardised over each list's valid documents (``mask [B, N]``);
    0 on padding and where all are equal.

    >>> values, mask = tf.constant([[1.0, 3.0, 9.0]]), tf.constant([[True, True, False]])
    >>> standardized(values, mask).numpy().round(4)
    array([[-1.,  1.,  0.]], dtype=float32)
    """
    weights = tf.cast(mask, values.dtype)
    count = tf.maximum(tf.reduce_sum(weights, axis=-1, keepdims=True), 1.0)  # [B, 1]
    mean = tf.reduce_sum(values * weights, axis=-1, keepdims=True) / count
    centred = (values - mean) * weights
    deviation = tf.sqrt(tf.reduce_sum(tf.square(centred), axis=-1, keepdims=True) / count)
    return tf.math.divide_no_nan(
        centred, deviation + _EPSILON * tf.cast(deviation > 0, values.dtype)
    )


@serializable
class ScoreMixture(tf.keras.layers.Layer):
    """``scores + a * std(signal_1) + b * std(signal_2) ...``; ``signals`` names them in
    call order, ``initial`` gives their starting weights (one for all or one each)."""

    def __init__(self, signals=("similarity",), initial=1.0, **kwargs):
        kwargs["dtype"] = "float32"
        super().__init__(**kwargs)
        self.signals = list(signals)
        if isinstance(initial, (int, float)):
            initial = [initial] * len(self.signals)
        if len(initial) != len(self.signals):
            raise ValueError(f"{len(initial)} initial weights for signals {self.signals}")
        self.initial = [float(v) for v in initial]

    def build(self, input_shape):
        self.weights_by_signal = {
            name: self.add_weight(
                name=f"{name}_weight",
                shape=(),
                initializer=tf.keras.initializers.Constant(initial / _RATE),
            )
            for name, initial in zip(self.signals, self.initial)
        }
        super().build(input_shape)

    def call(self, scores, mask, *signals):
        """``scores [B, N]``, ``mask [B, N]`` bool, one ``[B, N]`` tensor per signal."""
        out = tf.cast(scores, tf.float32)
        for name, signal in zip(self.signals, signals):
            weight = _RATE * self.weights_by_signal[name]
            out += weight * standardized(tf.cast(signal, tf.float32), mask)
        return out

    def mixing_weights(self) -> dict:
        """Each signal's weight ``a``, ``b`` ... as the scores use it."""
        return {name: float(_RATE * w.numpy()) for name, w in self.weights_by_signal.items()}
