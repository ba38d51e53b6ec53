"""Keras layers of the listwise models: the [CLS] token, dropout, GELU, heads, masked scores.

The encoder layer built from them is ``encoder_layer.PreNormEncoderLayer``.
Two pieces are written for speed on CPU, where they dominated a training step
far more than the matrix products: :func:`gelu` (exact GELU with its
closed-form gradient instead of TensorFlow's autodiff of ``erf``, 2x faster)
and :class:`FastDropout` (masks from 16 random bits per element, 1.6x faster).
In training, both give way to XLA-compiled loops (``compiled_ops``): the
feed-forward block's bias, GELU and dropout run as one, each other dropout as
another, with masks hashed from a key so that the backward passes recompute
them instead of storing them.
"""

from __future__ import annotations

import hashlib
import math

import numpy as np
import tensorflow as tf

from tfr_rankformer.model import compiled_ops
from tfr_rankformer.model.initializers import (
    bias_initializer,
    check_init,
    dense,
    kernel_initializer,
)
from tfr_rankformer.model.projections import column_sums, matmul_last_axis

__all__ = [
    "ClsToken",
    "ItemAndContextHead",
    "LayerNorm",
    "FastDropout",
    "layer_norm",
    "KeyedDropout",
    "MaskedScores",
    "PADDING_SCORE",
    "gelu",
    "stream_key",
    "uses_compiled_ops",
]

# Score given to padding items: far below any real score, finite in float32.
PADDING_SCORE = -1e9

_serializable = tf.keras.utils.register_keras_serializable(package="tfr_rankformer")


def _in_save_context() -> bool:
    """Whether ``tf.saved_model.save`` is tracing (it traces layers' training calls too)."""
    try:
        from tensorflow.python.saved_model import save_context
    except ImportError:  # moved in some TensorFlow version: assume saving is possible
        return True
    return save_context.in_save_context()


# The compute dtypes the compiled pieces run in (float16 keeps plain ops).
COMPILED_DTYPES = (tf.float32, tf.bfloat16)


def uses_compiled_ops(training, dtype) -> bool:
    """Whether a training-mode call runs the XLA-compiled pieces of ``compiled_ops``.

    Only in training, in float32 or bfloat16 (``bf16`` mixed precision), and while
    ``compiled_ops.enabled()``.
    Inference keeps plain TensorFlow ops, and so do SavedModels (which trace
    the training branch too), so that serving never compiles anything.
    """
    if tf.is_tensor(training) or not training or tf.as_dtype(dtype) not in COMPILED_DTYPES:
        return False
    return compiled_ops.enabled() and not _in_save_context()


@_serializable
@tf.custom_gradient
def gelu(x):
    """Exact GELU ``x Phi(x)`` (PyTorch's default); gradient ``Phi(x) + x phi(x)``."""
    cdf = 0.5 * (1.0 + tf.math.erf(x * (1.0 / math.sqrt(2.0))))

    def gradient(upstream):
        density = tf.exp(-0.5 * x * x) * (1.0 / math.sqrt(2.0 * math.pi))
        return upstream * (cdf + x * density)

    return x * cdf, gradient


def stream_key(seed: int) -> int:
    """A Philox key (a non-negative int64) hashed from a seed.

    Different seeds give unrelated keys, and so independent streams (Philox's
    streams are indexed by key); the same seed gives the same key everywhere.
    """
    digest = hashlib.blake2b(b"FastDropout/%d" % int(seed), digest_size=8).digest()
    return int.from_bytes(digest, "little") >> 1


