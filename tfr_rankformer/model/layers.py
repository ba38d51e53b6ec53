"""Keras layers of the listwise models: the [CLS] token, dropout, GELU, heads, masked scores.
GELU, dropout and layer norm have written-out gradients: on CPU they dominated a step.
"""

from __future__ import annotations

import hashlib
import math

import numpy as np
import tensorflow as tf

from tfr_rankformer.model import compiled_ops
from tfr_rankformer.model.projections import (
    bias_initializer,
    check_init,
    column_sums,
    dense,
    kernel_initializer,
    matmul_last_axis,
)
from tfr_rankformer.model.serializable import serializable

# Score given to padding items: far below any real score, finite in float32.
PADDING_SCORE = -1e9
# The compute dtypes the compiled pieces run in (float16 keeps plain ops).
COMPILED_DTYPES = (tf.float32, tf.bfloat16)


def _fast_training(training, dtype) -> bool:
    """A float32 or bfloat16 training call outside a SavedModel's trace."""
    from tensorflow.python.saved_model import save_context  # saving traces training calls too

    if tf.is_tensor(training) or not training or tf.as_dtype(dtype) not in COMPILED_DTYPES:
        return False
    return not save_context.in_save_context()


def uses_compiled_ops(training, dtype) -> bool:
    """Whether a call runs the XLA-compiled pieces of ``compiled_ops``."""
    return _fast_training(training, dtype) and compiled_ops.enabled()


@tf.keras.utils.register_keras_serializable(package="tfr_rankformer")
@tf.custom_gradient
def gelu(x):
    """Exact GELU ``x Phi(x)`` (PyTorch's default); gradient ``Phi(x) + x phi(x)``."""
    cdf = 0.5 * (1.0 + tf.math.erf(x * (1.0 / math.sqrt(2.0))))

    def gradient(upstream):
        density = tf.exp(-0.5 * x * x) * (1.0 / math.sqrt(2.0 * math.pi))
        return upstream * (cdf + x * density)

    return x * cdf, gradient


def stream_key(seed: int) -> int:
    """A Philox key hashed from a seed: independent streams for different seeds."""
    digest = hashlib.blake2b(b"FastDropout/%d" % int(seed), digest_size=8).digest()
    return int.from_bytes(digest, "little") >> 1


@serializable
class FastDropout(tf.keras.layers.Layer):
    """Inverted dropout with masks from 16 random bits per element, or
    ``compiled_ops.dropout``; each layer's checkpointed Philox stream is keyed from ``seed``
    (``None``: numpy's global state), so a resumed run continues it."""

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


@serializable
class KeyedDropout(tf.keras.layers.Dropout):
    """Keras's ``Dropout``, or ``compiled_ops.dropout`` keyed from the global seed."""

    def call(self, inputs, training=None):
        if self.noise_shape is None and self.rate > 0 and uses_compiled_ops(training, inputs.dtype):
            key = tf.random.uniform([2], tf.int32.min, tf.int32.max, dtype=tf.int32, seed=self.seed)
            return compiled_ops.dropout(inputs, key, self.rate)
        return super().call(inputs, training=training)


def layer_norm(x, gamma, beta, epsilon: float):
    """Layer normalisation over the last axis, gradient written out: ``dx = (g - mean(g) -
    x^ mean(g x^)) / sigma``, ``g = upstream * gamma``."""

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


@serializable
class LayerNorm(tf.keras.layers.LayerNormalization):
    """Keras's ``LayerNormalization`` running :func:`layer_norm` in training."""

    def call(self, inputs, training=None):
        written_out = (
            _fast_training(training, inputs.dtype)
            and self.axis == [inputs.shape.rank - 1]
            and self.gamma is not None
            and self.beta is not None
        )
        if written_out:
            # In float32 whatever the compute dtype, as Keras's layer normalises.
            normalized = layer_norm(
                tf.cast(inputs, tf.float32), self.gamma, self.beta, self.epsilon
            )
            return tf.cast(normalized, inputs.dtype)
        return super().call(inputs)


@serializable
class ClsToken(tf.keras.layers.Layer):
    """Prepends a learnable ``[CLS]`` vector drawn from ``N(0, stddev^2)`` to every list:
    ``(items [B, L, D], mask [B, L]) -> ([B, L + 1, D], [B, L + 1])``."""

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


@serializable
class ItemAndContextHead(tf.keras.layers.Layer):
    """``h_s(z_i || z_CLS)``, a one-hidden-layer MLP on items ``[B, L, d]`` and ``[CLS]``
    ``[B, d]``, as ``z_i W_i + z_CLS W_c`` (no ``[B, L, 2d]`` tensor)."""

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

        def weight(name, shape, initializer):
            return self.add_weight(
                name=name, shape=shape, initializer=initializer(fan_in, self.init)
            )

        self.item_kernel = weight("item_kernel", (dim, self.hidden), kernel_initializer)
        self.context_kernel = weight("context_kernel", (dim, self.hidden), kernel_initializer)
        self.hidden_bias = weight("hidden_bias", (self.hidden,), bias_initializer)
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

    def get_config(self):  # `outputs` is kept as `num_outputs`
        config = super().get_config()
        config.update(
            hidden=self.hidden, outputs=self.num_outputs, dropout=self.dropout, init=self.init
        )
        return config


@serializable
class MaskedScores(tf.keras.layers.Layer):
    """Scores ``[B, L, 1]`` to ``[B, L]`` float32 under any policy, padding at
    ``PADDING_SCORE``."""

    def __init__(self, **kwargs):
        kwargs.setdefault("dtype", "float32")
        super().__init__(**kwargs)

    def call(self, scores, mask):
        scores = tf.cast(tf.squeeze(scores, axis=-1), tf.float32)  # [B, L, 1] -> [B, L]
        return tf.where(mask, scores, tf.constant(PADDING_SCORE, tf.float32))
