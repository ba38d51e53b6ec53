"""Keras layers of the Listformer: its embedding, encoder layer and score mixture.

The sequence ``[CLS] q [SEP] d_1 [SEP] ... d_N [SEP]`` is held as ``[B, S, D]``: the
``G = 1 + Q + N`` globals ``[CLS], q_1 .. q_Q, [SEP]_1 .. [SEP]_N``, then the documents'
tokens in blocks of ``T`` (``S = G + N T``). Token ids are ``-1`` for padding.
"""

from __future__ import annotations

import tensorflow as tf

from tfr_rankformer.core.command_names import ATTENTIONS
from tfr_rankformer.model.encoder_layer import PreNormEncoderLayer
from tfr_rankformer.model.layers import FastDropout, LayerNorm, uses_compiled_ops
from tfr_rankformer.model.projections import Dense, matmul_last_axis
from tfr_rankformer.model.serializable import serializable
from tfr_rankformer.text.global_local_attention import blocked_attention, dense_attention

__all__ = [
    "ListformerEmbedding",
    "GlobalLocalTextEncoderLayer",
    "bert_weight",
    "ScoreMixture",
    "standardized",
]


def bert_weight(layer: tf.keras.layers.Layer, name: str, shape: tuple) -> tf.Variable:
    """A weight of ``layer`` initialised as BERT's, N(0, 0.02^2) truncated."""
    normal = tf.keras.initializers.TruncatedNormal(stddev=0.02)
    return layer.add_weight(name=name, shape=shape, initializer=normal)


@serializable
class ListformerEmbedding(tf.keras.layers.Layer):
    """Token, position and segment embeddings of the whole sequence: positions restart in
    every document (``[SEP]_j`` at ``len(d_j)``), so the order carries no signal; with
    ``cls_position`` (a checkpoint's form) ``[CLS]`` is at 0 and the query at ``1 .. Q``; with
    ``match_marks`` query token ``i`` and the document tokens equal to it get a learned ``m_i``.

    Call args: ``query_ids [B, Q]``, ``document_ids [B, N, T]`` (int32, ``-1`` padding) and
    ``mask [B, N]``; returns ``(x [B, S, D], global_valid [B, G], local_valid [B, N, T])``.
    """

    def __init__(
        self,
        vocab_size: int,
        width: int,
        max_positions: int,
        dropout: float,
        epsilon: float = 1e-5,
        cls_position: bool = False,
        match_marks: bool = False,
        **kwargs,
    ):
        super().__init__(**kwargs)
        self.match_marks = match_marks
        self.vocab_size = vocab_size
        self.width = width
        self.max_positions = max_positions
        self.dropout = dropout
        self.epsilon = epsilon
        self.cls_position = cls_position

    def build(self, input_shape):
        width = self.width
        self.tokens = bert_weight(self, "tokens", (self.vocab_size, width))
        self.positions = bert_weight(self, "positions", (self.max_positions, width))
        self.segments = bert_weight(self, "segments", (2, width))
        self.special = bert_weight(self, "cls_sep", (2, width))
        if self.match_marks:
            self.marks = self.add_weight(
                name="match_marks", shape=(self.max_positions, width), initializer="zeros"
            )
        self.norm = LayerNorm(epsilon=self.epsilon)
        self.drop = FastDropout(self.dropout)
        super().build(input_shape)

    def _lookup(self, ids):
        return tf.gather(self.tokens, tf.maximum(ids, 0))

    def _document_marks(self, query_ids, document_ids):
        """``[B, N, T, D]``: ``m_i`` on each document token equal to query token ``i``."""
        query_valid = (query_ids >= 0)[:, tf.newaxis, tf.newaxis, :]  # [B, 1, 1, Q]
        same = tf.equal(document_ids[..., tf.newaxis], query_ids[:, tf.newaxis, tf.newaxis, :])
        same = same & query_valid  # [B, N, T, Q]; padding (-1) matches nothing
        first = tf.argmax(tf.cast(same, tf.int32), axis=-1, output_type=tf.int32)
        marks = tf.gather(self.marks, tf.minimum(first, self.max_positions - 1))
        return marks * tf.cast(tf.reduce_any(same, axis=-1), marks.dtype)[..., tf.newaxis]

    def call(self, query_ids, document_ids, mask, training=None):
        batch, docs, block = tf.unstack(tf.shape(document_ids))
        query_valid = query_ids >= 0  # [B, Q]
        local_valid = (document_ids >= 0) & mask[:, :, tf.newaxis]  # [B, N, T]
        last = self.max_positions - 1
        first = 1 if self.cls_position else 0  # the query's first position
        # [B, Q] -> [B, Q, D]
        query = self._lookup(query_ids) + self.segments[0]
        query_positions = tf.range(tf.shape(query_ids)[1]) + first
        query += tf.gather(self.positions, tf.minimum(query_positions, last))
        if self.match_marks:  # query token i is marked m_i
            query += tf.gather(self.marks, tf.minimum(tf.range(tf.shape(query_ids)[1]), last))
        # [B, N, T] -> [B, N, T, D], positions restarting in every document
        documents = self._lookup(document_ids) + self.segments[1]
        documents += tf.gather(self.positions, tf.minimum(tf.range(block), last))
        if self.match_marks:
            documents += self._document_marks(query_ids, document_ids)
        lengths = tf.reduce_sum(tf.cast(local_valid, tf.int32), axis=-1)  # [B, N]
        seps = (
            self.special[1]
            + self.segments[1]
            + tf.gather(self.positions, tf.minimum(lengths, last))
        )
        cls = tf.tile(self.special[tf.newaxis, :1], [batch, 1, 1]) + self.segments[0]  # [B, 1, D]
        if self.cls_position:
            cls += self.positions[0]
        x = tf.concat(
            [cls, query, seps, tf.reshape(documents, [batch, docs * block, self.width])], axis=1
        )  # [B, S, D], S = 1 + Q + N + N T
        x = self.drop(self.norm(x, training=training), training=training)
        global_valid = tf.concat([tf.ones([batch, 1], tf.bool), query_valid, mask], axis=1)
        return x, global_valid, local_valid


