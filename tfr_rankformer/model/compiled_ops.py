"""XLA-compiled element-wise pieces of the training step: dropout, bias + GELU + dropout.

Run as TensorFlow kernels, the feed-forward block's ``Dropout(GELU(h + b))``
is a dozen passes over a ``[items, 512]`` tensor, each writing a new tensor,
and dropout's random numbers (Philox) cost more than the matrix products
around them. Compiled with XLA (``tf.function(jit_compile=True)``), each piece
here is one loop over its input and its backward pass another.

Dropout masks are not random draws but a hash of a key and each element's
position (two rounds of a 32-bit integer mixer), so a backward pass
recomputes the mask from the key instead of storing it, and a key gives the
same mask on any thread count. The caller draws the key from its random
generator once per call (``layers.FastDropout`` does). An element is kept when
its hash is at least ``rate * 2**32``: the rate is exact to ``2**-32``.

The pieces are differentiable with respect to their float inputs; they are
meant for training only (inference and exported SavedModels use plain ops).
``TFR_RANKFORMER_COMPILED_OPS=0`` makes the layers trace plain TensorFlow ops
instead (``enabled()``), for comparison, and ``=1`` forces the pieces on.

XLA compiles a piece once per input shape and keeps what each compilation
allocated. A run of one shape (the click protocol's lists of 16) compiles once;
a run over length buckets has up to two shapes per bucket, and on WEB30K-shaped
data (14 buckets) they raised a RankFormer run's peak memory from 4.35 to
5.71 GB, for a first epoch about as long (166 s against 160 s) and a second
12% shorter (115 s against 131 s). So without the switch set,
``tfr-train`` uses them only when its batches take one shape (``default``).
"""

from __future__ import annotations

import math

import tensorflow as tf

from tfr_rankformer.core.switches import Switch
from tfr_rankformer.model.projections import column_sums

__all__ = ["ENV_SWITCH", "bias_gelu_dropout", "default", "dropout", "enabled", "keep_mask"]

ENV_SWITCH = "TFR_RANKFORMER_COMPILED_OPS"

_SQRT_HALF = 1.0 / math.sqrt(2.0)
_INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)


_SWITCH = Switch(ENV_SWITCH, initial=True)
# Whether layers use these pieces (read when they trace): the switch when it is
# set, else the innermost ``default(on)`` block's value.
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
    """Which elements of a ``shape`` tensor dropout keeps, from the hash of their position.

    Args:
      shape: the tensor's shape (a list or a 1-D int tensor, any rank >= 1).
      key: ``[2]`` int32 tensor; the two words are mixed in one after the other.
      rate: fraction of elements dropped, in [0, 1).

    Returns:
      A bool tensor of ``shape``, True for kept elements.
    """
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
    # bfloat16 inputs are computed on in float32: XLA's CPU erf and exp in
    # bfloat16 took 3.6x as long, and the casts fuse into the loop.
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
    """Inverted dropout: ``x / (1 - rate)`` where ``keep_mask(x.shape, key, rate)``, else 0.

    Args:
      x: float tensor of any shape.
      key: ``[2]`` int32 tensor that fixes the mask.
      rate: fraction of elements dropped, in [0, 1).

    Returns:
      ``x``'s shape and dtype; the gradient is the upstream one through the same mask.
    """
    rate = _check_rate(rate)

    @tf.custom_gradient
    def apply(x):
        def gradient(upstream):
            return _dropout(upstream, key, rate)

        return _dropout(x, key, rate), gradient

    return apply(x)


def bias_gelu_dropout(h, bias, key, rate: float):
    """``dropout(gelu(h + bias))`` with exact GELU (``x Phi(x)``), as one compiled loop.

    Args:
      h: ``[..., F]`` float32 or bfloat16 (computed on in float32), a dense
        layer's output before its bias.
      bias: ``[F]``, ``h``'s dtype.
      key: ``[2]`` int32 tensor that fixes the dropout mask.
      rate: fraction of elements dropped, in [0, 1).

    Returns:
      ``h``'s shape and dtype; differentiable with respect to ``h`` and ``bias``.
    """
    rate = _check_rate(rate)

    @tf.custom_gradient
    def apply(h, bias):
        def gradient(upstream):
            # The bias's gradient, a sum over rows, runs faster outside XLA as a
            # product (projections.column_sums) than inside it as a reduction.
            d_h = _bias_gelu_dropout_gradient(upstream, h, bias, key, rate)
            return d_h, column_sums(d_h)

        return _bias_gelu_dropout(h, bias, key, rate), gradient

    return apply(h, bias)
