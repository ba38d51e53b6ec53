"""``tf.data`` steps that batch whole lists by length (see ``batching``).

Lists arrive parsed and padded to their parse batch's longest list; these steps
cut each back to its own items, sample a list longer than the cap, pad it to
its bucket's edge and group lists of one bucket into batches of that bucket's
size. Every list lands in exactly one batch per pass.
"""

from __future__ import annotations

import tensorflow as tf

from tfr_rankformer.core import elwc_schema
from tfr_rankformer.inputs.batching import BatchPlan

__all__ = ["own_items", "sample_long_lists", "pad_to_bucket", "group_by_bucket", "INDEX"]

MASK = "mask"
INDEX = "index"  # a list's position in its file order (evaluation)
_PER_ITEM = (elwc_schema.FEATURES, MASK, elwc_schema.LABEL, elwc_schema.RELEVANCE)
_PADDING = {
    elwc_schema.FEATURES: 0.0,
    MASK: False,
    elwc_schema.LABEL: elwc_schema.PADDING_LABEL,
    elwc_schema.RELEVANCE: elwc_schema.PADDING_LABEL,
}


def _length(element) -> tf.Tensor:
    return tf.shape(element[MASK], out_type=tf.int64)[0]


def own_items(element):
    """One list cut to its valid items: ``[L, ...]`` -> ``[n, ...]`` (padding is last).

    The items are copied (a gather), not sliced: a slice may share the memory of
    the whole padded parse batch it came from, and a cached or buffered list
    would then keep that batch alive, padding included.
    """
    keep = tf.range(tf.reduce_sum(tf.cast(element[MASK], tf.int32)))
    return {k: (tf.gather(v, keep) if k in _PER_ITEM else v) for k, v in element.items()}


def kept_items(n: tf.Tensor, cap: int, key: tf.Tensor, *, keep_order: bool) -> tf.Tensor:
    """The positions kept of a list of ``n`` items cut to ``cap``: ``[min(n, cap)]`` int32.

    ``keep_order``: the first ``cap``; else a uniform random subset drawn from
    ``key`` (a list's own int64 draw), in the list's order.
    """
    if keep_order:
        return tf.range(tf.minimum(n, cap))

    def sample():
        noise = tf.random.stateless_uniform([n], seed=tf.stack([key, key // 7 + 1]))
        # The `cap` largest of n uniform draws: a random subset, sorted back
        # into the list's order.
        return tf.sort(tf.math.top_k(noise, k=cap).indices)

    return tf.cond(n > cap, sample, lambda: tf.range(n))


def sample_long_lists(
    lists: tf.data.Dataset, cap: int, *, seed: int, keep_order: bool
) -> tf.data.Dataset:
    """Cuts every list longer than ``cap`` to ``cap`` items.

    The kept items are a uniform random sample, drawn afresh every epoch from
    ``seed`` (``keep_order``: the first ``cap`` items, for positional
    encodings). Shorter lists pass unchanged.
    """

    def cut(element, key):
        keep = kept_items(tf.shape(element[MASK])[0], cap, key, keep_order=keep_order)
        return {k: tf.gather(v, keep) if k in _PER_ITEM else v for k, v in element.items()}

    keys = tf.data.Dataset.random(seed=seed, rerandomize_each_iteration=True)
    return tf.data.Dataset.zip((lists, keys)).map(cut, num_parallel_calls=tf.data.AUTOTUNE)


def pad_to_bucket(element, edges: tuple[int, ...], padding: dict | None = None):
    """Pads one list to the smallest edge ``>= n`` (``[n, ...]`` -> ``[edge, ...]``).

    ``padding``: key -> the value padded slots take (default: a parsed list's
    features, mask and label padding); the keys it names are the ones padded.
    """
    edges_t = tf.constant(edges, tf.int64)
    n = _length(element)
    bucket = tf.minimum(
        tf.searchsorted(edges_t, n[tf.newaxis], out_type=tf.int64)[0], len(edges) - 1
    )
    extra = edges_t[bucket] - n
    out = dict(element)
    for key, value in (_PADDING if padding is None else padding).items():
        tensor = element[key]
        pads = [[0, extra]] + [[0, 0]] * (tensor.shape.rank - 1)
        out[key] = tf.pad(tensor, pads, constant_values=tf.cast(value, tensor.dtype))
    return out


def group_by_bucket(lists: tf.data.Dataset, plan: BatchPlan) -> tf.data.Dataset:
    """Batches lists already padded by ``pad_to_bucket``: each batch holds lists of one
    bucket, ``plan.lists_per_batch`` of them (the last of a bucket may hold fewer)."""
    edges = tf.constant(plan.edges, tf.int64)
    sizes = tf.constant(plan.lists_per_batch, tf.int64)

    def bucket(element):
        return tf.minimum(
            tf.searchsorted(edges, _length(element)[tf.newaxis], out_type=tf.int64)[0],
            len(plan.edges) - 1,
        )

    return lists.group_by_window(
        key_func=bucket,
        reduce_func=lambda key, window: window.batch(sizes[key]),
        window_size_func=lambda key: sizes[key],
    )
