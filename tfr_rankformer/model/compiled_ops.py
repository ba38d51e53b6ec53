"""XLA-compiled element-wise pieces of the training step (dropout; bias + GELU + dropout),
each one loop instead of a dozen kernels; masks hash a key and each element's position, so
the backward pass recomputes them. ``TFR_RANKFORMER_COMPILED_OPS=0``/``1`` overrides
:func:`default`.
"""

from __future__ import annotations

import math

import tensorflow as tf

from tfr_rankformer.core.switches import Switch
from tfr_rankformer.model.projections import column_sums

ENV_SWITCH = "TFR_RANKFORMER_COMPILED_OPS"

_SQRT_HALF = 1.0 / math.sqrt(2.0)
_INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)


# Whether layers use these pieces (read when they trace).
_SWITCH = Switch(ENV_SWITCH, initial=True)
enabled = _SWITCH.enabled
default = _SWITCH.default


def _check_rate(rate: float) -> float:
    rate = float(rate)
    if not 0.0 <= rate < 1.0:
        raise ValueError(f"`rate` must lie in [0, 1), got {rate!r}")
    return rate


def _mix(u):
    """A 32-bit integer mixer (xorshift-multiply; constants from Wellons' ``lowbias32``)."""
    u = tf.bitwise.bitwise_xor(u, tf.bitwise.right_shift(u, tf.constant(16, tf.uint32)))
    u = u * tf.constant(0x7FEB352D, tf.uint32)
    u = tf.bitwise.bitwise_xor(u, tf.bitwise.right_shift(u, tf.constant(15, tf.uint32)))
    u = u * tf.constant(0x846CA68B, tf.uint32)
    return tf.bitwise.bitwise_xor(u, tf.bitwise.right_shift(u, tf.constant(16, tf.uint32)))


def keep_mask(shape, key, rate: float):
    """True where dropout keeps an element, from its position's hash with ``key``."""
    rate = _check_rate(rate)
    shape = tf.cast(shape, tf.int32)
    size = tf.reduce_prod(shape)
    # The flattened position; it wraps around past 2**32 elements.
    position = tf.bitcast(tf.reshape(tf.range(size, dtype=tf.int32), shape), tf.uint32)
    words = tf.bitcast(tf.cast(key, tf.int32), tf.uint32)
    u = _mix(tf.bitwise.bitwise_xor(position * tf.constant(0x9E3779B1, tf.uint32), words[0]))
    u = _mix(u + words[1])
    return u >= tf.constant(min(round(rate * 2.0**32), 2**32 - 1), tf.uint32)


@tf.function(jit_compile=True)
def _dropout(x, key, rate):
    keep = keep_mask(tf.shape(x), key, rate)
    return tf.where(keep, x * tf.cast(1.0 / (1.0 - rate), x.dtype), tf.zeros([], x.dtype))


def _float32(t):
    # bfloat16 is computed on in float32: XLA's CPU erf and exp are slower in bfloat16.
    return tf.cast(t, tf.float32)


@tf.function(jit_compile=True)
def _bias_gelu_dropout(h, bias, key, rate):
    a = _float32(h) + _float32(bias)
    cdf = 0.5 * (1.0 + tf.math.erf(a * _SQRT_HALF))
    keep = keep_mask(tf.shape(a), key, rate)
    return tf.cast(tf.where(keep, a * cdf * (1.0 / (1.0 - rate)), 0.0), h.dtype)


@tf.function(jit_compile=True)
def _bias_gelu_dropout_gradient(upstream, h, bias, key, rate):
    a = _float32(h) + _float32(bias)
    cdf = 0.5 * (1.0 + tf.math.erf(a * _SQRT_HALF))
    slope = cdf + a * tf.exp(-0.5 * a * a) * _INV_SQRT_2PI  # d gelu(a) / da
    keep = keep_mask(tf.shape(a), key, rate)
    d_a = tf.where(keep, _float32(upstream) * slope * (1.0 / (1.0 - rate)), 0.0)
    return tf.cast(d_a, h.dtype)


def dropout(x, key, rate: float):
    """Inverted dropout through ``keep_mask``; the gradient goes through the same mask."""
    rate = _check_rate(rate)

    @tf.custom_gradient
    def apply(x):
        def gradient(upstream):
            return _dropout(upstream, key, rate)

        return _dropout(x, key, rate), gradient

    return apply(x)


def bias_gelu_dropout(h, bias, key, rate: float):
    """``dropout(gelu(h + bias))`` as one compiled loop, for ``[..., F]`` ``h``."""
    rate = _check_rate(rate)

    @tf.custom_gradient
    def apply(h, bias):
        def gradient(upstream):
            # The bias's gradient is faster outside XLA, as column_sums.
            d_h = _bias_gelu_dropout_gradient(upstream, h, bias, key, rate)
            return d_h, column_sums(d_h)

        return _bias_gelu_dropout(h, bias, key, rate), gradient

    return apply(h, bias)
