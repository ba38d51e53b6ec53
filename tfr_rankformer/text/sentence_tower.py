"""A frozen BERT sentence encoder: each text alone as ``[CLS] text [SEP]``, mean-pooled and
L2-normalised as sentence-transformers' ``all-MiniLM-L6-v2`` is read, so that a query's and a
document's dot product is the checkpoint's zero-shot cosine.
"""

from __future__ import annotations

import tensorflow as tf

from tfr_rankformer.model.encoder_layer import PreNormEncoderLayer
from tfr_rankformer.model.layers import LayerNorm
from tfr_rankformer.model.serializable import serializable
from tfr_rankformer.text.bert_checkpoint import (
    CLS,
    SEP,
    SIZES,
    BertCheckpoint,
    assign_values,
    layer_values,
    norm_values,
    token_types,
)
from tfr_rankformer.text.listformer_config import ACTIVATIONS
from tfr_rankformer.text.listformer_layers import bert_weight

__all__ = [
    "BertEncoderLayer",
    "SentenceTower",
    "load_tower_weights",
    "tower_from_checkpoint",
    "tower_settings",
]

# sentence-transformers' Normalize: x / max(||x||, eps).
_NORM_EPSILON = 1e-12


@serializable
class BertEncoderLayer(PreNormEncoderLayer):
    """Hugging Face's ``BertLayer`` in inference: ``x = LayerNorm(x + Attention(x))``, then
    ``LayerNorm(x + FF(x))``, without dropout.

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
        # Built here, so that a checkpoint's weights can be assigned before any call, on
        # [S, L, D]: a LayerNorm keeps the rank it was built for.
        shape = tf.TensorShape([None, None, int(input_shape[-1])])
        for layer in (self.qkv, self.attention_out, self.norm_attention, self.ff_in):
            layer.build(shape)
        self.ff_out.build(tf.TensorShape([None, None, self.ff_dim]))
        self.norm_ff.build(shape)

    def call(self, x, valid):
        x = self.norm_attention(x + self._attention(x, valid, False))
        return self.norm_ff(x + self.ff_out(self.ff_in(x)))


@serializable
class SentenceTower(tf.keras.layers.Layer):
    """A frozen BERT encoder run on each text alone, mean-pooled and L2-normalised.

    Call args: ``query_ids [B, Q]``, ``document_ids [B, N, T]`` (int32, ``-1`` padding),
    optional ``mask [B, N]``; returns ``(query [B, D], documents [B, N, D])``, zeros for a
    padding document or a text without tokens.

    >>> tower = SentenceTower(10, 8, 1, 2, 16, 12, cls_id=2, sep_id=3)
    >>> tower.cosine(tf.constant([[4, 5]]), tf.constant([[[4, 5, -1], [-1, -1, -1]]])).shape
    TensorShape([1, 2])
    """

    def __init__(
        self,
        vocab_size: int,
        width: int,
        num_layers: int,
        num_heads: int,
        ff_dim: int,
        max_positions: int,
        *,
        cls_id: int,
        sep_id: int,
        epsilon: float = 1e-12,
        activation: str = "gelu",
        **kwargs,
    ):
        kwargs.setdefault("trainable", False)
        super().__init__(**kwargs)
        for name, value in (("cls_id", cls_id), ("sep_id", sep_id)):
            if not 0 <= value < vocab_size:
                raise ValueError(f"`{name}` must lie in [0, {vocab_size}), got {value!r}")
        if width % num_heads:
            raise ValueError(f"`width` {width} is not divisible by `num_heads` {num_heads}")
        if activation not in ACTIVATIONS:
            raise ValueError(f"`activation` must be one of {list(ACTIVATIONS)}, got {activation!r}")
        self.vocab_size = vocab_size
        self.width = width
        self.num_layers = num_layers
        self.num_heads = num_heads
        self.ff_dim = ff_dim
        self.max_positions = max_positions
        self.cls_id = cls_id
        self.sep_id = sep_id
        self.epsilon = epsilon
        self.activation = activation

    def build(self, input_shape=None):
        width = self.width
        self.tokens = bert_weight(self, "tokens", (self.vocab_size, width))
        self.positions = bert_weight(self, "positions", (self.max_positions, width))
        self.token_type = bert_weight(self, "token_type", (width,))
        self.norm = LayerNorm(epsilon=self.epsilon, name="embedding_norm")
        self.norm.build(tf.TensorShape([None, None, width]))
        self.encoder_layers = []
        for i in range(self.num_layers):
            layer = BertEncoderLayer(
                self.num_heads, self.ff_dim, self.epsilon, self.activation, name=f"layer_{i}"
            )
            layer.build(tf.TensorShape([None, None, width]))
            self.encoder_layers.append(layer)
        self.trainable = self.trainable  # the setter hands it to the layers made here
        super().build(input_shape)

    def _sequences(self, ids, ends):
        """``[S, L]`` ids, ``[S]`` row ends -> ``[S, L + 2]`` ids of ``[CLS] ids [SEP]``."""
        seqs, length = tf.shape(ids)[0], tf.shape(ids)[1]
        sequences = tf.concat(
            [tf.fill([seqs, 1], self.cls_id), ids, tf.fill([seqs, 1], -1)], axis=1
        )  # [S, L] -> [S, L + 2]
        at_sep = tf.equal(tf.range(length + 2)[tf.newaxis, :], ends[:, tf.newaxis] + 1)
        return tf.where(at_sep, self.sep_id, sequences)

    def encode(self, ids):
        """``[S, L]`` ids (``-1`` padding) -> ``[S, D]`` embeddings of ``[CLS] ids [SEP]``;
        zeros for a row without tokens."""
        if not self.built:
            self.build()
        ids = tf.convert_to_tensor(ids, tf.int32)
        # One past each row's last token (0: no token); [SEP] goes there.
        columns = tf.range(tf.shape(ids)[1]) + 1
        ends = tf.reduce_max(tf.where(ids >= 0, columns[tf.newaxis, :], 0), axis=1)  # [S]
        # Columns after every row's last token are dropped: [S, L] -> [S, L'].
        ids = ids[:, : tf.reduce_max(tf.concat([ends, [0]], axis=0))]
        sequences = self._sequences(ids, ends)  # [S, L' + 2]
        length = tf.shape(sequences)[1]
        tf.debugging.assert_less_equal(
            length,
            self.max_positions,
            message=f"a text longer than {self.max_positions - 2} tokens (position table)",
        )
        valid = sequences >= 0  # [S, L' + 2]
        dtype = self.compute_dtype
        x = tf.cast(tf.gather(self.tokens, tf.maximum(sequences, 0)), dtype)  # [S, L' + 2, D]
        x += tf.cast(self.positions[:length] + self.token_type, dtype)
        x = self.norm(x)
        for layer in self.encoder_layers:
            x = layer(x, valid)
        weights = tf.cast(valid, x.dtype)[..., tf.newaxis]  # [S, L' + 2, 1]
        pooled = tf.reduce_sum(x * weights, axis=1) / tf.reduce_sum(weights, axis=1)  # [S, D]
        norms = tf.maximum(tf.norm(pooled, axis=-1, keepdims=True), _NORM_EPSILON)
        return tf.where((ends > 0)[:, tf.newaxis], pooled / norms, tf.zeros_like(pooled))

    def call(self, query_ids, document_ids, mask=None):
        query_ids = tf.convert_to_tensor(query_ids, tf.int32)
        document_ids = tf.convert_to_tensor(document_ids, tf.int32)
        batch, docs, block = tf.unstack(tf.shape(document_ids))
        flat = tf.reshape(document_ids, [batch * docs, block])  # [B, N, T] -> [B N, T]
        runs = tf.reduce_any(flat >= 0, axis=1)  # [B N]
        if mask is not None:
            runs &= tf.reshape(tf.cast(mask, tf.bool), [-1])
        # Only real documents with tokens run: [M] rows of the B N.
        rows = tf.cast(tf.where(runs), tf.int32)  # [M, 1]
        encoded = self.encode(tf.gather_nd(flat, rows))  # [M, D]
        documents = tf.scatter_nd(rows, encoded, tf.stack([batch * docs, self.width]))
        documents = tf.reshape(documents, [batch, docs, self.width])  # [B N, D] -> [B, N, D]
        return self.encode(query_ids), documents

    def cosine(self, query_ids, document_ids, mask=None):
        """``[B, N]``: each query's cosine with its documents (0 where either has no token)."""
        query, documents = self(query_ids, document_ids, mask=mask)
        return tf.einsum("bd,bnd->bn", query, documents)


