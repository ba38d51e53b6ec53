"""A training split's parsed, normalised lists held in memory as tensors.

The records are parsed and normalised once (``load_lists``), with the parse
calls and the transform of the streaming pipeline (``list_parsing``), so the
held values are those it would yield; every epoch then serves batches by
shuffling list indices and gathering rows (``resident_batches``), without
parsing or cache reads.

Two layouts:

* padded (the split's lists all fit one bucket, e.g. the click protocol's
  lists of at most 16): ``features [lists, edge, d]`` and ``label
  [lists, edge]``, a batch being one gather of whole lists;
* flat (anything else): ``features [items + 1, d]`` and ``label [items + 1]``
  with each list's first row and length; the last row is padding (zeros,
  label -1), which padded slots of a batch point at.

Memory is ``resident_bytes``: 4 bytes per feature and label of every held
item, plus 16 bytes per list. While loading, the values are held twice for a
moment (the parse calls' outputs, then their join), which ``run_plan``
counts.
"""

from __future__ import annotations

import dataclasses
import logging
import time

import numpy as np
import tensorflow as tf

from tfr_rankformer.core import elwc_schema
from tfr_rankformer.inputs.list_parsing import LENGTHS, MASK, WorkerShard, parse_batches

__all__ = ["ResidentLists", "load_lists", "resident_bytes"]

logger = logging.getLogger(__name__)

_FLOAT = 4
_PER_LIST = 16  # a list's first row and length, int64 each


def resident_bytes(items: int, lists: int, num_features: int) -> int:
    """Bytes ``ResidentLists`` takes for ``items`` held items (padding included in the
    padded layout) of ``lists`` lists.

    >>> resident_bytes(2_270_296, 18_919, 136) / 2**30  # doctest: +ELLIPSIS
    1.15...
    """
    return int(items * (num_features + 1) * _FLOAT + lists * _PER_LIST)


@dataclasses.dataclass(frozen=True)
class ResidentLists:
    """The lists of a split (or a worker's shard of it), in file order.

    Attributes:
      features: normalised features, ``[lists, edge, d]`` (padded) or
        ``[items + 1, d]`` (flat) float32.
      label: ``[lists, edge]`` or ``[items + 1]`` float32 labels (padding -1).
      starts: ``[lists]`` int64, each list's first row (flat; zeros when padded).
      lengths: ``[lists]`` int64 valid items per list.
      list_labels: ``[lists]`` float32 ``t = max_i y_i`` (0 for an empty list).
    """

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


def load_lists(
    files: WorkerShard,
    num_features: int,
    *,
    edge: int | None,
    normalize=None,
) -> ResidentLists:
    """Parses and normalises every list of ``files`` into memory.

    Each parse call's output is kept as it comes and all are joined once at
    the end (one copy, the moment the lists are held twice).

    Args:
      files: the split's files (or a worker's shard).
      num_features: ``d``.
      edge: every list is at most this long: the padded layout, lists padded
        to ``edge`` items as ``parsed_lists(list_size=edge)`` pads them;
        ``None``: the flat layout, each list's own items.
      normalize: applied to each parse call's valid items (``parsed_lists``'
        ``transform``), e.g. the model's normalisation layer.
    """
    began = time.perf_counter()
    batches = parse_batches(
        files,
        num_features,
        list_size=edge,
        shuffle_items=False,
        seed=0,
        transform=normalize,
        items_only=edge is None,
    )
    features, label, lengths = [], [], []
    for batch in batches.prefetch(tf.data.AUTOTUNE):
        features.append(batch[elwc_schema.FEATURES])
        label.append(batch[elwc_schema.LABEL])
        lengths.append(batch[LENGTHS] if edge is None else _lengths(batch[MASK]))
    if edge is None:
        # The padding row, last.
        features.append(tf.zeros([1, num_features]))
        label.append(tf.constant([elwc_schema.PADDING_LABEL]))
    else:
        features.append(tf.zeros([0, edge, num_features]))
        label.append(tf.zeros([0, edge]))
    lengths.append(tf.zeros([0], tf.int64))
    store = _joined(features, label, tf.concat(lengths, 0).numpy(), edge)
    logger.info(
        "%d training lists held in memory (%.2f GiB), parsed in %.1f s",
        store.num_lists,
        store.nbytes / 2**30,
        time.perf_counter() - began,
    )
    return store


def _lengths(mask: tf.Tensor) -> tf.Tensor:
    return tf.reduce_sum(tf.cast(mask, tf.int64), axis=1)  # [B, L] -> [B]


def _joined(features: list, label: list, lengths: np.ndarray, edge: int | None) -> ResidentLists:
    """The parse calls' outputs as one ``ResidentLists`` (the flat layout's last row
    is padding)."""
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
