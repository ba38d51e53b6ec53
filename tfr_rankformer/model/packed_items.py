"""Padded lists packed to their valid items, for the position-wise parts of an encoder.

A batch of lists padded to one length spends the item-wise work (the
feed-forward block, the attention's projections, the layer norms: nine
tenths of a RankFormer step's products on WEB30K's lengths) on padding too:
about a fifth of the items in length-bucketed batches of WEB30K-shaped lists.
Packed, those parts run on ``[valid items, dim]`` and only attention, which
needs the list axis, sees the padded ``[batch, list, dim]`` shape. Valid
items' values are the same either way (padding never reaches them); padding
positions hold zeros after :func:`unpack`.

Packing pays where batches carry padding and take many shapes (length
buckets); a run of one shape (the click protocol's lists of 16, which XLA's
compiled pieces serve) keeps the padded path, whose dropout masks it keeps.
``tfr-train`` turns packing on for bucketed runs with :func:`default`; the
``TFR_RANKFORMER_PACKED_ITEMS`` switch (``0``/``1``) overrides it.

>>> import tensorflow as tf
>>> x = tf.reshape(tf.range(6.0), [1, 3, 2])
>>> mask = tf.constant([[True, False, True]])
>>> rows = valid_rows(mask)
>>> pack(x, rows, block=1).numpy().tolist()
[[0.0, 1.0], [4.0, 5.0]]
>>> unpack(pack(x, rows), rows, tf.shape(mask)).numpy().tolist()
[[[0.0, 1.0], [0.0, 0.0], [4.0, 5.0]]]
"""

from __future__ import annotations

import tensorflow as tf

from tfr_rankformer.core.switches import Switch

__all__ = [
    "ENV_SWITCH",
    "ROW_BLOCK",
    "default",
    "enabled",
    "pack",
    "padded_count",
    "unpack",
    "valid_rows",
]

ENV_SWITCH = "TFR_RANKFORMER_PACKED_ITEMS"

# Packed items are padded to a multiple of this many rows, so that the item-wise
# parts see few shapes (a training batch holds at most about 35,000 items: at
# most 9 shapes) and XLA's compiled pieces compile once for each.
ROW_BLOCK = 4096

_SWITCH = Switch(ENV_SWITCH, initial=False)
# Whether encoder layers pack their items (read when they trace): the switch when
# it is set, else the innermost ``default(on)`` block's value.
enabled = _SWITCH.enabled
default = _SWITCH.default


def valid_rows(mask):
    """``[N]`` int32 positions of the valid items in the flattened ``[B * L]`` list axis.

    Args:
      mask: ``[B, L]`` bool, True for valid items.
    """
    return tf.cast(tf.where(tf.reshape(mask, [-1]))[:, 0], tf.int32)


def _flat_shape(shape, dim):
    return tf.stack([tf.reduce_prod(shape[:2]), dim])


def padded_count(count, block: int = ROW_BLOCK):
    """``count`` rounded up to a multiple of ``block``."""
    return (count + block - 1) // block * block


# Both directions are written with their gradients, so that neither the
# padding rows nor the valid rows go through a strided slice's gradient (a
# zero-filled copy of the whole tensor on CPU).
@tf.custom_gradient
def _gather_rows(flat, rows, size):
    count = tf.shape(rows)[0]

    def gradient(upstream):
        shape = tf.shape(flat, out_type=tf.int32)
        return tf.scatter_nd(rows[:, tf.newaxis], upstream[:count], shape), None, None

    return tf.pad(tf.gather(flat, rows), [[0, size - count], [0, 0]]), gradient


@tf.custom_gradient
def _scatter_rows(packed, rows, shape):
    count = tf.shape(rows)[0]

    def gradient(upstream):
        extra = tf.shape(packed)[0] - count
        return tf.pad(tf.gather(upstream, rows), [[0, extra], [0, 0]]), None, None

    return tf.scatter_nd(rows[:, tf.newaxis], packed[:count], shape), gradient


def pack(x, rows, block: int = ROW_BLOCK):
    """``[B, L, D] -> [R, D]``: the rows of ``valid_rows``, in order, then zero rows
    up to ``R = padded_count(N, block)``.

    Args:
      x: ``[B, L, D]`` float tensor.
      rows: ``valid_rows(mask)``, ``[N]``.
      block: ``R`` is a multiple of it (1: no zero rows).
    """
    dim = tf.shape(x)[-1]
    flat = tf.reshape(x, _flat_shape(tf.shape(x), dim))  # [B, L, D] -> [B * L, D]
    out = _gather_rows(flat, rows, padded_count(tf.shape(rows)[0], block))
    out.set_shape([None, x.shape[-1]])
    return out


def unpack(packed, rows, list_shape):
    """``[R, D] -> [B, L, D]``, zeros at padding; the inverse of :func:`pack` (rows
    past the ``N`` valid ones are left out).

    Args:
      packed: ``[R, D]`` float tensor, ``R >= N``.
      rows: ``valid_rows(mask)``, ``[N]``.
      list_shape: ``[2]`` int32, the mask's shape ``[B, L]``.
    """
    dim = tf.shape(packed)[-1]
    flat = _scatter_rows(packed, rows, _flat_shape(list_shape, dim))  # [B * L, D]
    out = tf.reshape(flat, tf.concat([list_shape, [dim]], axis=0))
    out.set_shape([None, None, packed.shape[-1]])
    return out