@serializable
class GlobalLocalTextEncoderLayer(PreNormEncoderLayer):
    """An encoder layer with the Listformer's document-wise attention: pre-LayerNorm
    (``norm_first``) or a BERT checkpoint's form (post-LayerNorm, its epsilon, with
    ``global_projections`` Longformer's own projections for the globals). ``globals_only``
    (the last layer, whose ``[CLS]`` and ``[SEP]`` alone are read) computes only the globals.

    Call args: ``x [B, S, D]``, ``global_valid [B, G]``, ``local_valid [B, N, T]``; returns
    ``[B, S, D]``, or ``[B, G, D]`` with ``globals_only``.
    """

    def __init__(
        self,
        window: int = 256,
        attention: str = "blocked",
        own_bias_init: float = 2.0,
        norm_first: bool = True,
        epsilon: float = 1e-5,
        global_projections: bool = False,
        globals_only: bool = False,
        **kwargs,
    ):
        super().__init__(**kwargs)
        if attention not in ATTENTIONS:
            raise ValueError(f"`attention` must be one of {list(ATTENTIONS)}, got {attention!r}")
        if window < 0:
            raise ValueError(f"`window` must be >= 0, got {window!r}")
        self.window = window
        self.attention = attention
        self.own_bias_init = own_bias_init
        self.norm_first = norm_first
        self.epsilon = epsilon
        self.global_projections = global_projections
        self.globals_only = globals_only

    def build(self, input_shape):
        super().build(input_shape)
        if self.norm_attention.epsilon != self.epsilon:  # a checkpoint's own epsilon
            self.norm_attention = LayerNorm(epsilon=self.epsilon)
            self.norm_ff = LayerNorm(epsilon=self.epsilon)
        if self.global_projections:
            self.qkv_global = Dense(3 * input_shape[-1], name="qkv_global")
            # Built here: a last layer with global projections never calls the local ones.
            self.qkv.build(tf.TensorShape([None, None, input_shape[-1]]))
        self.own_bias = self.add_weight(
            name="own_document_bias",
            shape=(self.num_heads,),
            initializer=tf.keras.initializers.Constant(self.own_bias_init),
        )

    def _global_local(self, h, global_valid, local_valid, training):
        batch, docs, block = tf.unstack(tf.shape(local_valid))
        num_global = tf.shape(global_valid)[1]
        dim = h.shape[-1]
        heads, head_dim = self.num_heads, dim // self.num_heads
        # [B, S, D] -> [B, G, D], [B, N T, D]: one split (its gradient is a concatenation;
        # two slices' would each fill a zero tensor of the whole input).
        h_global, h_local = tf.split(h, tf.stack([num_global, docs * block]), axis=1)

        def projected(projection, local_queries=True):
            """((q, k, v) of the globals [B, H, G, Dh], of the locals [B, H, N, T, Dh]);
            without ``local_queries`` the locals' q is None and never computed."""
            g = tf.reshape(projection(h_global), [batch, -1, 3, heads, head_dim])
            g = tf.transpose(g, [2, 0, 3, 1, 4])  # [3, B, H, G, Dh]
            parts = 3 if local_queries else 2
            if local_queries:
                loc = projection(h_local)  # [B, N T, 3 D]
            else:  # the key and value columns alone: [B, N T, 2 D]
                kernel = tf.cast(projection.kernel[:, dim:], h.dtype)
                loc = tf.nn.bias_add(
                    matmul_last_axis(h_local, kernel), tf.cast(projection.bias[dim:], h.dtype)
                )
            loc = tf.reshape(loc, [batch, docs, block, parts, heads, head_dim])
            loc = tf.unstack(tf.transpose(loc, [3, 0, 4, 1, 2, 5]), parts)  # [B, H, N, T, Dh]
            return tuple(tf.unstack(g, 3)), tuple([None] * (3 - parts) + loc)

        blocked = self.attention == "blocked"
        settings = dict(
            window=self.window,
            own_bias=tf.cast(self.own_bias, h.dtype),
            dropout=lambda w: self.dropout_weights(w, training=training),
        )
        if self.global_projections:  # the global queries read no local query
            settings["global_rows"] = projected(self.qkv_global, local_queries=False)
        if blocked and self.globals_only:
            rows = settings.pop("global_rows", None) or projected(self.qkv, local_queries=False)
            g, loc = blocked_attention(
                *rows, global_valid, local_valid, **settings, local_queries=False
            )
        elif blocked:
            g, loc = blocked_attention(*projected(self.qkv), global_valid, local_valid, **settings)
        else:
            pattern = "full" if self.attention == "full" else "global_local"
            g, loc = dense_attention(
                *projected(self.qkv), global_valid, local_valid, pattern=pattern, **settings
            )
        g = tf.reshape(tf.transpose(g, [0, 2, 1, 3]), [batch, -1, dim])  # [B, G, D]
        if self.globals_only:
            return self.attention_out(g)  # [B, G, D]
        loc = tf.reshape(tf.transpose(loc, [0, 2, 3, 1, 4]), [batch, docs * block, dim])
        return self.attention_out(tf.concat([g, loc], axis=1))  # [B, S, D]

    def _feed_forward_update(self, x, training):
        """``Dropout(FF(x))`` without a LayerNorm before it (post-LayerNorm): ``[..., D]``."""
        compiled = self.activation == "gelu" and self.ff_in.compute_dtype == "float32"
        if compiled and uses_compiled_ops(training, x.dtype):
            h = self._compiled_feed_forward_hidden(x)
        else:
            h = self.dropout_ff(self.ff_in(x), training=training)
        return self.dropout_out(self.ff_out(h), training=training)

    def call(self, x, global_valid, local_valid, training=None):
        # The residual stream of the rows computed: [B, S, D], or [B, G, D] globals only.
        rows = x[:, : tf.shape(global_valid)[1]] if self.globals_only else x
        if not self.norm_first:
            h = self._global_local(x, global_valid, local_valid, training)
            x = self.norm_attention(rows + self.dropout_attention(h, training=training))
            return self.norm_ff(x + self._feed_forward_update(x, training))
        h = self._global_local(
            self.norm_attention(x, training=training), global_valid, local_valid, training
        )
        x = rows + self.dropout_attention(h, training=training)
        return x + self._feed_forward(x, training)


