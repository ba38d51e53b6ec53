"""The RankFormer paper's metrics for every model (numpy): NDCG@k x 100 on the labels ``y``
and the relevance ``r`` over lists of unequal labels, and the list heads' accuracy and
ROC-AUC. Tied scores share their block's mean gain (scikit-learn's ``ignore_ties=False``),
so results never depend on the input order; TF-Ranking's NDCG has no such averaging.
"""

from __future__ import annotations

import numpy as np

CONVENTION = "NDCG x 100; lists whose labels are all equal are left out (RankFormer paper)"
NOT_MEASURED = (
    "no list to measure on (NDCG needs two different labels in a list, ROC-AUC both outcomes)"
)
GAINS = ("exponential", "linear")
# Items per chunk of lists: bounds the temporary arrays for very long lists.
_CHUNK_ITEMS = 1 << 21


def dcg_gains(labels, *, gain: str = "exponential") -> np.ndarray:
    """float64 gains: ``exponential`` ``2**y - 1`` (TF-Ranking's default) or ``linear``."""
    labels = np.asarray(labels, dtype=np.float64)
    if gain == "exponential":
        return np.exp2(labels) - 1.0
    if gain == "linear":
        return labels.copy()
    raise ValueError(f"Unknown gain {gain!r}; choose from {sorted(GAINS)}")


def ndcg_at_k(scores, labels, k: int | None, *, gain: str = "exponential") -> float:
    """NDCG@k of one unpadded list (``k`` ``None``: whole); ``nan`` when every label is 0.

    >>> round(ndcg_at_k([0.3, 0.2, 0.1], [0, 1, 2], None), 3)
    0.587
    """
    scores, labels = np.asarray(scores), np.asarray(labels)
    if scores.ndim != 1 or labels.shape != scores.shape:
        raise ValueError(
            f"`scores` and `labels` must be 1-D arrays of the same length, got shapes "
            f"{scores.shape} and {labels.shape}"
        )
    size = scores.shape[0]
    k = size if k is None else _check_k(k)
    mask = np.ones((1, size), dtype=bool)
    _check_scores(scores[None], mask)
    _check_labels(labels[None], mask, "labels")
    ndcg = _ndcg_rows(scores[None], [labels[None]], mask, (k,), gain)
    return float(ndcg[0, 0, 0])


def evaluate_rankings(
    scores,
    labels,
    relevance,
    mask,
    *,
    ks=(1, 5, 10),
    max_label=None,
    list_probs=None,
    gain: str = "exponential",
) -> dict:
    """The paper's metrics over padded ``[num_lists, list_size]`` arrays: ``ndcg_y@{k}``,
    ``ndcg_r@{k}`` (over the lists whose ``y`` resp. ``r`` differ), with ``max_label``
    ``ndcg_y@10_tmax`` (lists whose max ``y`` equals it), the lists counted, and with
    ``list_probs`` (``[num_lists, K]`` of ``P(t >= k)``) ``list_acc_t>={k}`` and
    ``list_auc_t>={k}`` for ``k <= 2``. A metric no list measures is named in
    ``not_measured``; bad arrays raise a ``ValueError`` naming them.
    """
    scores, labels, relevance, mask = _check_batch(scores, labels, relevance, mask)
    ks = tuple(_check_k(k) for k in ks)
    all_ks = tuple(sorted(set(ks) | ({10} if max_label is not None else set())))
    ndcg = _ndcg_rows(scores, [labels, relevance], mask, all_ks, gain)  # [2, len(all_ks), n]
    y_max, y_counted = _label_range(labels, mask)
    _, r_counted = _label_range(relevance, mask)
    nonempty = mask.any(axis=1)

    tmax = None if max_label is None else y_counted & (y_max == max_label)
    out = _mean_ndcgs(ndcg, ks, all_ks, y_counted, r_counted, tmax)
    counts = {"num_lists": nonempty, "num_lists_y": y_counted, "num_lists_r": r_counted}
    out.update({name: int(lists.sum()) for name, lists in counts.items()})
    if list_probs is not None:
        out.update(_list_head_metrics(list_probs, y_max, nonempty))
    # A metric without a list to measure it on is named, never written as NaN.
    unmeasured = [key for key, value in out.items() if np.isnan(value)]
    out = {key: value for key, value in out.items() if key not in unmeasured}
    if unmeasured:
        out["not_measured"] = f"{', '.join(unmeasured)}: {NOT_MEASURED}"
    out["convention"] = CONVENTION
    return out


# === NDCG over padded lists ===


