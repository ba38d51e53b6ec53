"""Layers of the RankFormer's peers: allRank's context-aware ranker (post-LayerNorm block,
positional encodings) and the summary-token ranker (global-local attention).
"""

from __future__ import annotations

import math

import tensorflow as tf

from tfr_rankformer.model.encoder_layer import PreNormEncoderLayer, mask_bias
from tfr_rankformer.model.serializable import serializable


@serializable
class PostNormEncoderLayer(PreNormEncoderLayer):
    """The context-aware ranker's block (Pobrotyn et al., 2020), post-LayerNorm as Vaswani
    et al.: ``z = LayerNorm(x + Dropout(MultiHead(x)))``, ``LayerNorm(z + Dropout(FF(z)))``."""

    def __init__(self, num_heads: int = 2, ff_dim: int = 512, dropout: float = 0.4, **kwargs):
        kwargs.setdefault("activation", "relu")
        super().__init__(num_heads, ff_dim, dropout, **kwargs)

    def call(self, x, mask, training=None):
        h = self._attention(x, mask, training)
        x = self.norm_attention(x + self.dropout_attention(h, training=training), training=training)
        h = self.ff_out(self.dropout_ff(self.ff_in(x), training=training))
        return self.norm_ff(x + self.dropout_out(h, training=training), training=training)


@serializable
class GlobalLocalEncoderLayer(PreNormEncoderLayer):
    """A pre-LayerNorm encoder layer whose ``num_global`` leading tokens attend to every
    token, each item only to them and itself: cost linear in the list length."""

    def __init__(self, num_global: int = 1, **kwargs):
        super().__init__(**kwargs)
        if num_global < 1:
            raise ValueError(f"`num_global` must be >= 1, got {num_global!r}")
        self.num_global = num_global

    def _attention(self, h, mask, training):
        g = self.num_global
        q, k, v, scale = self._split_heads(self.qkv(h))  # [B, H, T, D / H]
        # Global tokens attend to every valid token: [B, H, g, T].
        scores = tf.matmul(q[:, :, :g], k, transpose_b=True) * scale
        weights = tf.nn.softmax(scores + mask_bias(mask, h.dtype), axis=-1)
        weights = self.dropout_weights(weights, training=training)
        global_context = tf.matmul(weights, v)  # [B, H, g, D / H]
        # Items attend to the global tokens and to themselves: [B, H, N, g + 1].
        q_items, k_items, v_items = q[:, :, g:], k[:, :, g:], v[:, :, g:]
        to_globals = tf.matmul(q_items, k[:, :, :g], transpose_b=True) * scale
        to_self = tf.reduce_sum(q_items * k_items, axis=-1, keepdims=True) * scale
        weights = tf.nn.softmax(tf.concat([to_globals, to_self], axis=-1), axis=-1)
        weights = self.dropout_weights(weights, training=training)
        item_context = tf.matmul(weights[..., :g], v[:, :, :g]) + weights[..., g:] * v_items
        context = tf.concat([global_context, item_context], axis=2)  # [B, H, T, D / H]
        return self.attention_out(self._merge_heads(context))


@serializable
class GlobalTokens(tf.keras.layers.Layer):
    """Prepends ``count`` learned vectors to every list (always valid), as ``ClsToken``."""

    def __init__(self, count: int, **kwargs):
        super().__init__(**kwargs)
        self.count = count

    def build(self, input_shape):
        dim = input_shape[0][-1] if isinstance(input_shape, (list, tuple)) else input_shape[-1]
        self.tokens = self.add_weight(
            name="tokens", shape=(1, self.count, dim), initializer="random_normal"
        )
        super().build(input_shape)

    def call(self, items, mask):
        batch = tf.shape(items)[0]
        tokens = tf.cast(tf.tile(self.tokens, [batch, 1, 1]), items.dtype)
        valid = tf.concat([tf.ones([batch, self.count], tf.bool), mask], axis=1)
        return tf.concat([tokens, items], axis=1), valid


@serializable
class SinusoidalPositionalEncoding(tf.keras.layers.Layer):
    """Adds Vaswani et al.'s fixed encoding of each item's position in the input order:
    ``sin(p / 10000^(2i/d))`` in even and ``cos`` in odd dimensions."""

    def call(self, x):
        length, dim = tf.shape(x)[1], x.shape[-1]
        positions = tf.cast(tf.range(length), tf.float32)[:, tf.newaxis]  # [L, 1]
        pairs = tf.range(dim) // 2
        rates = tf.exp(-math.log(10000.0) * tf.cast(2 * pairs, tf.float32) / dim)  # [d]
        angles = positions * rates[tf.newaxis, :]  # [L, d]
        even = tf.range(dim) % 2 == 0
        encoding = tf.where(even[tf.newaxis, :], tf.sin(angles), tf.cos(angles))
        return x + tf.cast(encoding, x.dtype)[tf.newaxis]


@serializable
class LearnedPositionalEncoding(tf.keras.layers.Layer):
    """Adds a learned vector per position; lists longer than ``max_positions`` are an error."""

    def __init__(self, max_positions: int, **kwargs):
        super().__init__(**kwargs)
        self.max_positions = max_positions

    def build(self, input_shape):
        self.embeddings = self.add_weight(
            name="embeddings",
            shape=(self.max_positions, input_shape[-1]),
            initializer="random_normal",
        )
        super().build(input_shape)

    def call(self, x):
        length = tf.shape(x)[1]
        check = tf.debugging.assert_less_equal(
            length,
            self.max_positions,
            message=f"a list holds more than {self.max_positions} items, the most this model "
            f"takes (the --max-positions {self.max_positions} of its learned positional encoding)",
        )
        with tf.control_dependencies([check]):
            encoding = tf.cast(self.embeddings[:length], x.dtype)
        return x + encoding[tf.newaxis]