# === The score as a residual ===
# ``s_j = h(z_j) + a * std(cos_j) + b * std(f_j)``; ``h`` starts at zero, ``a`` at 1 and ``b``
# at 0 (1 alone), so the untrained model ranks as the checkpoint does. Weights are stored
# divided by ``_RATE`` so that Adam at a fine-tuning rate moves them.

_RATE = 100.0
_EPSILON = 1e-6


def standardized(values: tf.Tensor, mask: tf.Tensor) -> tf.Tensor:
    """``values [B, N]`` standardised over each list's valid documents (``mask [B, N]``);
    0 on padding and where all are equal.

    >>> values, mask = tf.constant([[1.0, 3.0, 9.0]]), tf.constant([[True, True, False]])
    >>> standardized(values, mask).numpy().round(4)
    array([[-1.,  1.,  0.]], dtype=float32)
    """
    weights = tf.cast(mask, values.dtype)
    count = tf.maximum(tf.reduce_sum(weights, axis=-1, keepdims=True), 1.0)  # [B, 1]
    mean = tf.reduce_sum(values * weights, axis=-1, keepdims=True) / count
    centred = (values - mean) * weights
    deviation = tf.sqrt(tf.reduce_sum(tf.square(centred), axis=-1, keepdims=True) / count)
    return tf.math.divide_no_nan(
        centred, deviation + _EPSILON * tf.cast(deviation > 0, values.dtype)
    )


@serializable
class ScoreMixture(tf.keras.layers.Layer):
    """``scores + a * std(signal_1) + b * std(signal_2) ...``, ``initial``: ``a``, ``b`` ..."""

    def __init__(self, signals=("similarity",), initial=1.0, **kwargs):
        kwargs["dtype"] = "float32"
        super().__init__(**kwargs)
        self.signals = list(signals)
        if isinstance(initial, (int, float)):
            initial = [initial] * len(self.signals)
        if len(initial) != len(self.signals):
            raise ValueError(f"{len(initial)} initial weights for signals {self.signals}")
        self.initial = [float(v) for v in initial]

    def build(self, input_shape):
        self.weights_by_signal = {
            name: self.add_weight(
                name=f"{name}_weight",
                shape=(),
                initializer=tf.keras.initializers.Constant(initial / _RATE),
            )
            for name, initial in zip(self.signals, self.initial)
        }
        super().build(input_shape)

    def call(self, scores, mask, *signals):
        """``scores [B, N]``, ``mask [B, N]`` bool, one ``[B, N]`` tensor per signal."""
        out = tf.cast(scores, tf.float32)
        for name, signal in zip(self.signals, signals):
            weight = _RATE * self.weights_by_signal[name]
            out += weight * standardized(tf.cast(signal, tf.float32), mask)
        return out

    def mixing_weights(self) -> dict:
        """Each signal's weight ``a``, ``b`` ... as the scores use it."""
        return {name: float(_RATE * w.numpy()) for name, w in self.weights_by_signal.items()}
