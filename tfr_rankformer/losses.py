"""Losses: a registry of item-score losses, and the RankFormer's listwide loss.

The RankFormer (Buyl et al., KDD 2023) minimises
``L = L_softmax(s, y) + alpha * L_ordinal(d, t)``: ``L_softmax = -y^T log softmax(s)``
is TF-Ranking's ``SoftmaxLoss``, and the ordinal listwide loss is defined here.
Any registered item-score loss (``--loss``) can take the softmax's place; they
are TF-Ranking's wherever TF-Ranking has the loss. Padding items carry
negative labels, which every loss ignores.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import tensorflow as tf

from tfr_rankformer.command_names import LOSS_SUMMARIES

__all__ = [
    "OrdinalListLoss",
    "PerListLoss",
    "ScaledSigmoidRMSE",
    "ScoreLoss",
    "SCORE_LOSSES",
    "get_score_loss",
]


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


class _LambdaWeights:
    """A sum of TF-Ranking's NDCG lambda weights, ``sum_k factor_k * w_k``, for
    ``PairwiseLogisticLoss``.

    TF-Ranking scales its DCG lambda weights by the padded list size (a
    heuristic that keeps their magnitude near the unweighted loss's); here each
    list is scaled by its own number of valid items instead, so padding a list
    changes nothing.

    Args:
      parts: ``(factor, lambda_weight)`` pairs.
    """

    def __init__(self, parts):
        self.parts = list(parts)

    def pair_weights(self, labels, ranks):
        total = sum(factor * weight.pair_weights(labels, ranks) for factor, weight in self.parts)
        padded = tf.cast(tf.shape(labels)[1], tf.float32)
        valid = tf.reduce_sum(tf.cast(labels >= 0.0, tf.float32), axis=1)  # [B]
        return total * (valid / padded)[:, tf.newaxis, tf.newaxis]

    def individual_weights(self, labels, ranks):
        del ranks
        return labels


def _lambdarank_weights():
    """LambdaRank's NDCG swap weights ``|G_i - G_j| |1/D(r_i) - 1/D(r_j)| / maxDCG``."""
    return _LambdaWeights([(1.0, _tfr().NDCGLambdaWeight())])


def _ndcg_loss2pp_weights(mu: float):
    """LambdaLoss's NDCG-Loss2++ weights (Wang et al., CIKM 2018):
    ``|G_i - G_j| (rho_ij + mu * delta_ij) / maxDCG``, with ``rho`` LambdaRank's
    discount difference (TF-Ranking's ``NDCGLambdaWeight``) and
    ``delta_ij = |1/D(|r_i - r_j|) - 1/D(|r_i - r_j| + 1)|`` NDCG-Loss2's
    (``NDCGLambdaWeightV2``)."""
    tfr = _tfr()
    return _LambdaWeights([(1.0, tfr.NDCGLambdaWeight()), (mu, tfr.NDCGLambdaWeightV2())])


@tf.keras.utils.register_keras_serializable(package="tfr_rankformer")
class ScaledSigmoidRMSE(tf.keras.losses.Loss):
    """RMSE of ``max_label * sigmoid(s)`` against the labels, per list (allRank's ``rmse``).

    ``sqrt(mean_i (y_i - max_label * sigmoid(s_i))^2)`` over the list's valid
    items (labels >= 0), averaged over lists. The sigmoid squashes the score
    into the label range; the ranking uses ``s`` itself (same order). A list
    without valid items contributes 0 with zero gradient.

    Call args:
      y_true: ``[batch, list]`` labels, negative for padding.
      y_pred: ``[batch, list]`` scores.
    """

    def __init__(self, max_label: float, name: str = "rmse_loss", **kwargs):
        super().__init__(name=name, **kwargs)
        self.max_label = float(max_label)

    def call(self, y_true, y_pred):
        labels = tf.cast(y_true, tf.float32)
        valid = labels >= 0.0
        predicted = self.max_label * tf.sigmoid(tf.cast(y_pred, tf.float32))
        errors = tf.where(valid, labels - predicted, 0.0)
        counts = tf.reduce_sum(tf.cast(valid, tf.float32), axis=-1)  # [B]
        mse = tf.reduce_sum(errors * errors, axis=-1) / tf.maximum(counts, 1.0)
        # sqrt has an infinite slope at 0: lists with no error (or no item) take 0.
        safe = tf.where(mse > 0.0, mse, 1.0)
        return tf.where(mse > 0.0, tf.sqrt(safe), 0.0)

    def get_config(self):
        config = super().get_config()
        config.update(max_label=self.max_label)
        return config


def _tfr():
    import tensorflow_ranking as tfr

    return tfr.keras.losses


@tf.keras.utils.register_keras_serializable(package="tfr_rankformer")
class PerListLoss(tf.keras.losses.Loss):
    """A TF-Ranking loss summed within each list, then averaged over lists.

    TF-Ranking's Keras losses average over every element of their unreduced
    loss: over ``batch * list`` items (ordinal) or ``batch * list * list``
    pairs (pairwise), padding included, so padding a list would shrink its
    loss. Summed per list (over valid items or pairs only), a padded item
    changes nothing. Listwise losses (one value per list) are unchanged.

    Args:
      loss: a TF-Ranking Keras loss; it is called with ``Reduction.NONE``.
    """

    def __init__(self, loss, name: str | None = None, **kwargs):
        super().__init__(name=name or loss.name, **kwargs)
        loss.reduction = tf.keras.losses.Reduction.NONE
        self.ranking_loss = loss

    def call(self, y_true, y_pred):
        per_element = self.ranking_loss(y_true, y_pred)  # [B] or [B, ...]
        rank = per_element.shape.rank
        return tf.reduce_sum(per_element, axis=list(range(1, rank))) if rank > 1 else per_element


@dataclasses.dataclass(frozen=True)
class ScoreLoss:
    """A registered item-score loss.

    Attributes:
      build: ``max_label -> tf.keras.losses.Loss``.
      output: the model output it reads: ``"scores"`` ``[B, L]``, or
        ``"item_levels"`` ``[B, L, K]`` (one logit per label level above 0;
        the model's score is then the sum of the level probabilities).
      summary: one line for ``--help`` and the README.
    """

    build: Callable[[int], tf.keras.losses.Loss]
    output: str = "scores"
    summary: str = ""


# Losses on item scores, TF-Ranking's own wherever it has the loss.
SCORE_LOSSES = {
    "softmax": ScoreLoss(
        lambda _: PerListLoss(_tfr().SoftmaxLoss(name="softmax_loss")),
        summary=LOSS_SUMMARIES["softmax"],
    ),
    "ordinal": ScoreLoss(
        lambda k: PerListLoss(_tfr().OrdinalLoss(name="ordinal_loss", ordinal_size=k)),
        output="item_levels",
        summary=LOSS_SUMMARIES["ordinal"],
    ),
    "approx_ndcg": ScoreLoss(
        lambda _: PerListLoss(_tfr().ApproxNDCGLoss(name="approx_ndcg_loss")),
        summary=LOSS_SUMMARIES["approx_ndcg"],
    ),
    "listmle": ScoreLoss(
        lambda _: PerListLoss(_tfr().ListMLELoss(name="listmle_loss")),
        summary=LOSS_SUMMARIES["listmle"],
    ),
    "ranknet": ScoreLoss(
        lambda _: PerListLoss(_tfr().PairwiseLogisticLoss(name="ranknet_loss")),
        summary=LOSS_SUMMARIES["ranknet"],
    ),
    "lambdarank": ScoreLoss(
        lambda _: PerListLoss(
            _tfr().PairwiseLogisticLoss(name="lambdarank_loss", lambda_weight=_lambdarank_weights())
        ),
        summary=LOSS_SUMMARIES["lambdarank"],
    ),
    "ndcg_loss2pp": ScoreLoss(
        lambda _: PerListLoss(
            _tfr().PairwiseLogisticLoss(
                name="ndcg_loss2pp_loss", lambda_weight=_ndcg_loss2pp_weights(mu=10.0)
            )
        ),
        summary=LOSS_SUMMARIES["ndcg_loss2pp"],
    ),
    "rmse": ScoreLoss(
        lambda k: ScaledSigmoidRMSE(k),
        summary=LOSS_SUMMARIES["rmse"],
    ),
}


def get_score_loss(name: str) -> ScoreLoss:
    """The registered item-score loss called ``name``."""
    if name not in SCORE_LOSSES:
        raise ValueError(f"Unknown loss {name!r}; choose from {sorted(SCORE_LOSSES)}")
    return SCORE_LOSSES[name]
