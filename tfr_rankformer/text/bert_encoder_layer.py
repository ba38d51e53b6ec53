"""A plain BERT encoder layer, as Hugging Face's ``BertLayer`` computes it in inference:
the layer of the frozen ``SentenceTower``."""

from __future__ import annotations

import tensorflow as tf

from tfr_rankformer.model.encoder_layer import PreNormEncoderLayer
from tfr_rankformer.model.layers import LayerNorm
from tfr_rankformer.model.serializable import serializable

__all__ = ["BertEncoderLayer"]


@serializable
class BertEncoderLayer(PreNormEncoderLayer):
    """``x = LayerNorm(x + Attention(x))``, then ``LayerNorm(x + FF(x))``, without dropout.

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
        kwargs.setdefault("dropout", 0.0)
        super().__init__(num_heads, ff_dim, activation=activation, **kwargs)
        self.epsilon = epsilon

    def build(self, input_shape):
        super().build(input_shape)
        self.norm_attention = LayerNorm(epsilon=self.epsilon, name="norm_attention")
        self.norm_ff = LayerNorm(epsilon=self.epsilon, name="norm_ff")
        width = int(input_shape[-1])
        # Built here, so that a checkpoint's weights can be assigned before any call.
        for layer, features in (
            (self.qkv, width),
            (self.attention_out, width),
            (self.norm_attention, width),
            (self.ff_in, width),
            (self.ff_out, self.ff_dim),
            (self.norm_ff, width),
        ):  # [S, L, features]: a LayerNorm keeps the rank it was built for
            layer.build(tf.TensorShape([None, None, features]))

    def call(self, x, valid):
        x = self.norm_attention(x + self._attention(x, valid, False))
        return self.norm_ff(x + self.ff_out(self.ff_in(x)))
