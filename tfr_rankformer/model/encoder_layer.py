"""The RankFormer's encoder layer: PyTorch's ``TransformerEncoderLayer(norm_first=True)``."""

from __future__ import annotations

import tensorflow as tf

from tfr_rankformer.model import compiled_ops, packed_items
from tfr_rankformer.model.layers import (
    FastDropout,
    LayerNorm,
    gelu,
    uses_compiled_ops,
)
from tfr_rankformer.model.projections import (
    Dense,
    check_init,
    dense,
    kernel_initializer,
    matmul_last_axis,
)
from tfr_rankformer.model.serializable import serializable


def mask_bias(mask, dtype):
    """``[B, L]`` valid-item mask -> ``[B, 1, 1, L]`` additive attention bias."""
    lowest = -1e9 if dtype == tf.float32 else float(dtype.min)
    bias = tf.where(mask, tf.constant(0.0, dtype), tf.constant(lowest, dtype))
    return bias[:, tf.newaxis, tf.newaxis, :]


@serializable
class PreNormEncoderLayer(tf.keras.layers.Layer):
    """A pre-LayerNorm encoder layer over a masked list: ``x + Dropout(SelfAttention(
    LayerNorm(x)))``, then ``x + Dropout(FF(LayerNorm(x)))``."""

    def __init__(
        self,
        num_heads: int = 1,
        ff_dim: int = 512,
        dropout: float = 0.25,
        activation: str = "gelu",
        init: str = "pytorch",
        **kwargs,
    ):
        super().__init__(**kwargs)
        self.num_heads = num_heads
        self.ff_dim = ff_dim
        self.dropout = dropout
        self.activation = activation
        self.init = check_init(init)

    def build(self, input_shape):
        dim = input_shape[-1]
        if dim % self.num_heads:
            raise ValueError(f"width {dim} is not divisible by `num_heads` {self.num_heads}")
        self.norm_attention = LayerNorm(epsilon=1e-5)
        # PyTorch's MultiheadAttention written out (fewer ops than Keras's): Xavier-uniform
        # input projection with zero biases, as PyTorch's.
        self.qkv = Dense(3 * dim, name="qkv")
        self.dropout_weights = FastDropout(self.dropout)
        self.attention_out = Dense(
            dim, kernel_initializer=kernel_initializer(dim, self.init), name="attention_out"
        )
        self.dropout_attention = FastDropout(self.dropout)
        self.norm_ff = LayerNorm(epsilon=1e-5)
        activation = gelu if self.activation == "gelu" else self.activation
        self.ff_in = dense(self.ff_dim, fan_in=dim, init=self.init, activation=activation)
        self.dropout_ff = FastDropout(self.dropout)
        self.ff_out = dense(dim, fan_in=self.ff_dim, init=self.init)
        self.dropout_out = FastDropout(self.dropout)
        super().build(input_shape)

    def _attention(self, h, mask, training):
        """Self-attention of ``h`` ``[B, L, D]`` over the valid items: ``[B, L, D]``."""
        return self.attention_out(self._attend(self.qkv(h), mask, training))

    def _split_heads(self, qkv):
        """``[B, L, 3 D]`` -> ``q, k, v`` ``[B, H, L, D / H]`` and their products' scale."""
        batch, length, heads = tf.shape(qkv)[0], tf.shape(qkv)[1], self.num_heads
        head_dim = qkv.shape[-1] // 3 // heads

        def split(t):
            if heads == 1:  # a reshape, not a transposed copy (nor a slice, whose
                return tf.expand_dims(t, 1)  # gradient zero-fills a copy)
            return tf.transpose(tf.reshape(t, [batch, length, heads, head_dim]), [0, 2, 1, 3])

        q, k, v = (split(t) for t in tf.split(qkv, 3, axis=-1))
        return q, k, v, tf.cast(head_dim**-0.5, qkv.dtype)

    def _attend(self, qkv, mask, training):
        """The heads' merged context ``[B, L, D]`` from the projection ``[B, L, 3 D]``."""
        q, k, v, scale = self._split_heads(qkv)
        scores = tf.matmul(q, k, transpose_b=True) * scale + mask_bias(mask, qkv.dtype)
        weights = self.dropout_weights(tf.nn.softmax(scores, axis=-1), training=training)
        return self._merge_heads(tf.matmul(weights, v))  # [B, H, L, D / H] -> [B, L, D]

    def _merge_heads(self, context):
        """``[B, H, L, D / H] -> [B, L, D]``."""
        if self.num_heads == 1:
            return tf.squeeze(context, 1)
        shape = tf.shape(context)
        merged = tf.reshape(tf.transpose(context, [0, 2, 1, 3]), [shape[0], shape[2], -1])
        merged.set_shape([None, None, context.shape[1] * context.shape[3]])
        return merged

    def _compiled_feed_forward_hidden(self, h):
        """Training's ``Dropout(GELU(ff_in(h)))`` with a compiled loop, ``[..., D] -> [..., F]``."""
        if not self.ff_in.built:
            self.ff_in.build(h.shape)
        if not self.dropout_ff.built:
            self.dropout_ff.build(None)
        # Read as tensors in h's dtype (mixed precision keeps float32 variables).
        kernel, bias = (tf.cast(w, h.dtype) for w in (self.ff_in.kernel, self.ff_in.bias))
        hidden = matmul_last_axis(h, kernel)  # [B, L, D] -> [B, L, F]
        return compiled_ops.bias_gelu_dropout(
            hidden, bias, self.dropout_ff.draw_key(), self.dropout
        )

    def _feed_forward(self, x, training):
        """The feed-forward sublayer's update, ``Dropout(FF(LayerNorm(x)))``: ``[..., D]``."""
        h = self.norm_ff(x, training=training)
        if self.activation == "gelu" and uses_compiled_ops(training, h.dtype):
            h = self._compiled_feed_forward_hidden(h)
        else:
            h = self.dropout_ff(self.ff_in(h), training=training)
        h = self.ff_out(h)
        return self.dropout_out(h, training=training)

    def call(self, x, mask, training=None):
        if training is True and packed_items.enabled() and not uses_compiled_ops(True, x.dtype):
            return self._packed_call(x, mask, training)
        h = self._attention(self.norm_attention(x, training=training), mask, training)
        x = x + self.dropout_attention(h, training=training)
        return x + self._feed_forward(x, training)

    def _packed_call(self, x, mask, training):
        """``call`` with the item-wise parts on the valid items only (``packed_items``), as
        one ``[1, R, D]`` list of few shapes that runs the compiled pieces."""
        rows, shape = packed_items.valid_rows(mask), tf.shape(mask)

        def packed(t):  # [B, L, D] -> [1, R, D]
            return tf.expand_dims(packed_items.pack(t, rows), 0)

        def unpacked(t):  # [1, R, D] -> [B, L, D], zeros at padding
            return packed_items.unpack(tf.squeeze(t, 0), rows, shape)

        items = packed(x)
        qkv = self.qkv(self.norm_attention(items, training=training))  # [1, R, 3 D]
        with compiled_ops.default(False):
            context = self._attend(unpacked(qkv), mask, training)  # [B, L, D]
        with compiled_ops.default(True):
            h = self.dropout_attention(self.attention_out(packed(context)), training=training)
            items = items + h
            items = items + self._feed_forward(items, training)
        return unpacked(items)
