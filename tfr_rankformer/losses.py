"""Losses: TF-Ranking's listwise losses on item scores, and the RankFormer's listwide loss.

The RankFormer (Buyl et al., KDD 2023) minimises
``L = L_softmax(s, y) + alpha * L_ordinal(d, t)``: ``L_softmax = -y^T log softmax(s)``
is TF-Ranking's ``SoftmaxLoss``, and the ordinal listwide loss is defined here.
"""

from __future__ import annotations

import tensorflow as tf

__all__ = ["OrdinalListLoss", "SCORE_LOSSES", "get_score_loss"]


@tf.keras.utils.register_keras_serializable(package="tfr_rankformer")
class OrdinalListLoss(tf.keras.losses.Loss):
    """The RankFormer's ordinal listwide loss on the list label ``t = max_i y_i``.

    ``L_ordinal(d, t) = sum_{k=1..K} BCE(sigmoid(d_k), 1[t >= k])``, with one
    logit ``d_k`` per label level above 0 (paper Sec. 4.2).

    Args:
      num_levels: ``K``, the highest label value.

    Call args:
      y_true: ``[batch, 1]`` float list labels ``t``.
      y_pred: ``[batch, K]`` logits.
    """

    def __init__(self, num_levels: int, name: str = "ordinal_list_loss", **kwargs):
        super().__init__(name=name, **kwargs)
        self.num_levels = num_levels

    def call(self, y_true, y_pred):
        t = tf.cast(y_true, tf.float32)  # [B, 1]
        levels = tf.range(1, self.num_levels + 1, dtype=tf.float32)  # [K]
        targets = tf.cast(t >= levels, tf.float32)  # [B, 1] vs [K] -> [B, K]
        losses = tf.nn.sigmoid_cross_entropy_with_logits(targets, tf.cast(y_pred, tf.float32))
        return tf.reduce_sum(losses, axis=-1)  # [B, K] -> [B]

    def get_config(self):
        config = super().get_config()
        config.update(num_levels=self.num_levels)
        return config


def _softmax():
    import tensorflow_ranking as tfr

    return tfr.keras.losses.SoftmaxLoss(name="softmax_loss")


# Losses on item scores; TF-Ranking's own wherever it has the loss.
SCORE_LOSSES = {"softmax": _softmax}


def get_score_loss(name: str) -> tf.keras.losses.Loss:
    """The item-score loss called ``name``."""
    if name not in SCORE_LOSSES:
        raise ValueError(f"Unknown loss {name!r}; choose from {sorted(SCORE_LOSSES)}")
    return SCORE_LOSSES[name]()
