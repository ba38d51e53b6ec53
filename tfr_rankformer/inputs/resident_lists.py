"""A training split's lists parsed and normalised once and held in memory, and batches
gathered from them by the streaming pipeline's steps taken on list indices (the same lists
and items in the same order for a seed). Lists are held *padded* (``[lists, edge, d]``)
when all fit one bucket, else *flat* (``[items + 1, d]``, the last row padding).
"""

from __future__ import annotations

import dataclasses
import logging
import time

import numpy as np
import tensorflow as tf

from tfr_rankformer.core import elwc_schema
from tfr_rankformer.core.elwc_schema import MASK
from tfr_rankformer.inputs import list_parsing
from tfr_rankformer.inputs.batching import BatchPlan
from tfr_rankformer.inputs.list_parsing import LENGTHS, EpochSteps, WorkerShard, parse_batches

logger = logging.getLogger(__name__)

_FLOAT = 4
_PER_LIST = 16  # a list's first row and length, int64 each


def resident_bytes(items: int, lists: int, num_features: int) -> int:
    """Bytes ``ResidentLists`` takes for ``items`` held items (padding included) of
    ``lists`` lists.

    >>> resident_bytes(2_270_296, 18_919, 136) / 2**30  # doctest: +ELLIPSIS
    1.15...
    """
    return int(items * (num_features + 1) * _FLOAT + lists * _PER_LIST)


@dataclasses.dataclass(frozen=True)
class ResidentLists:
    """A split's lists in file order: ``features``, ``label``, each list's first row
    (``starts``, flat layout), ``lengths`` and ``list_labels`` ``t = max_i y_i``."""

    features: tf.Tensor
    label: tf.Tensor
    starts: tf.Tensor
    lengths: tf.Tensor
    list_labels: np.ndarray

    @property
    def padded(self) -> bool:
        return self.features.shape.rank == 3

    @property
    def num_lists(self) -> int:
        return int(self.lengths.shape[0])

    @property
    def padding_row(self) -> int:
        """The flat layout's padding row (its last)."""
        return int(self.features.shape[0]) - 1

    @property
    def nbytes(self) -> int:
        held = int(np.prod(self.label.shape)) - (0 if self.padded else 1)
        return resident_bytes(held, self.num_lists, int(self.features.shape[-1]))


def load_lists(files: WorkerShard, num_features: int, *, edge: int | None, normalize=None):
    """Parses ``files`` into memory, normalised: padded to ``edge``, or flat when ``None``."""
    began = time.perf_counter()
    flat = edge is None
    batches = parse_batches(
        files, num_features, list_size=edge, transform=normalize, items_only=flat
    )
    features, label, lengths = [], [], []
    for batch in batches.prefetch(tf.data.AUTOTUNE):
        features.append(batch[elwc_schema.FEATURES])
        label.append(batch[elwc_schema.LABEL])
        # [B, L] -> [B] in the padded layout
        lengths.append(
            batch[LENGTHS] if edge is None else tf.reduce_sum(tf.cast(batch[MASK], tf.int64), 1)
        )
    if edge is None:  # the padding row, last
        features.append(tf.zeros([1, num_features]))
        label.append(tf.constant([elwc_schema.PADDING_LABEL]))
    else:
        features.append(tf.zeros([0, edge, num_features]))
        label.append(tf.zeros([0, edge]))
    lengths.append(tf.zeros([0], tf.int64))
    store = _joined(features, label, tf.concat(lengths, 0).numpy(), edge)
    seconds, gib = time.perf_counter() - began, store.nbytes / 2**30
    message = "%d training lists held in memory (%.2f GiB), parsed in %.1f s"
    logger.info(message, store.num_lists, gib, seconds)
    return store


