"""A re-ranker's score as a residual over what is known before training.

A Listformer started from a sentence encoder (``--init-from``) re-ranks a
first stage's candidates. Two signals rank them before any training:

- the checkpoint's own similarity: the cosine of the mean-pooled embeddings
  of the query and of each document, as the checkpoint was trained to score
  (``sentence_tower``);
- the first stage's score (BM25's, from the run the lists came from).

``ScoreMixture`` adds them to the Listformer's own score::

    s_j = h(z_j) + a * std(cos_j) + b * std(f_j)

where ``h(z_j)`` is the score head on document ``j``'s closing ``[SEP]``,
``std`` standardises a signal over the list's documents (mean 0, deviation 1,
so that neither signal's scale matters and one list's scores compare with
another's), and ``a`` and ``b`` are learned. The head's kernel starts at zero,
``a`` at 1 and ``b`` at 0 (at 1 when there is no similarity), so before the
first step the model ranks exactly as the checkpoint's similarity does, with
or without a first stage: an equal mix would start some collections below
the similarity (one of Cranfield's folds). Fine-tuning learns what to add to
it and how much of the first stage to take, rather than having to find again
what the checkpoint knew.

``a`` and ``b`` are stored divided by ``_RATE`` (100): Adam moves a weight by
about the learning rate per step whatever its gradient's scale, and a
fine-tuning rate (1e-4) would leave them where they start for hundreds of
steps; stored this way they move 100 times as fast.
"""

from __future__ import annotations

import tensorflow as tf

__all__ = ["ScoreMixture", "standardized"]

_RATE = 100.0
_EPSILON = 1e-6


def standardized(values: tf.Tensor, mask: tf.Tensor) -> tf.Tensor:
    """``values [B, N]`` standardised over each list's valid documents (``mask [B, N]``):
    mean 0, deviation 1 (a list whose values are all equal: 0); 0 on padding.

    >>> standardized(tf.constant([[1.0, 3.0, 9.0]]), tf.constant([[True, True, False]])).numpy()
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


@tf.keras.utils.register_keras_serializable(package="tfr_rankformer")
class ScoreMixture(tf.keras.layers.Layer):
    """``scores + a * std(signal_1) + b * std(signal_2) ...`` over a list's documents.

    Args:
      signals: the names of the signals added, in call order (e.g.
        ``("similarity", "first_stage")``), each with its own weight.
      initial: the weights' values before training: one for all, or one per signal.
    """

    def __init__(self, signals=("similarity",), initial=1.0, **kwargs):
        super().__init__(dtype="float32", **kwargs)
        self.signals = tuple(signals)
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

    def get_config(self):
        config = super().get_config()
        config.pop("dtype", None)
        return {**config, "signals": list(self.signals), "initial": self.initial}
