"""ELWC records parsed into one ``tf.data`` element per list, and the steps that cut,
sample, pad and group lists into ``batching``'s length buckets.
"""

from __future__ import annotations

import dataclasses

import tensorflow as tf

from tfr_rankformer.core.elwc_schema import (
    FEATURES,
    LABEL,
    MASK,
    PADDING_LABEL,
    QID,
    RELEVANCE,
    context_feature_spec,
    example_feature_spec,
)
from tfr_rankformer.inputs.batching import BatchPlan
from tfr_rankformer.inputs.manifest import Manifest

LENGTHS = "lengths"  # valid items per list (``parse_batches(items_only=True)``)
INDEX = "index"  # a list's position in its file order (evaluation)
# Records per parse call: at least PARSE_BATCH, and as many as hold PARSE_ITEMS items of
# lists of a fixed size (larger calls share the parser's and the transform's fixed cost).
PARSE_BATCH = 64
PARSE_ITEMS = 8192
_ITEM_PADDING = {FEATURES: 0.0, MASK: False, LABEL: PADDING_LABEL, RELEVANCE: PADDING_LABEL}


@dataclasses.dataclass(frozen=True)
class EpochSteps:
    """How an epoch draws its training lists (see ``data.training_dataset``)."""

    include_empty_lists: bool
    shuffle_buffer: int
    list_cap: int | None
    keep_order: bool
    seed: int
    pad_to_longest: bool


