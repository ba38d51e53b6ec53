"""Padded lists packed to their valid items, so an encoder's item-wise parts skip the
padding; ``TFR_RANKFORMER_PACKED_ITEMS`` (``0``/``1``) overrides :func:`default`.

>>> x, mask = tf.reshape(tf.range(6.0), [1, 3, 2]), tf.constant([[True, False, True]])
>>> rows = valid_rows(mask)
>>> pack(x, rows, block=1).numpy().tolist()
[[0.0, 1.0], [4.0, 5.0]]
>>> unpack(pack(x, rows), rows, tf.shape(mask)).numpy().tolist()
[[[0.0, 1.0], [0.0, 0.0], [4.0, 5.0]]]
"""

from __future__ import annotations

import tensorflow as tf

from tfr_rankformer.core.switches import Switch

ENV_SWITCH = "TFR_RANKFORMER_PACKED_ITEMS"

# Packed items are padded to a multiple of this many rows: few shapes to compile.
ROW_BLOCK = 4096

# Whether encoder layers pack their items (read when they trace).
_SWITCH = Switch(ENV_SWITCH, initial=False)
enabled = _SWITCH.enabled
default = _SWITCH.default


def valid_rows(mask):
    """``[N]`` int32 positions of the valid items of a ``[B, L]`` mask, flattened."""
    return tf.cast(tf.where(tf.reshape(mask, [-1]))[:, 0], tf.int32)


def _flat_shape(shape, dim):
    return tf.stack([tf.reduce_prod(shape[:2]), dim])


def padded_count(count, block: int = ROW_BLOCK):
    """``count`` rounded up to a multiple of ``block``."""
    return (count + block - 1) // block * block


# Written-out gradients: a strided slice's is a zero-filled copy of the whole tensor.
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
    """``[B, L, D] -> [R, D]``: the ``valid_rows``, then zero rows up to a ``block``."""
    dim = tf.shape(x)[-1]
    flat = tf.reshape(x, _flat_shape(tf.shape(x), dim))  # [B, L, D] -> [B * L, D]
    out = _gather_rows(flat, rows, padded_count(tf.shape(rows)[0], block))
    out.set_shape([None, x.shape[-1]])
    return out


def unpack(packed, rows, list_shape):
    """``[R, D] -> [B, L, D]`` (``list_shape``), zeros at padding: :func:`pack`'s inverse."""
    dim = tf.shape(packed)[-1]
    flat = _scatter_rows(packed, rows, _flat_shape(list_shape, dim))  # [B * L, D]
    out = tf.reshape(flat, tf.concat([list_shape, [dim]], axis=0))
    out.set_shape([None, None, packed.shape[-1]])
    return out
