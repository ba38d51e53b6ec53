"""A plain BERT encoder layer, as Hugging Face's ``BertLayer`` computes it in inference:
the layer of the frozen ``SentenceTower``."""

from __future__ import annotations

import tensorflow as tf

from tfr_rankformer.model.layers import LayerNorm, gelu
from tfr_rankformer.model.projections import Dense
from tfr_rankformer.model.serializable import serializable
from tfr_rankformer.text.listformer_form import ACTIVATIONS

__all__ = ["BertEncoderLayer"]

# Added to the attention logits of keys that are no token (finite in float32).
_MASKED = -1e9


@serializable
class BertEncoderLayer(tf.keras.layers.Layer):
    """``x = LayerNorm(x + Attention(x))``, then ``LayerNorm(x + FF(x))``, without dropout;
    every token attends to the valid tokens of its own sequence.

    Call args: ``x [S, L, D]`` float and ``valid [S, L]`` bool; returns ``[S, L, D]``.
    """

    def __init__(
        self,
        num_heads: int = 12,
        ff_dim: int = 3072,
        epsilon: float = 1e-12,
        activation: str = "gelu",
        **kwargs,
    ):
        super().__init__(**kwargs)
        if activation not in ACTIVATIONS:
            raise ValueError(f"`activation` must be one of {list(ACTIVATIONS)}, got {activation!r}")
        self.num_heads = num_heads
        self.ff_dim = ff_dim
        self.epsilon = epsilon
        self.activation = activation

    def build(self, input_shape):
        width = int(input_shape[-1])
        if width % self.num_heads:
            raise ValueError(f"width {width} is not divisible by `num_heads` {self.num_heads}")
        # Built here, so that a checkpoint's weights can be assigned before any call.
        self.qkv = Dense(3 * width, name="qkv")
        self.attention_out = Dense(width, name="attention_out")
        self.norm_attention = LayerNorm(epsilon=self.epsilon, name="norm_attention")
        self.ff_in = Dense(self.ff_dim, name="ff_in")
        self.ff_out = Dense(width, name="ff_out")
        self.norm_ff = LayerNorm(epsilon=self.epsilon, name="norm_ff")
        for layer, features in (
            (self.qkv, width),
            (self.attention_out, width),
            (self.norm_attention, width),
            (self.ff_in, width),
            (self.ff_out, self.ff_dim),
            (self.norm_ff, width),
        ):  # [S, L, features]: a LayerNorm keeps the rank it was built for
            layer.build(tf.TensorShape([None, None, features]))
        super().build(input_shape)

    def _attention(self, x, valid):
        shape = tf.shape(x)
        seqs, length, width = shape[0], shape[1], x.shape[-1]
        heads = self.num_heads
        head_dim = width // heads
        # [S, L, D] -> [S, L, 3 D] -> 3 x [S, H, L, Dh]
        qkv = tf.reshape(self.qkv(x), [seqs, length, 3, heads, head_dim])
        q, k, v = tf.unstack(tf.transpose(qkv, [2, 0, 3, 1, 4]), 3)
        q *= tf.cast(head_dim**-0.5, q.dtype)
        scores = tf.matmul(q, k, transpose_b=True)  # [S, H, L, L]
        bias = tf.where(valid, 0.0, _MASKED)[:, tf.newaxis, tf.newaxis, :]  # [S, 1, 1, L]
        weights = tf.nn.softmax(scores + tf.cast(bias, scores.dtype), axis=-1)
        context = tf.matmul(weights, v)  # [S, H, L, Dh]
        context = tf.reshape(tf.transpose(context, [0, 2, 1, 3]), [seqs, length, width])
        return self.attention_out(context)  # [S, L, D]

    def call(self, x, valid):
        x = self.norm_attention(x + self._attention(x, valid))
        hidden = self.ff_in(x)  # [S, L, F]
        hidden = gelu(hidden) if self.activation == "gelu" else tf.nn.relu(hidden)
        return self.norm_ff(x + self.ff_out(hidden))
