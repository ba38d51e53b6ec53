"""Losses: a registry of item-score losses, the RankFormer's listwide loss, and how
both are averaged over a batch.

The RankFormer (Buyl et al., KDD 2023) minimises
``L = L_softmax(s, y) + alpha * L_ordinal(d, t)``: ``L_softmax = -y^T log softmax(s)``
is TF-Ranking's ``SoftmaxLoss``, and the ordinal listwide loss is defined here.
Any registered item-score loss (``--loss``) can take the softmax's place; they
are TF-Ranking's wherever TF-Ranking has the loss. Padding items carry
negative labels, which every loss ignores.

Two loss scalings (``LOSS_SCALINGS``) decide how the per-list values become
the batch's loss:

* ``released`` (default), as the authors' released code: each list's item-score
  loss is a mean over the list's items (``-(y * log softmax(s)).mean()``), lists
  whose loss is exactly zero (for the softmax, lists with ``t = 0``) are left out
  of the mean over lists (none left: loss 0, zero gradient), and the listwide
  loss is the mean of its binary cross-entropies over the ``K`` levels, averaged
  over every list. Their ``alpha`` (``list_pred_strength``) 1 stands for the
  paper's 0.25 (their README).
* ``paper``: Eq. 9 as printed: the item-score loss summed within a list, the
  listwide loss summed over the levels, both averaged over every list.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import tensorflow as tf

from tfr_rankformer.core.command_names import LOSS_SCALINGS, LOSS_SUMMARIES

__all__ = [
    "LOSS_SCALINGS",
    "ListAverage",
    "ListNetLoss",
    "OrdinalListLoss",
    "PerListLoss",
    "ScaledSigmoidRMSE",
    "ScoreLoss",
    "SCORE_LOSSES",
    "get_score_loss",
    "check_scaling",
]

_serializable = tf.keras.utils.register_keras_serializable(package="tfr_rankformer")


def check_scaling(scaling: str) -> str:
    """``scaling`` if it is a known loss scaling, else a ``ValueError``."""
    if scaling not in LOSS_SCALINGS:
        raise ValueError(f"Unknown loss scaling {scaling!r}; choose from {list(LOSS_SCALINGS)}")
    return scaling


@_serializable
class OrdinalListLoss(tf.keras.losses.Loss):
    """The RankFormer's ordinal listwide loss on the list label ``t = max_i y_i``.

    Per list, the binary cross-entropies ``BCE(sigmoid(d_k), 1[t >= k])`` of the
    ``K`` logits ``d_k``, one per label level above 0 (paper Sec. 4.2), are
    averaged over the levels (``level_mean``, the released code's
    ``binary_cross_entropy_with_logits``) or summed (Eq. 9 as printed).

    Args:
      num_levels: ``K``, the highest label value.
      level_mean: average over the levels rather than sum.

    Call args:
      y_true: ``[batch, 1]`` float list labels ``t``.
      y_pred: ``[batch, K]`` logits.
    """

    def __init__(
        self,
        num_levels: int,
        level_mean: bool = True,
        name: str = "ordinal_list_loss",
        **kwargs,
    ):
        super().__init__(name=name, **kwargs)
        self.num_levels = num_levels
        self.level_mean = level_mean

    def call(self, y_true, y_pred):
        t = tf.cast(y_true, tf.float32)  # [B, 1]
        levels = tf.range(1, self.num_levels + 1, dtype=tf.float32)  # [K]
        targets = tf.cast(t >= levels, tf.float32)  # [B, 1] vs [K] -> [B, K]
        losses = tf.nn.sigmoid_cross_entropy_with_logits(targets, tf.cast(y_pred, tf.float32))
        reduce = tf.reduce_mean if self.level_mean else tf.reduce_sum
        return reduce(losses, axis=-1)  # [B, K] -> [B]

    def get_config(self):
        config = super().get_config()
        config.update(num_levels=self.num_levels, level_mean=self.level_mean)
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


@_serializable
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


@_serializable
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


@_serializable
class ListNetLoss(tf.keras.losses.Loss):
    """ListNet's top-one cross-entropy (Cao et al., ICML 2007; allRank's ``listNet``).

    Per list, ``-sum_i softmax(y)_i log softmax(s)_i`` over the valid items
    (labels >= 0): the target is the labels' softmax, where TF-Ranking's
    ``SoftmaxLoss`` (``softmax``) uses the labels themselves. A list whose
    labels are all equal has a uniform target, so unlike the softmax loss it
    still has a loss; a list without valid items has 0.

    Call args:
      y_true: ``[batch, list]`` labels, negative for padding.
      y_pred: ``[batch, list]`` scores.

    Returns:
      ``[batch]`` per-list losses.
    """

    def __init__(self, name: str = "listnet_loss", **kwargs):
        super().__init__(name=name, **kwargs)

    def call(self, y_true, y_pred):
        labels = tf.cast(y_true, tf.float32)
        valid = labels >= 0.0
        lowest = tf.constant(-1e9, tf.float32)  # exp() of it is 0: padding leaves both softmaxes
        target = tf.nn.softmax(tf.where(valid, labels, lowest), axis=-1)
        log_scores = tf.nn.log_softmax(tf.where(valid, tf.cast(y_pred, tf.float32), lowest), -1)
        terms = tf.where(valid, target * log_scores, 0.0)
        any_valid = tf.reduce_any(valid, axis=-1)
        return tf.where(any_valid, -tf.reduce_sum(terms, axis=-1), 0.0)


@_serializable
class ListAverage(tf.keras.losses.Loss):
    """A per-list loss averaged over a batch's lists, as a loss scaling asks.

    Args:
      per_list: a loss whose ``call`` gives one value per list, ``[batch]``.
      item_mean: divide each list's value by its number of valid items (labels
        >= 0), turning a sum over the list into a mean.
      skip_zero_lists: average over the lists whose loss is not exactly zero
        only; with none, the loss is 0 with a zero gradient. Otherwise over every
        list.

    Under a ``tf.distribute`` strategy each replica averages its own lists, and
    Keras divides by the number of replicas before the gradients are summed.
    """

    def __init__(
        self,
        per_list: tf.keras.losses.Loss,
        *,
        item_mean: bool,
        skip_zero_lists: bool,
        name: str | None = None,
        **kwargs,
    ):
        super().__init__(name=name or per_list.name, **kwargs)
        self.per_list = per_list
        self.item_mean = item_mean
        self.skip_zero_lists = skip_zero_lists

    def call(self, y_true, y_pred):
        values = tf.cast(self.per_list.call(y_true, y_pred), tf.float32)  # [B]
        if self.item_mean:
            counts = tf.reduce_sum(tf.cast(tf.cast(y_true, tf.float32) >= 0.0, tf.float32), -1)
            values = values / tf.maximum(counts, 1.0)
        return values

    def __call__(self, y_true, y_pred, sample_weight=None):
        if sample_weight is not None:
            raise ValueError(f"{self.name} takes no sample weights")
        if not self.skip_zero_lists:
            return super().__call__(y_true, y_pred)
        with tf.name_scope(self.name):
            values = self.call(y_true, y_pred)
            counted = tf.reduce_sum(tf.cast(tf.not_equal(values, 0.0), tf.float32))
            return tf.reduce_sum(values) / tf.maximum(counted, 1.0)

    def get_config(self):
        config = super().get_config()
        config.update(item_mean=self.item_mean, skip_zero_lists=self.skip_zero_lists)
        return config


@dataclasses.dataclass(frozen=True)
class ScoreLoss:
    """A registered item-score loss.

    Attributes:
      per_list: ``max_label -> tf.keras.losses.Loss`` whose ``call`` gives one
        value per list.
      output: the model output it reads: ``"scores"`` ``[B, L]``, or
        ``"item_levels"`` ``[B, L, K]`` (one logit per label level above 0;
        the model's score is then the sum of the level probabilities).
      item_sum: the per-list value is a sum over the list's items (or pairs),
        which the ``released`` scaling turns into a mean over its items.
      summary: one line for ``--help`` and the README.
    """

    per_list: Callable[[int], tf.keras.losses.Loss]
    output: str = "scores"
    item_sum: bool = True
    summary: str = ""

    def build(self, max_label: int, scaling: str = "released") -> tf.keras.losses.Loss:
        """The batch loss under ``scaling`` (see ``LOSS_SCALINGS``)."""
        released = check_scaling(scaling) == "released"
        return ListAverage(
            self.per_list(max_label),
            item_mean=released and self.item_sum,
            skip_zero_lists=released,
        )


def _tfr_loss(class_name: str, **kwargs) -> Callable[[int], tf.keras.losses.Loss]:
    """A registry entry: TF-Ranking's ``class_name`` loss summed within each list."""

    def build(max_label: int) -> tf.keras.losses.Loss:
        del max_label
        return PerListLoss(getattr(_tfr(), class_name)(**kwargs))

    return build


# Losses on item scores, TF-Ranking's own wherever it has the loss.
SCORE_LOSSES = {
    "softmax": ScoreLoss(
        _tfr_loss("SoftmaxLoss", name="softmax_loss"),
        summary=LOSS_SUMMARIES["softmax"],
    ),
    "listnet": ScoreLoss(
        lambda _: ListNetLoss(),
        summary=LOSS_SUMMARIES["listnet"],
    ),
    "ordinal": ScoreLoss(
        lambda k: PerListLoss(_tfr().OrdinalLoss(name="ordinal_loss", ordinal_size=k)),
        output="item_levels",
        summary=LOSS_SUMMARIES["ordinal"],
    ),
    "approx_ndcg": ScoreLoss(
        _tfr_loss("ApproxNDCGLoss", name="approx_ndcg_loss"),
        item_sum=False,
        summary=LOSS_SUMMARIES["approx_ndcg"],
    ),
    "listmle": ScoreLoss(
        _tfr_loss("ListMLELoss", name="listmle_loss"),
        summary=LOSS_SUMMARIES["listmle"],
    ),
    "ranknet": ScoreLoss(
        _tfr_loss("PairwiseLogisticLoss", name="ranknet_loss"),
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
        item_sum=False,
        summary=LOSS_SUMMARIES["rmse"],
    ),
}


def get_score_loss(name: str) -> ScoreLoss:
    """The registered item-score loss called ``name``."""
    if name not in SCORE_LOSSES:
        raise ValueError(f"Unknown loss {name!r}; choose from {sorted(SCORE_LOSSES)}")
    return SCORE_LOSSES[name]