@_serializable
class FastDropout(tf.keras.layers.Layer):
    """Inverted dropout whose masks come from 16 random bits per element.

    Same as ``tf.keras.layers.Dropout`` with the rate rounded to a multiple of
    1/65536 (0.25 is exact). The generator's state is a variable, so it is
    checkpointed with the model and a resumed run continues the same stream.
    In float32 training, one key per call is drawn from the generator instead
    and ``compiled_ops.dropout`` hashes it into the mask (rate exact to 2^-32).

    Each layer's generator is a Philox stream of its own: its key is hashed
    from the seed (:func:`stream_key`), and each layer draws its own seed.
    (``Generator.from_seed`` would give every layer the key 0 and move only
    the counter, so layers would read overlapping windows of one stream.)

    Args:
      rate: fraction of elements zeroed in training.
      seed: generator seed; ``None`` draws one from numpy's global state (set by
        ``tf.keras.utils.set_random_seed``).
    """

    def __init__(self, rate: float, seed: int | None = None, **kwargs):
        super().__init__(**kwargs)
        if not 0.0 <= rate < 1.0:
            raise ValueError(f"`rate` must lie in [0, 1), got {rate!r}")
        self.rate = rate
        self.seed = seed

    def build(self, input_shape):
        seed = self.seed if self.seed is not None else int(np.random.randint(2**31 - 1))
        key = stream_key(seed)
        self._generator = tf.random.Generator.from_key_counter(key, [0, 0], alg="philox")
        super().build(input_shape)

    def draw_key(self):
        """A ``[2]`` int32 key from the generator, for ``compiled_ops``' hashed masks."""
        return self._generator.uniform_full_int([2], dtype=tf.int32)

    def call(self, x, training=None):
        if not training or self.rate == 0.0:
            return x
        if uses_compiled_ops(training, x.dtype):
            return compiled_ops.dropout(x, self.draw_key(), self.rate)
        size = tf.size(x)
        bits = self._generator.uniform_full_int([(size + 1) // 2], dtype=tf.uint32)
        halves = tf.reshape(tf.bitcast(bits, tf.uint16), [-1])[:size]  # two draws per word
        keep = halves >= tf.constant(round(self.rate * 65536), tf.uint16)
        keep = tf.reshape(keep, tf.shape(x))
        return tf.where(keep, x * tf.cast(1.0 / (1.0 - self.rate), x.dtype), tf.zeros_like(x))

    def get_config(self):
        config = super().get_config()
        config.update(rate=self.rate, seed=self.seed)
        return config


@_serializable
class KeyedDropout(tf.keras.layers.Dropout):
    """Keras's ``Dropout``; in float32 training, ``compiled_ops.dropout`` with a key
    drawn from TensorFlow's seeded global random stream.

    Unlike :class:`FastDropout` it holds no generator variable, so a model built
    with Keras's ``Dropout`` keeps the same checkpoint variables.
    """

    def call(self, inputs, training=None):
        if self.noise_shape is None and self.rate > 0 and uses_compiled_ops(training, inputs.dtype):
            key = tf.random.uniform([2], tf.int32.min, tf.int32.max, dtype=tf.int32, seed=self.seed)
            return compiled_ops.dropout(inputs, key, self.rate)
        return super().call(inputs, training=training)


def layer_norm(x, gamma, beta, epsilon: float):
    """Layer normalisation over the last axis, ``gamma (x - mean) / sqrt(var + epsilon) + beta``,
    with its gradient written out.

    Keras's ``LayerNormalization`` (with PyTorch's epsilon, below the fused
    kernel's floor) differentiates its ``moments`` and ``batch_normalization``
    op by op: about 20 passes over ``x`` in the backward pass. Here the
    backward pass is ``dx = (g - mean(g) - x^ mean(g x^)) / sigma`` with ``g =
    upstream * gamma`` and the saved ``x^``, and the weights' gradients are
    :func:`projections.column_sums` (1.5x faster forward and backward on
    ``[34816, 136]``; the same values up to rounding, tested).
    """

    @tf.custom_gradient
    def apply(x, gamma, beta):
        mean, variance = tf.nn.moments(x, [-1], keepdims=True)
        inverse_sigma = tf.math.rsqrt(variance + epsilon)
        normalized = (x - mean) * inverse_sigma

        def gradient(upstream):
            g = upstream * gamma
            centered = g - tf.reduce_mean(g, -1, keepdims=True)
            along = normalized * tf.reduce_mean(g * normalized, -1, keepdims=True)
            d_x = (centered - along) * inverse_sigma
            return d_x, column_sums(upstream * normalized), column_sums(upstream)

        return normalized * gamma + beta, gradient

    return apply(x, gamma, beta)


@_serializable
class LayerNorm(tf.keras.layers.LayerNormalization):
    """Keras's ``LayerNormalization`` (its own name, which saved models record).

    In float32 or bfloat16 training over the last axis it runs :func:`layer_norm`
    (in float32), whose backward pass is shorter; inference and saved models keep Keras's ops.
    """

    def call(self, inputs, training=None):
        written_out = (
            not tf.is_tensor(training)
            and bool(training)
            and inputs.dtype in COMPILED_DTYPES
            and self.axis == [inputs.shape.rank - 1]
            and self.gamma is not None
            and self.beta is not None
            and not _in_save_context()
        )
        if written_out:
            # Normalised in float32 whatever the compute dtype, as Keras's layer
            # does (gamma and beta are float32 variables; the casts are no-ops
            # in float32).
            normalized = layer_norm(
                tf.cast(inputs, tf.float32), self.gamma, self.beta, self.epsilon
            )
            return tf.cast(normalized, inputs.dtype)
        return super().call(inputs)


@_serializable
class ClsToken(tf.keras.layers.Layer):
    """Prepends a learnable ``[CLS]`` vector to every list.

    Args:
      stddev: the vector's initial values are drawn from ``N(0, stddev^2)``; 1
        is the released code's (a ``torch.nn.Embedding``).

    Call args:
      items: ``[batch, list, dim]`` float tensor.
      mask: ``[batch, list]`` bool tensor, True for real items.

    Returns:
      ``([batch, list + 1, dim], [batch, list + 1])``: the [CLS] vector first,
      always valid.
    """

    def __init__(self, stddev: float = 1.0, **kwargs):
        super().__init__(**kwargs)
        if not stddev > 0:
            raise ValueError(f"`stddev` must be > 0, got {stddev!r}")
        self.stddev = stddev

    def build(self, input_shape):
        dim = input_shape[0][-1] if isinstance(input_shape, (list, tuple)) else input_shape[-1]
        initializer = tf.keras.initializers.RandomNormal(stddev=self.stddev)
        self.cls = self.add_weight(name="cls", shape=(1, 1, dim), initializer=initializer)
        super().build(input_shape)

    def call(self, items, mask):
        batch = tf.shape(items)[0]
        cls = tf.cast(tf.tile(self.cls, [batch, 1, 1]), items.dtype)  # [B, 1, D]
        tokens = tf.concat([cls, items], axis=1)  # [B, L, D] -> [B, L + 1, D]
        valid = tf.concat([tf.ones([batch, 1], tf.bool), mask], axis=1)  # [B, L + 1]
        return tokens, valid

    def get_config(self):
        config = super().get_config()
        config.update(stddev=self.stddev)
        return config


@_serializable
class ItemAndContextHead(tf.keras.layers.Layer):
    """``h_s(z_i || z_CLS)``: an MLP with one ReLU hidden layer (then dropout, as the
    released code's heads) on each item's vector joined with its list's ``[CLS]``
    vector.

    The hidden layer's product with ``[z_i, z_CLS]`` is split into
    ``z_i W_i + z_CLS W_c``, and ``z_CLS W_c`` is computed once per list
    instead of once per item: the same function as a Dense layer on the
    concatenation, without building the ``[B, L, 2d]`` tensor.

    Args:
      hidden: hidden width.
      outputs: outputs per item.
      dropout: dropout rate on the hidden layer.
      init: ``initializers.INITIALIZATIONS``; under ``pytorch`` the two kernels
        are the halves of one ``Linear(2d, hidden)``.

    Call args:
      items: ``[B, L, d]``; context: ``[B, d]``.

    Returns:
      ``[B, L, outputs]`` float32.
    """

    def __init__(
        self, hidden: int, outputs: int, dropout: float = 0.0, init: str = "pytorch", **kwargs
    ):
        super().__init__(**kwargs)
        self.hidden = hidden
        self.num_outputs = outputs
        self.dropout = dropout
        self.init = check_init(init)

    def build(self, input_shape):  # the items' shape
        dim = input_shape[-1]
        # Keras's Glorot draws each half on its own; PyTorch's fan-in is the whole 2d.
        fan_in = 2 * dim if self.init == "pytorch" else dim
        self.item_kernel = self.add_weight(
            name="item_kernel",
            shape=(dim, self.hidden),
            initializer=kernel_initializer(fan_in, self.init),
        )
        self.context_kernel = self.add_weight(
            name="context_kernel",
            shape=(dim, self.hidden),
            initializer=kernel_initializer(fan_in, self.init),
        )
        self.hidden_bias = self.add_weight(
            name="hidden_bias",
            shape=(self.hidden,),
            initializer=bias_initializer(fan_in, self.init),
        )
        self.hidden_dropout = FastDropout(self.dropout)
        self.output_layer = dense(
            self.num_outputs, fan_in=self.hidden, init=self.init, dtype="float32", name="output"
        )
        super().build(input_shape)

    def call(self, items, context, training=None):
        per_list = tf.matmul(context, tf.cast(self.context_kernel, context.dtype))  # [B, h]
        per_list += tf.cast(self.hidden_bias, context.dtype)
        # [B, L, d] -> [B, L, h]
        per_item = matmul_last_axis(items, tf.cast(self.item_kernel, items.dtype))
        hidden = tf.nn.relu(per_item + per_list[:, tf.newaxis, :])  # [B, L, h]
        return self.output_layer(self.hidden_dropout(hidden, training=training))

    def get_config(self):
        config = super().get_config()
        config.update(
            hidden=self.hidden, outputs=self.num_outputs, dropout=self.dropout, init=self.init
        )
        return config


@_serializable
class MaskedScores(tf.keras.layers.Layer):
    """Scores ``[batch, list, 1]`` to ``[batch, list]`` float32; padding gets ``PADDING_SCORE``.

    A float32 layer under any mixed-precision policy: Keras casts a layer's
    inputs to its compute dtype, which would round the scores to bfloat16 or
    float16 before the losses and metrics read them.
    """

    def __init__(self, **kwargs):
        kwargs.setdefault("dtype", "float32")
        super().__init__(**kwargs)

    def call(self, scores, mask):
        scores = tf.cast(tf.squeeze(scores, axis=-1), tf.float32)  # [B, L, 1] -> [B, L]
        return tf.where(mask, scores, tf.constant(PADDING_SCORE, tf.float32))
