"""Keras layers of the listwise models: the [CLS] token, the encoder layer, masked scores.

The encoder follows PyTorch's ``TransformerEncoderLayer(norm_first=True)``, as
the RankFormer paper does: ``x + Dropout(SelfAttention(LayerNorm(x)))``, then
``x + Dropout(Linear(Dropout(GELU(Linear(LayerNorm(x))))))``. There is no
positional encoding, so the layers are permutation-equivariant over items.
"""

from __future__ import annotations

import tensorflow as tf

__all__ = ["ClsToken", "PreNormEncoderLayer", "MaskedScores", "PADDING_SCORE"]

# Score given to padding items: far below any real score, finite in float32.
PADDING_SCORE = -1e9

_serializable = tf.keras.utils.register_keras_serializable(package="tfr_rankformer")


@_serializable
class ClsToken(tf.keras.layers.Layer):
    """Prepends a learnable ``[CLS]`` vector to every list.

    Call args:
      items: ``[batch, list, dim]`` float tensor.
      mask: ``[batch, list]`` bool tensor, True for real items.

    Returns:
      ``([batch, list + 1, dim], [batch, list + 1])``: the [CLS] vector first,
      always valid.
    """

    def build(self, input_shape):
        dim = input_shape[0][-1] if isinstance(input_shape, (list, tuple)) else input_shape[-1]
        self.cls = self.add_weight(
            name="cls", shape=(1, 1, dim), initializer="random_normal", trainable=True
        )
        super().build(input_shape)

    def call(self, items, mask):
        batch = tf.shape(items)[0]
        cls = tf.cast(tf.tile(self.cls, [batch, 1, 1]), items.dtype)  # [B, 1, D]
        tokens = tf.concat([cls, items], axis=1)  # [B, L, D] -> [B, L + 1, D]
        valid = tf.concat([tf.ones([batch, 1], tf.bool), mask], axis=1)  # [B, L + 1]
        return tokens, valid


@_serializable
class PreNormEncoderLayer(tf.keras.layers.Layer):
    """One pre-LayerNorm Transformer encoder layer over a masked list.

    Args:
      num_heads: attention heads; the width must be divisible by it.
      ff_dim: hidden width of the feed-forward block.
      dropout: dropout rate on attention output and in the feed-forward block.
    """

    def __init__(self, num_heads: int = 1, ff_dim: int = 512, dropout: float = 0.25, **kwargs):
        super().__init__(**kwargs)
        self.num_heads = num_heads
        self.ff_dim = ff_dim
        self.dropout = dropout

    def build(self, input_shape):
        dim = input_shape[-1]
        if dim % self.num_heads:
            raise ValueError(f"width {dim} is not divisible by `num_heads` {self.num_heads}")
        self.norm_attention = tf.keras.layers.LayerNormalization(epsilon=1e-5)
        self.attention = tf.keras.layers.MultiHeadAttention(
            num_heads=self.num_heads, key_dim=dim // self.num_heads, dropout=self.dropout
        )
        self.dropout_attention = tf.keras.layers.Dropout(self.dropout)
        self.norm_ff = tf.keras.layers.LayerNormalization(epsilon=1e-5)
        self.ff_in = tf.keras.layers.Dense(self.ff_dim, activation="gelu")
        self.dropout_ff = tf.keras.layers.Dropout(self.dropout)
        self.ff_out = tf.keras.layers.Dense(dim)
        self.dropout_out = tf.keras.layers.Dropout(self.dropout)
        super().build(input_shape)

    def call(self, x, mask, training=None):
        # Every position may attend to the valid positions only: [B, L] -> [B, L, L].
        attend = tf.logical_and(mask[:, tf.newaxis, :], tf.ones_like(mask)[:, :, tf.newaxis])
        h = self.norm_attention(x)
        h = self.attention(h, h, attention_mask=attend, training=training)
        x = x + self.dropout_attention(h, training=training)
        h = self.ff_in(self.norm_ff(x))
        h = self.ff_out(self.dropout_ff(h, training=training))
        return x + self.dropout_out(h, training=training)

    def get_config(self):
        config = super().get_config()
        config.update(num_heads=self.num_heads, ff_dim=self.ff_dim, dropout=self.dropout)
        return config


@_serializable
class MaskedScores(tf.keras.layers.Layer):
    """Scores ``[batch, list, 1]`` to ``[batch, list]`` float32; padding gets ``PADDING_SCORE``."""

    def call(self, scores, mask):
        scores = tf.cast(tf.squeeze(scores, axis=-1), tf.float32)  # [B, L, 1] -> [B, L]
        return tf.where(mask, scores, tf.constant(PADDING_SCORE, tf.float32))
