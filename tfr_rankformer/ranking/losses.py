"""A registry of item-score losses, the RankFormer's listwide loss, and their averaging over
a batch (``LOSS_SCALINGS``: ``released``, the authors' code's, or ``paper``, Eq. 9's).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import tensorflow as tf

from tfr_rankformer.core.command_names import LOSS_SCALINGS
from tfr_rankformer.model.serializable import serializable


def check_scaling(scaling: str) -> str:
    """``scaling`` if it is a known loss scaling, else a ``ValueError``."""
    if scaling not in LOSS_SCALINGS:
        raise ValueError(f"Unknown loss scaling {scaling!r}; choose from {list(LOSS_SCALINGS)}")
    return scaling


def _tfr():
    import tensorflow_ranking as tfr

    return tfr.keras.losses


@serializable
class OrdinalListLoss(tf.keras.losses.Loss):
    """The RankFormer's ordinal listwide loss: per list, ``BCE(sigmoid(d_k), 1[t >= k])`` of
    the logits ``d`` ``[B, K]`` against the list label ``t`` ``[B, 1]``, averaged over the
    levels (``level_mean``, the released code's) or summed (Eq. 9)."""

    def __init__(
        self, num_levels: int, level_mean: bool = True, name: str = "ordinal_list_loss", **kwargs
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


class _LambdaWeights:
    """``sum_k factor_k * w_k`` of TF-Ranking's lambda weights, scaled by each list's valid
    items rather than the padded size, so that padding changes nothing."""

    def __init__(self, parts):
        self.parts = list(parts)

    def pair_weights(self, labels, ranks):
        total = sum(factor * weight.pair_weights(labels, ranks) for factor, weight in self.parts)
        padded = tf.cast(tf.shape(labels)[1], tf.float32)
        valid = tf.reduce_sum(tf.cast(labels >= 0.0, tf.float32), axis=1)  # [B]
        return total * (valid / padded)[:, tf.newaxis, tf.newaxis]


@serializable
class ScaledSigmoidRMSE(tf.keras.losses.Loss):
    """allRank's ``rmse``: per list, ``sqrt(mean_i (y_i - max_label * sigmoid(s_i))^2)``
    over the valid items (labels >= 0); a list without error or items gives 0."""

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


@serializable
class PerListLoss(tf.keras.losses.Loss):
    """A TF-Ranking loss summed within each list (TF-Ranking's mean counts the padding)."""

    get_config = tf.keras.losses.Loss.get_config  # the wrapped loss is not serialised

    def __init__(self, loss, name: str | None = None, **kwargs):
        super().__init__(name=name or loss.name, **kwargs)
        loss.reduction = tf.keras.losses.Reduction.NONE
        self.ranking_loss = loss

    def call(self, y_true, y_pred):
        per_element = self.ranking_loss(y_true, y_pred)  # [B] or [B, ...]
        rank = per_element.shape.rank
        return tf.reduce_sum(per_element, axis=list(range(1, rank))) if rank > 1 else per_element


@serializable
class ListNetLoss(tf.keras.losses.Loss):
    """ListNet's top-one cross-entropy (Cao et al., ICML 2007; allRank's ``listNet``):
    ``-sum_i softmax(y)_i log softmax(s)_i`` over the valid items, per list."""

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


@serializable
class ListAverage(tf.keras.losses.Loss):
    """A per-list loss averaged over the batch's lists (each replica's own): ``item_mean``
    divides each by its valid items, ``skip_zero_lists`` leaves lists of loss 0 out."""

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

    def get_config(self):  # the per-list loss is not serialised
        config = super().get_config()
        config.update(item_mean=self.item_mean, skip_zero_lists=self.skip_zero_lists)
        return config


@dataclasses.dataclass(frozen=True)
class ScoreLoss:
    """A registered item-score loss.

    Attributes:
      per_list: ``max_label -> Loss`` whose ``call`` gives one value per list.
      output: the model output it reads: ``"scores"`` or ``"item_levels"``.
      item_sum: the per-list value is a sum, which ``released`` makes a mean over items.
    """

    per_list: Callable[[int], tf.keras.losses.Loss]
    output: str = "scores"
    item_sum: bool = True

    def build(self, max_label: int, scaling: str = "released") -> tf.keras.losses.Loss:
        """The batch loss under ``scaling`` (see ``LOSS_SCALINGS``)."""
        released = check_scaling(scaling) == "released"
        return ListAverage(
            self.per_list(max_label),
            item_mean=released and self.item_sum,
            skip_zero_lists=released,
        )


def _tfr_loss(class_name: str, name: str, **kwargs) -> Callable[[int], tf.keras.losses.Loss]:
    """A registry entry: TF-Ranking's ``class_name`` loss summed within each list."""
    return lambda max_label: PerListLoss(getattr(_tfr(), class_name)(name=name, **kwargs))


def _pairwise(name: str, *weights) -> Callable[[int], tf.keras.losses.Loss]:
    """TF-Ranking's pairwise logistic loss weighted by ``(factor, lambda weight class)``."""

    def build(max_label: int) -> tf.keras.losses.Loss:
        parts = [(factor, getattr(_tfr(), weight)()) for factor, weight in weights]
        return _tfr_loss("PairwiseLogisticLoss", name, lambda_weight=_LambdaWeights(parts))(0)

    return build


# Losses on item scores (``command_names.LOSS_SUMMARIES`` describes each for --help).
SCORE_LOSSES = {
    "softmax": ScoreLoss(_tfr_loss("SoftmaxLoss", "softmax_loss")),
    "listnet": ScoreLoss(lambda _: ListNetLoss()),
    "ordinal": ScoreLoss(
        lambda k: PerListLoss(_tfr().OrdinalLoss(name="ordinal_loss", ordinal_size=k)),
        output="item_levels",
    ),
    "approx_ndcg": ScoreLoss(_tfr_loss("ApproxNDCGLoss", "approx_ndcg_loss"), item_sum=False),
    "listmle": ScoreLoss(_tfr_loss("ListMLELoss", "listmle_loss")),
    "ranknet": ScoreLoss(_tfr_loss("PairwiseLogisticLoss", "ranknet_loss")),
    # LambdaRank's NDCG swap weights |G_i - G_j| |1/D(r_i) - 1/D(r_j)| / maxDCG.
    "lambdarank": ScoreLoss(_pairwise("lambdarank_loss", (1.0, "NDCGLambdaWeight"))),
    # LambdaLoss's NDCG-Loss2++ (Wang et al., CIKM 2018): LambdaRank's weights plus
    # mu = 10 times NDCG-Loss2's |1/D(|r_i - r_j|) - 1/D(|r_i - r_j| + 1)|.
    "ndcg_loss2pp": ScoreLoss(
        _pairwise("ndcg_loss2pp_loss", (1.0, "NDCGLambdaWeight"), (10.0, "NDCGLambdaWeightV2"))
    ),
    "rmse": ScoreLoss(lambda k: ScaledSigmoidRMSE(k), item_sum=False),
}


def get_score_loss(name: str) -> ScoreLoss:
    """The registered item-score loss called ``name``."""
    if name not in SCORE_LOSSES:
        raise ValueError(f"Unknown loss {name!r}; choose from {sorted(SCORE_LOSSES)}")
    return SCORE_LOSSES[name]