# === Loading a checkpoint ===


def load_tower_weights(tower: SentenceTower, checkpoint: BertCheckpoint) -> None:
    """Sets every weight of ``tower`` to the checkpoint's (token type 0 on every token)."""
    for name, value in tower_settings(checkpoint).items():
        if getattr(tower, name) != value:
            raise ValueError(
                f"{checkpoint.directory}: the checkpoint's {name} is {value!r}, the "
                f"tower's {getattr(tower, name)!r}"
            )
    if not tower.built:
        tower.build()
    weights, type_0 = checkpoint.weights, token_types(checkpoint)[0]
    values = [
        (tower.tokens, weights["embeddings.word_embeddings.weight"], "word_embeddings"),
        (tower.positions, weights["embeddings.position_embeddings.weight"], "positions"),
        (tower.token_type, type_0, "embeddings.token_type_embeddings.weight[0]"),
        *norm_values(tower.norm, weights, "embeddings.LayerNorm"),
    ]
    for i, layer in enumerate(tower.encoder_layers):
        values += layer_values(layer, weights, i)
    assign_values(values, directory=checkpoint.directory, owner="tower")


def tower_settings(checkpoint: BertCheckpoint) -> dict:
    """The :class:`SentenceTower` settings (``get_config``'s) of ``checkpoint``'s encoder."""
    return {
        **{name: getattr(checkpoint, name) for name in SIZES.values()},
        "cls_id": checkpoint.token_id(CLS),
        "sep_id": checkpoint.token_id(SEP),
        "epsilon": checkpoint.layer_norm_epsilon,
        "activation": checkpoint.activation,
    }


def tower_from_checkpoint(checkpoint: BertCheckpoint, **kwargs) -> SentenceTower:
    """A :class:`SentenceTower` with the checkpoint's sizes and weights."""
    tower = SentenceTower(**tower_settings(checkpoint), **kwargs)
    load_tower_weights(tower, checkpoint)
    return tower