def parse_batch(list_size: int | None) -> int:
    """Records per parse call for lists padded or cut to ``list_size`` (``None``: whole)."""
    if list_size is None:
        return PARSE_BATCH
    return max(PARSE_BATCH, PARSE_ITEMS // max(1, list_size))


@dataclasses.dataclass(frozen=True)
class WorkerShard:
    """The part of a split one worker reads: every ``record_stride``-th record of ``files``
    from ``record_offset`` on."""

    files: tuple[str, ...]
    record_stride: int = 1
    record_offset: int = 0


def parsed_lists(files, num_features: int, *, list_size: int | None, transform=None):
    """One element per list of ``files`` (or a ``WorkerShard``), padded or cut to
    ``list_size`` items (``None``: its parse batch's longest); ``transform`` maps the valid
    items' features ``[1, items, d]``."""
    return parse_batches(files, num_features, list_size=list_size, transform=transform).unbatch()


def parse_batches(
    files: list[str] | WorkerShard,
    num_features: int,
    *,
    list_size: int | None,
    transform=None,
    items_only: bool = False,
) -> tf.data.Dataset:
    """``parsed_lists`` before it is unbatched, each field ``[B, L, ...]``; ``items_only``:
    only the valid items (``features [items, d]``, ``label [items]``) and ``LENGTHS [B]``."""
    import tensorflow_ranking as tfr

    def parse(serialized):
        parsed = tfr.data.parse_from_example_list(
            serialized,
            list_size=list_size,
            context_feature_spec=context_feature_spec(),
            example_feature_spec=example_feature_spec(num_features),
            mask_feature_name=MASK,
        )
        features = parsed[FEATURES]
        label = tf.squeeze(parsed[LABEL], axis=-1)  # [B, L, 1] -> [B, L]
        if items_only or transform is not None:
            valid = tf.where(parsed[MASK])  # [items, 2]
            items = tf.gather_nd(features, valid)  # [B, L, d] -> [items, d]
            if transform is not None:
                items = transform(items[tf.newaxis])[0]  # padding is not transformed
            if items_only:
                lengths = tf.reduce_sum(tf.cast(parsed[MASK], tf.int64), axis=1)
                return {FEATURES: items, LABEL: tf.gather_nd(label, valid), LENGTHS: lengths}
            features = tf.scatter_nd(valid, items, tf.shape(features, out_type=tf.int64))
        return {
            FEATURES: features,
            MASK: parsed[MASK],
            LABEL: label,
            RELEVANCE: tf.squeeze(parsed[RELEVANCE], axis=-1),
            QID: tf.squeeze(parsed[QID], axis=-1),
        }

    shard = files if isinstance(files, WorkerShard) else WorkerShard(tuple(files))
    dataset = tf.data.TFRecordDataset(list(shard.files))
    if shard.record_stride > 1:
        dataset = dataset.shard(shard.record_stride, shard.record_offset)
    dataset = dataset.batch(parse_batch(list_size))
    return dataset.map(parse, num_parallel_calls=tf.data.AUTOTUNE)


def whole_lists(manifest: Manifest, files, *, normalize=None) -> tf.data.Dataset:
    """Every list of ``files`` cut to its own items, features mapped by ``normalize``."""
    lists = parsed_lists(files, manifest.num_features, list_size=None, transform=normalize)
    return lists.map(own_items, num_parallel_calls=tf.data.AUTOTUNE)


def padding_values() -> dict:
    """Padding values for ``padded_batch`` (built on use, not at import: a multi-worker
    strategy must configure TensorFlow first)."""
    return {**_ITEM_PADDING, QID: tf.constant(-1, tf.int64)}


def _length(element) -> tf.Tensor:
    return tf.shape(element[MASK], out_type=tf.int64)[0]


def _gathered(element, keep):
    return {k: tf.gather(v, keep) if k in _ITEM_PADDING else v for k, v in element.items()}


def own_items(element):
    """One list cut to its valid items, ``[L, ...] -> [n, ...]``: a copy, since a slice
    would keep the whole parse batch alive."""
    return _gathered(element, tf.range(tf.reduce_sum(tf.cast(element[MASK], tf.int32))))


def kept_items(n: tf.Tensor, cap: int, key: tf.Tensor, *, keep_order: bool) -> tf.Tensor:
    """The ``[min(n, cap)]`` positions kept of a list of ``n`` items: the first ``cap`` with
    ``keep_order``, else a sorted uniform subset drawn from the int64 ``key``."""
    if keep_order:
        return tf.range(tf.minimum(n, cap))

    def sample():
        noise = tf.random.stateless_uniform([n], seed=tf.stack([key, key // 7 + 1]))
        return tf.sort(tf.math.top_k(noise, k=cap).indices)

    return tf.cond(n > cap, sample, lambda: tf.range(n))


def sample_long_lists(
    lists: tf.data.Dataset, cap: int, *, seed: int, keep_order: bool
) -> tf.data.Dataset:
    """Cuts lists to ``cap`` items (``kept_items``), drawn afresh every epoch."""

    def cut(element, key):
        n = tf.shape(element[MASK])[0]
        return _gathered(element, kept_items(n, cap, key, keep_order=keep_order))

    keys = tf.data.Dataset.random(seed=seed, rerandomize_each_iteration=True)
    return tf.data.Dataset.zip((lists, keys)).map(cut, num_parallel_calls=tf.data.AUTOTUNE)


def _bucket(n: tf.Tensor, edges: tf.Tensor) -> tf.Tensor:
    """The bucket of a list of ``n`` items: the smallest edge ``>= n``, else the last."""
    found = tf.searchsorted(edges, n[tf.newaxis], out_type=tf.int64)[0]
    return tf.minimum(found, tf.cast(tf.size(edges), tf.int64) - 1)


def pad_to_bucket(element, edges: tuple[int, ...], padding: dict | None = None):
    """Pads one list to its bucket's edge, ``[n, ...] -> [edge, ...]``; ``padding``: keys
    and values (default: the item fields)."""
    edges_t = tf.constant(edges, tf.int64)
    n = _length(element)
    extra = edges_t[_bucket(n, edges_t)] - n
    out = dict(element)
    for key, value in (_ITEM_PADDING if padding is None else padding).items():
        tensor = element[key]
        pads = [[0, extra]] + [[0, 0]] * (tensor.shape.rank - 1)
        out[key] = tf.pad(tensor, pads, constant_values=tf.cast(value, tensor.dtype))
    return out


def bucketed(lists: tf.data.Dataset, plan: BatchPlan) -> tf.data.Dataset:
    """``lists`` padded to their buckets and grouped by them (``group_by_bucket``)."""
    lists = lists.map(lambda e: pad_to_bucket(e, plan.edges), num_parallel_calls=tf.data.AUTOTUNE)
    return group_by_bucket(lists, plan)


def group_by_bucket(lists: tf.data.Dataset, plan: BatchPlan) -> tf.data.Dataset:
    """Batches of ``pad_to_bucket``'s lists of one bucket, ``plan.lists_per_batch`` each."""
    edges = tf.constant(plan.edges, tf.int64)
    sizes = tf.constant(plan.lists_per_batch, tf.int64)
    return lists.group_by_window(
        key_func=lambda element: _bucket(_length(element), edges),
        reduce_func=lambda key, window: window.batch(sizes[key]),
        window_size_func=lambda key: sizes[key],
    )