def _joined(features: list, label: list, lengths: np.ndarray, edge: int | None) -> ResidentLists:
    """The parse calls' outputs as one ``ResidentLists``."""
    label_t = tf.concat(label, 0)
    labels = label_t.numpy()
    starts = np.zeros_like(lengths)
    if edge is None:
        starts[1:] = np.cumsum(lengths)[:-1]
        t = np.zeros(len(lengths), np.float32)
        nonempty = lengths > 0
        if nonempty.any():
            t[nonempty] = np.maximum.reduceat(labels[:-1], starts[nonempty])
    else:
        valid = np.arange(edge)[np.newaxis, :] < lengths[:, np.newaxis]
        t = np.where(valid, labels, 0.0).max(axis=1, initial=0.0).astype(np.float32)
    t = np.maximum(t, 0.0)
    joined = tf.concat(features, 0)
    features.clear()  # the parse calls' outputs go as soon as they are joined
    return ResidentLists(
        features=joined,
        label=label_t,
        starts=tf.constant(starts),
        lengths=tf.constant(lengths),
        list_labels=t,
    )


def resident_batches(
    store: ResidentLists, plan: BatchPlan, steps: EpochSteps, finish=None
) -> tf.data.Dataset:
    """``data.training_dataset``'s batches, one epoch per pass; ``finish`` maps each."""
    finish = finish or (lambda batch: batch)
    kept = None
    if not steps.include_empty_lists:
        kept = tf.constant(np.flatnonzero(store.list_labels > 0).astype(np.int64))
    # Shuffled as the streamed lists are: a shuffle's order depends on seed and count alone.
    ids = tf.data.Dataset.range(store.num_lists if kept is None else int(kept.shape[0]))
    ids = ids.shuffle(steps.shuffle_buffer, seed=steps.seed, reshuffle_each_iteration=True)

    def listed(positions):
        """Positions among the kept lists -> the lists' indices."""
        return positions if kept is None else tf.gather(kept, positions)

    if store.padded:
        # Every list fits the one bucket: whole padded lists, gathered a batch at a time.
        batches = ids.batch(plan.lists_per_batch[0])
        return batches.map(
            lambda p: finish(_whole_lists(store, listed(p))), num_parallel_calls=tf.data.AUTOTUNE
        )
    longest = int(tf.reduce_max(store.lengths)) if store.num_lists else 0
    cap = steps.list_cap
    sampled = cap is not None and longest > cap
    padding = tf.constant(store.padding_row, tf.int64)

    def list_rows(position, key=None):
        """One list's rows under ``mask`` (the key ``group_by_bucket`` reads), sampled as
        ``sample_long_lists`` samples, padded to its bucket."""
        i = listed(position)
        start, n = store.starts[i], store.lengths[i]
        if sampled:
            keep = list_parsing.kept_items(
                tf.cast(n, tf.int32), cap, key, keep_order=steps.keep_order
            )
            rows = {MASK: start + tf.cast(keep, tf.int64)}
        else:
            rows = {MASK: start + tf.range(n)}
        if steps.pad_to_longest:
            return rows
        return list_parsing.pad_to_bucket(rows, plan.edges, {MASK: padding})

    if sampled:
        keys = tf.data.Dataset.random(seed=steps.seed, rerandomize_each_iteration=True)
        ids = tf.data.Dataset.zip((ids, keys))
    rows = ids.map(list_rows, num_parallel_calls=tf.data.AUTOTUNE)
    if steps.pad_to_longest:
        rows = rows.padded_batch(plan.lists_per_batch[0], padding_values=padding)
    else:
        rows = list_parsing.group_by_bucket(rows, plan)
    return rows.map(lambda r: finish(_gathered(store, r)), num_parallel_calls=tf.data.AUTOTUNE)


def _whole_lists(store: ResidentLists, ids: tf.Tensor) -> dict:
    """``[B]`` list indices -> the padded layout's lists ``[B, edge, ...]``."""
    edge = store.features.shape[1]
    lengths = tf.gather(store.lengths, ids)  # [B]
    return {
        elwc_schema.FEATURES: tf.gather(store.features, ids),
        # [B] -> [B, edge]
        MASK: tf.range(edge, dtype=tf.int64)[tf.newaxis, :] < lengths[:, tf.newaxis],
        elwc_schema.LABEL: tf.gather(store.label, ids),
    }


def _gathered(store: ResidentLists, rows: dict) -> dict:
    """``[B, L]`` row indices (padding row for padded slots) -> the batch's lists."""
    r = rows[MASK]
    return {
        elwc_schema.FEATURES: tf.gather(store.features, r),  # [B, L] -> [B, L, d]
        MASK: tf.not_equal(r, store.padding_row),
        elwc_schema.LABEL: tf.gather(store.label, r),
    }
