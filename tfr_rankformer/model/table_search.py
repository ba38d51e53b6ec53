"""Faster, bit-exact equivalents of ``tf.searchsorted(table, x, side="right")`` for the
quantile transform: row chunks side by side (the layer), or compiled (the input pipeline).

>>> table = np.array([[0.0, 1.0], [5.0, 6.0]], np.float32)
>>> search = row_chunked_search(table, chunks=2, split_from=1)
>>> search(tf.constant(table), tf.constant([[0.5, 2.0], [4.0, 6.0]])).numpy().tolist()
[[1, 2], [0, 2]]
"""

from __future__ import annotations

import numpy as np
import tensorflow as tf

# Row chunks searched side by side; inputs of fewer values are searched whole.
CHUNKS = 4
SPLIT_FROM = 8192
# Values per row are padded to a multiple of this: XLA compiles a handful of widths.
_WIDTH_STEP = 4096


def row_chunked_search(table: np.ndarray, *, chunks: int = CHUNKS, split_from: int = SPLIT_FROM):
    """``search(table_tensor, x)`` over ``chunks`` row chunks of ``table`` when ``x`` holds
    at least ``split_from`` values."""
    bounds = np.linspace(0, table.shape[0], min(chunks, table.shape[0]) + 1).astype(int)
    parts = [(tf.constant(table[a:b]), a, b) for a, b in zip(bounds[:-1], bounds[1:])]

    def search(whole, x):
        def split():
            found = [tf.searchsorted(rows, x[a:b], side="right") for rows, a, b in parts]
            return tf.concat(found, axis=0)

        if len(parts) == 1:
            return tf.searchsorted(whole, x, side="right")
        return tf.cond(
            tf.size(x) >= split_from, split, lambda: tf.searchsorted(whole, x, side="right")
        )

    return search


def _branch_free_search(table: tf.Tensor, x: tf.Tensor) -> tf.Tensor:
    """``[d, Q]`` non-decreasing rows, ``[d, n]`` values -> ``[d, n]`` int32 counts of
    each row's entries ``<= x``."""
    knots = table.shape[-1]
    found = tf.zeros(tf.shape(x), tf.int32)
    step = 1 << (knots.bit_length() - 1)
    while step >= 1:
        # The count can grow by `step` when the entry it would cover last is <= x.
        grown = found + step
        entry = tf.gather(table, tf.minimum(grown, knots) - 1, batch_dims=1)
        found = tf.where((grown <= knots) & (entry <= x), grown, found)
        step //= 2
    return found


_compiled_search = tf.function(_branch_free_search, jit_compile=True, autograph=False)


def upper_bound(table: tf.Tensor, x: tf.Tensor) -> tf.Tensor:
    """``tf.searchsorted(table, x, side="right")``, compiled; NaN gives 0.

    >>> table = tf.constant([[0.0, 1.0, 1.0, 2.0]])
    >>> upper_bound(table, tf.constant([[-1.0, 0.0, 1.0, 1.5, 9.0]])).numpy().tolist()
    [[0, 1, 3, 3, 4]]
    """
    n = tf.shape(x)[1]
    width = (n + _WIDTH_STEP - 1) // _WIDTH_STEP * _WIDTH_STEP
    # [d, n] -> [d, width] -> [d, n]: padded with 0, a value like any other.
    padded = tf.pad(x, [[0, 0], [0, width - n]])
    return _compiled_search(table, padded)[:, :n]


def pipeline_normalization(layer):
    """``layer`` (or ``None``) as the input pipeline applies it: quantiles by ``upper_bound``."""
    if layer is None or getattr(layer, "method", None) != "quantile":
        return layer
    return lambda features: layer.transform(features, search=upper_bound)