def _ndcg_rows(scores, label_sets, mask, ks, gain) -> np.ndarray:
    """NDCG per list, ``[len(label_sets), len(ks), num_lists]`` float64; nan where IDCG is 0."""
    num_lists, size = mask.shape
    out = np.full((len(label_sets), len(ks), num_lists), np.nan)
    if size == 0:
        return out
    discounts = 1.0 / np.log2(np.arange(size, dtype=np.float64) + 2.0)
    step = max(1, _CHUNK_ITEMS // size)
    for start in range(0, num_lists, step):
        rows = slice(start, start + step)
        ranked = _rank_lists(scores[rows], mask[rows])
        for i, labels in enumerate(label_sets):
            # Padding gets label 0, hence gain 0, and ranks after every real item.
            gains = dcg_gains(np.where(mask[rows], labels[rows], 0), gain=gain)
            tied = _tie_averaged(gains, *ranked)  # [chunk, size] in rank order
            ideal = -np.sort(-gains, axis=1)  # [chunk, size] gains in descending order
            for j, k in enumerate(ks):
                dcg = tied[:, :k] @ discounts[:k]
                idcg = ideal[:, :k] @ discounts[:k]
                with np.errstate(invalid="ignore", divide="ignore"):
                    out[i, j, rows] = np.where(idcg > 0, dcg / idcg, np.nan)
    return out


def _rank_lists(scores, mask):
    """Order by descending score (padding last) and tie-block ids, both ``[lists, size]``."""
    keys = np.where(mask, -scores.astype(np.float64), np.inf)
    order = np.argsort(keys, axis=1, kind="stable")
    sorted_keys = np.take_along_axis(keys, order, axis=1)
    starts = np.ones(keys.shape, dtype=bool)
    starts[:, 1:] = sorted_keys[:, 1:] != sorted_keys[:, :-1]
    # Every row opens a new block at rank 0, so block ids never span two lists.
    block_ids = np.cumsum(starts.ravel()).reshape(keys.shape) - 1
    return order, block_ids


def _tie_averaged(gains, order, block_ids) -> np.ndarray:
    """Gains in rank order, each replaced by the mean gain of its block of tied scores."""
    ranked = np.take_along_axis(gains, order, axis=1).ravel()
    ids = block_ids.ravel()
    means = np.bincount(ids, weights=ranked) / np.bincount(ids)
    return means[ids].reshape(gains.shape)


def _label_range(labels, mask):
    """Max valid label per list (``-inf`` if empty) and whether the valid labels differ."""
    high = np.where(mask, labels, -np.inf).max(axis=1, initial=-np.inf)
    low = np.where(mask, labels, np.inf).min(axis=1, initial=np.inf)
    return high, high > low


def _mean_ndcgs(ndcg, ks, all_ks, y_counted, r_counted, tmax) -> dict:
    """The per-list NDCG ``[2, len(all_ks), num_lists]`` averaged x 100 over counted lists."""
    out = {}
    for name, counted, per_label in (("y", y_counted, ndcg[0]), ("r", r_counted, ndcg[1])):
        for k in ks:
            out[f"ndcg_{name}@{k}"] = _mean_x100(per_label[all_ks.index(k)], counted)
    if tmax is not None:
        out["ndcg_y@10_tmax"] = _mean_x100(ndcg[0, all_ks.index(10)], tmax)
    return out


def _mean_x100(values, counted) -> float:
    if not counted.any():
        return float("nan")
    return float(100.0 * values[counted].mean())


# === List-quality head ===


def _list_head_metrics(list_probs, y_max, nonempty) -> dict:
    """Accuracy and ROC-AUC of ``P(t >= k)`` for ``k`` in ``1..min(K, 2)``."""
    probs = np.asarray(list_probs, dtype=np.float64)
    if probs.ndim != 2 or probs.shape[0] != y_max.shape[0] or probs.shape[1] == 0:
        raise ValueError(
            f"`list_probs` must have shape [num_lists={y_max.shape[0]}, K >= 1], got {probs.shape}"
        )
    probs = probs[nonempty]
    if not (np.isfinite(probs).all() and (probs >= 0).all() and (probs <= 1).all()):
        raise ValueError("`list_probs` must be probabilities in [0, 1] (not logits)")
    t = y_max[nonempty]
    out = {}
    for k in range(1, min(probs.shape[1], 2) + 1):
        target = t >= k
        p = probs[:, k - 1]
        acc = float(np.mean((p > 0.5) == target)) if target.size else float("nan")
        out[f"list_acc_t>={k}"] = acc
        out[f"list_auc_t>={k}"] = _roc_auc(target, p)
    return out


def _roc_auc(target, probs) -> float:
    """ROC-AUC as the Mann-Whitney U statistic (ties averaged) over its largest value."""
    from scipy.stats import mannwhitneyu

    if target.all() or not target.any():
        return float("nan")
    u = mannwhitneyu(probs[target], probs[~target]).statistic
    return float(u / (target.sum() * (~target).sum()))


# === Validation ===


def _check_k(k) -> int:
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k <= 0:
        raise ValueError(f"`k` must be a positive int, got {k!r}")
    return int(k)


def _check_batch(*arrays):
    scores, labels, relevance, mask = arrays = [np.asarray(a) for a in arrays]
    names = ("scores", "labels", "relevance", "mask")
    shapes = {name: a.shape for name, a in zip(names, arrays)}
    if scores.ndim != 2 or len(set(shapes.values())) != 1:
        raise ValueError(
            "`scores`, `labels`, `relevance` and `mask` must share one shape "
            f"[num_lists, list_size], got {shapes}"
        )
    if mask.dtype != bool:
        raise ValueError(f"`mask` must be a bool array, got dtype {mask.dtype}")
    _check_scores(scores, mask)
    _check_labels(labels, mask, "labels")
    _check_labels(relevance, mask, "relevance")
    return scores, labels, relevance, mask


def _check_scores(scores, mask):
    if not np.isfinite(scores[mask].astype(np.float64)).all():
        raise ValueError("`scores` must be finite at real items (mask True)")


def _check_labels(labels, mask, name):
    valid = labels[mask].astype(np.float64)
    if not (np.isfinite(valid).all() and (valid >= 0).all()):
        raise ValueError(f"`{name}` must be finite and non-negative at real items (mask True)")
