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
moment (numpy, then the tensors), which ``run_plan`` counts.
"""

from __future__ import annotations

import dataclasses
import logging
import time

import numpy as np
import tensorflow as tf

from tfr_rankformer import elwc_schema
from tfr_rankformer.inputs.list_parsing import LENGTHS, MASK, WorkerShard, parse_batches
from tfr_rankformer.inputs.manifest import SplitEntry

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


class _Rows:
    """A numpy array grown along its first axis, allocated for ``capacity`` rows up
    front (pages never written take no memory)."""

    def __init__(self, capacity: int, shape: tuple, dtype):
        self.array = np.empty((max(1, capacity), *shape), dtype)
        self.size = 0

    def add(self, values: np.ndarray) -> None:
        end = self.size + len(values)
        if end > len(self.array):
            # The manifest undercounted: grow (rare; costs a copy).
            shape = (max(end, 2 * len(self.array)), *self.array.shape[1:])
            grown = np.empty(shape, self.array.dtype)
            grown[: self.size] = self.array[: self.size]
            self.array = grown
        self.array[self.size : end] = values
        self.size = end

    def values(self) -> np.ndarray:
        return self.array[: self.size]


def load_lists(
    files: WorkerShard,
    num_features: int,
    *,
    edge: int | None,
    normalize=None,
    entry: SplitEntry | None = None,
) -> ResidentLists:
    """Parses and normalises every list of ``files`` into memory.

    Args:
      files: the split's files (or a worker's shard).
      num_features: ``d``.
      edge: every list is at most this long: the padded layout, lists padded
        to ``edge`` items as ``parsed_lists(list_size=edge)`` pads them;
        ``None``: the flat layout, each list's own items.
      normalize: applied to each parse call's valid items (``parsed_lists``'
        ``transform``), e.g. the model's normalisation layer.
      entry: the split's manifest entry: its lists and items are allocated for
        up front (a worker's shard holds fewer; room never written takes no
        memory).
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
    lists = (entry and entry.num_lists) or 1024
    if edge is None:
        rows = ((entry and entry.num_items) or 64 * lists) + 1  # and the padding row
        features = _Rows(rows, (num_features,), np.float32)
        label = _Rows(rows, (), np.float32)
    else:
        features = _Rows(lists, (edge, num_features), np.float32)
        label = _Rows(lists, (edge,), np.float32)
    lengths = _Rows(lists, (), np.int64)
    for batch in batches.prefetch(tf.data.AUTOTUNE).as_numpy_iterator():
        features.add(batch[elwc_schema.FEATURES])
        label.add(batch[elwc_schema.LABEL])
        lengths.add(batch[LENGTHS] if edge is None else batch[MASK].sum(axis=1))
    if edge is None:
        features.add(np.zeros((1, num_features), np.float32))
        label.add(np.full(1, elwc_schema.PADDING_LABEL, np.float32))
    store = _to_tensors(features.values(), label.values(), lengths.values(), edge)
    logger.info(
        "%d training lists held in memory (%.2f GiB), parsed in %.1f s",
        store.num_lists,
        store.nbytes / 2**30,
        time.perf_counter() - began,
    )
    return store


def _to_tensors(
    features: np.ndarray, label: np.ndarray, lengths: np.ndarray, edge: int | None
) -> ResidentLists:
    """The loaded arrays as a ``ResidentLists`` (the flat layout's last row is padding)."""
    starts = np.zeros_like(lengths)
    if edge is None:
        starts[1:] = np.cumsum(lengths)[:-1]
        t = np.zeros(len(lengths), np.float32)
        nonempty = lengths > 0
        if nonempty.any():
            t[nonempty] = np.maximum.reduceat(label[:-1], starts[nonempty])
    else:
        valid = np.arange(label.shape[1])[np.newaxis, :] < lengths[:, np.newaxis]
        t = np.where(valid, label, 0.0).max(axis=1, initial=0.0).astype(np.float32)
    t = np.maximum(t, 0.0)
    return ResidentLists(
        features=tf.convert_to_tensor(features),
        label=tf.convert_to_tensor(label),
        starts=tf.convert_to_tensor(starts),
        lengths=tf.convert_to_tensor(lengths),
        list_labels=t,
    )
