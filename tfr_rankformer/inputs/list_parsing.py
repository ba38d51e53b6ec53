"""ELWC records parsed into one ``tf.data`` element per list.

Records are parsed ``parse_batch(list_size)`` at a time with TF-Ranking's ELWC parser
(``tfr.data``) and unbatched, so each element is one list: ``features [L, d]``,
``mask [L]``, ``label [L]``, ``relevance [L]`` and ``qid``. ``data`` builds the
training and evaluation pipelines on these elements (and re-exports ``MASK``,
``WorkerShard`` and ``parsed_lists``).
"""

from __future__ import annotations

import dataclasses

import tensorflow as tf

from tfr_rankformer.core import elwc_schema
from tfr_rankformer.inputs import bucketed_batches
from tfr_rankformer.inputs.manifest import Manifest

__all__ = [
    "MASK",
    "LENGTHS",
    "PARSE_BATCH",
    "PARSE_ITEMS",
    "WorkerShard",
    "parse_batch",
    "parse_batches",
    "parsed_lists",
    "whole_lists",
    "padding_values",
]

MASK = "mask"
LENGTHS = "lengths"  # valid items per list (``parse_batches(items_only=True)``)
# Records per parse call (``run_plan``'s memory estimate counts them): at least
# PARSE_BATCH, and for lists parsed to a fixed size as many as hold PARSE_ITEMS
# items. Larger calls share the per-call cost of the parser and the quantile
# transform's ops: on the click protocol's lists of 16 (512 a call) the input
# pipeline ran 15% faster than with 64 lists a call.
PARSE_BATCH = 64
PARSE_ITEMS = 8192


def parse_batch(list_size: int | None) -> int:
    """Records per parse call for lists padded or cut to ``list_size`` (``None``: whole)."""
    if list_size is None:
        return PARSE_BATCH
    return max(PARSE_BATCH, PARSE_ITEMS // max(1, list_size))


@dataclasses.dataclass(frozen=True)
class WorkerShard:
    """The part of a split that one worker reads.

    Attributes:
      files: the TFRecord files it opens.
      record_stride: it keeps every ``record_stride``-th record of them (1: all).
      record_offset: the first record it keeps, below ``record_stride``.
    """

    files: tuple[str, ...]
    record_stride: int = 1
    record_offset: int = 0


def parsed_lists(
    files: list[str] | WorkerShard,
    num_features: int,
    *,
    list_size: int | None,
    shuffle_items: bool,
    seed: int,
    transform=None,
) -> tf.data.Dataset:
    """One element per list: ``features [L, d]``, ``mask [L]``, ``label [L]``, ``relevance [L]``.

    ``files`` are read whole, or a ``WorkerShard`` of them. With ``list_size``
    every list is padded or cut to it (after shuffling its items when
    ``shuffle_items``); with ``None`` each parse batch is padded to its longest
    list and nothing is cut. ``transform`` maps the features of a parse batch's
    valid items (``[1, items, d]``; padding stays 0), e.g. the model's
    normalisation.
    """
    return parse_batches(
        files,
        num_features,
        list_size=list_size,
        shuffle_items=shuffle_items,
        seed=seed,
        transform=transform,
    ).unbatch()


def parse_batches(
    files: list[str] | WorkerShard,
    num_features: int,
    *,
    list_size: int | None,
    shuffle_items: bool,
    seed: int,
    transform=None,
    items_only: bool = False,
) -> tf.data.Dataset:
    """``parsed_lists`` before it is unbatched: one element per parse call of
    ``parse_batch(list_size)`` records, each field ``[B, L, ...]`` (``qid [B]``).

    ``items_only``: each element holds only the valid items, as ``transform``
    sees them (``features [items, d]``, ``label [items]``, in list order), and
    each list's ``LENGTHS [B]``.
    """
    import tensorflow_ranking as tfr

    def parse(serialized):
        parsed = tfr.data.parse_from_example_list(
            serialized,
            list_size=list_size,
            context_feature_spec=elwc_schema.context_feature_spec(),
            example_feature_spec=elwc_schema.example_feature_spec(num_features),
            mask_feature_name=MASK,
            shuffle_examples=shuffle_items,
            seed=seed,
        )
        features = parsed[elwc_schema.FEATURES]
        if items_only:
            return _valid_items(parsed, transform)
        if transform is not None:
            valid = tf.where(parsed[MASK])  # [items, 2]
            # [B, L, d] -> [1, items, d] -> [B, L, d]: padding is not transformed.
            items = transform(tf.gather_nd(features, valid)[tf.newaxis])[0]
            features = tf.scatter_nd(valid, items, tf.shape(features, out_type=tf.int64))
        return {
            elwc_schema.FEATURES: features,
            MASK: parsed[MASK],
            # [B, L, 1] -> [B, L]
            elwc_schema.LABEL: tf.squeeze(parsed[elwc_schema.LABEL], axis=-1),
            elwc_schema.RELEVANCE: tf.squeeze(parsed[elwc_schema.RELEVANCE], axis=-1),
            elwc_schema.QID: tf.squeeze(parsed[elwc_schema.QID], axis=-1),
        }

    shard = files if isinstance(files, WorkerShard) else WorkerShard(tuple(files))
    dataset = tf.data.TFRecordDataset(list(shard.files))
    if shard.record_stride > 1:
        dataset = dataset.shard(shard.record_stride, shard.record_offset)
    dataset = dataset.batch(parse_batch(list_size))
    return dataset.map(parse, num_parallel_calls=tf.data.AUTOTUNE)


def _valid_items(parsed: dict, transform) -> dict:
    """A parse call's valid items, transformed as ``parse_batches`` transforms them."""
    valid = tf.where(parsed[MASK])  # [items, 2]
    # [B, L, d] -> [items, d]
    items = tf.gather_nd(parsed[elwc_schema.FEATURES], valid)
    if transform is not None:
        items = transform(items[tf.newaxis])[0]
    return {
        elwc_schema.FEATURES: items,
        # [B, L, 1] -> [items]
        elwc_schema.LABEL: tf.gather_nd(tf.squeeze(parsed[elwc_schema.LABEL], axis=-1), valid),
        LENGTHS: tf.reduce_sum(tf.cast(parsed[MASK], tf.int64), axis=1),
    }


def whole_lists(manifest: Manifest, files, *, normalize=None) -> tf.data.Dataset:
    """Every list of ``files`` cut to its own items (``[n, d]``, ``[n]``...), its
    features mapped by ``normalize`` (see ``parsed_lists``' ``transform``)."""
    lists = parsed_lists(
        files,
        manifest.num_features,
        list_size=None,
        shuffle_items=False,
        seed=0,
        transform=normalize,
    )
    return lists.map(bucketed_batches.own_items, num_parallel_calls=tf.data.AUTOTUNE)


def padding_values() -> dict:
    """Padding values of a list's fields, for ``padded_batch`` (built on use: a
    constant made at import would start TensorFlow's runtime before a
    multi-worker strategy can configure it)."""
    return {
        elwc_schema.FEATURES: 0.0,
        MASK: False,
        elwc_schema.LABEL: elwc_schema.PADDING_LABEL,
        elwc_schema.RELEVANCE: elwc_schema.PADDING_LABEL,
        elwc_schema.QID: tf.constant(-1, tf.int64),
    }
