"""The Listformer's document-wise global-local attention: globals (``[CLS]``, the query,
every ``[SEP]``) attend to and are attended by every token, a document's tokens their own
document within a window and the globals. :func:`blocked_attention` holds the documents in
blocks ``[B, H, N, T, Dh]`` (memory linear in the documents); :func:`dense_attention` is the
reference with an explicit mask. A per-head ``own_bias`` tells ``[SEP]_j`` its document.
"""

from __future__ import annotations

import tensorflow as tf

__all__ = ["PATTERNS", "blocked_attention", "dense_attention", "band", "own_document_bias"]

# Attention patterns of ``dense_attention``.
PATTERNS = ("global_local", "full")


def _bias(valid, dtype):
    """``True -> 0``, ``False -> lowest``: an additive mask."""
    lowest = -1e9 if dtype == tf.float32 else float(dtype.min)
    return tf.where(valid, tf.constant(0.0, dtype), tf.constant(lowest, dtype))


def band(length, window: int) -> tf.Tensor:
    """``[T, T]`` bool: key ``j`` is within ``window`` tokens of query ``i``."""
    positions = tf.range(length)
    distance = tf.abs(positions[:, tf.newaxis] - positions[tf.newaxis, :])
    return distance <= window


def own_document_bias(own_bias, num_global, num_docs, block) -> tf.Tensor:
    """``[H, G, N T]``: ``own_bias[h]`` where the global query is ``[SEP]_j`` and the key
    a token of document ``j`` (the ``[SEP]`` tokens are the last ``N`` globals), else 0."""
    eye = tf.eye(num_docs, dtype=own_bias.dtype)  # [N, N]
    per_token = tf.repeat(eye, block, axis=1)  # [N, N] -> [N, N T]
    rows = tf.pad(per_token, [[num_global - num_docs, 0], [0, 0]])  # -> [G, N T]
    return own_bias[:, tf.newaxis, tf.newaxis] * rows[tf.newaxis]  # [H, G, N T]


def _split_keys(weights, num_global):
    """``[..., G + K]`` -> ``([..., G], [..., K])`` (a split's gradient is one concatenation)."""
    return tf.split(weights, tf.stack([num_global, tf.shape(weights)[-1] - num_global]), -1)


def _global_queries(globals_qkv, locals_qkv, global_valid, flat_valid, *, own_bias, dropout):
    """The global tokens' context: ``[B, H, G, Dh]`` over every valid token."""
    qg, kg, vg = globals_qkv
    _, kl, vl = locals_qkv
    dtype = qg.dtype
    batch, heads, docs, block, head_dim = tf.unstack(tf.shape(kl))
    num_global = tf.shape(qg)[2]
    qg = qg * tf.cast(qg.shape[-1] ** -0.5, dtype)  # scaled queries: fewer products
    flat_k = tf.reshape(kl, [batch, heads, docs * block, head_dim])  # [B, H, N T, Dh]
    flat_v = tf.reshape(vl, [batch, heads, docs * block, head_dim])
    # [B, H, G, G + N T]
    to_globals = tf.matmul(qg, kg, transpose_b=True)
    to_globals += _bias(global_valid, dtype)[:, tf.newaxis, tf.newaxis, :]
    to_locals = tf.matmul(qg, flat_k, transpose_b=True)
    to_locals += _bias(flat_valid, dtype)[:, tf.newaxis, tf.newaxis, :]
    to_locals += tf.cast(own_document_bias(own_bias, num_global, docs, block), dtype)
    weights = dropout(tf.nn.softmax(tf.concat([to_globals, to_locals], axis=-1), axis=-1))
    on_globals, on_locals = _split_keys(weights, num_global)
    return tf.matmul(on_globals, vg) + tf.matmul(on_locals, flat_v)  # [B, H, G, Dh]


def _local_queries(globals_qkv, locals_qkv, global_valid, local_valid, *, window, dropout):
    """The documents' tokens' context ``[B, H, N, T, Dh]`` over the globals and own block."""
    _, kg, vg = globals_qkv
    ql, kl, vl = locals_qkv
    dtype = ql.dtype
    batch, heads, docs, block, head_dim = tf.unstack(tf.shape(ql))
    num_global = tf.shape(kg)[2]
    ql = ql * tf.cast(ql.shape[-1] ** -0.5, dtype)  # scaled queries: fewer products
    flat_q = tf.reshape(ql, [batch, heads, docs * block, head_dim])
    l_to_globals = tf.matmul(flat_q, kg, transpose_b=True)  # [B, H, N T, G]
    l_to_globals = tf.reshape(l_to_globals, [batch, heads, docs, block, num_global])
    l_to_globals += _bias(global_valid, dtype)[:, tf.newaxis, tf.newaxis, tf.newaxis, :]
    l_to_locals = tf.matmul(ql, kl, transpose_b=True)  # [B, H, N, T, T]
    allowed = band(block, window)[tf.newaxis, tf.newaxis] & local_valid[:, :, tf.newaxis, :]
    l_to_locals += _bias(allowed, dtype)[:, tf.newaxis]  # [B, 1, N, T, T]
    weights = dropout(tf.nn.softmax(tf.concat([l_to_globals, l_to_locals], axis=-1), axis=-1))
    on_globals, on_locals = _split_keys(weights, num_global)
    on_globals = tf.reshape(on_globals, [batch, heads, docs * block, num_global])
    context = tf.reshape(tf.matmul(on_globals, vg), [batch, heads, docs, block, head_dim])
    return context + tf.matmul(on_locals, vl)  # [B, H, N, T, Dh]


def blocked_attention(
    globals_qkv,
    locals_qkv,
    global_valid,
    local_valid,
    *,
    window: int,
    own_bias,
    dropout=None,
    global_rows=None,
    local_queries: bool = True,
):
    """Global-local attention without the full score matrix.

    Args:
      globals_qkv: ``(q, k, v)``, each ``[B, H, G, Dh]``; the last ``N`` are the ``[SEP]`` tokens.
      locals_qkv: ``(q, k, v)``, each ``[B, H, N, T, Dh]``, document ``n``'s tokens in block ``n``.
      global_valid: ``[B, G]`` bool; local_valid: ``[B, N, T]`` bool.
      own_bias: ``[H]``, added to ``[SEP]_j``'s logits on document ``j``'s tokens.
      dropout: applied to the attention weights.
      global_rows: ``(globals_qkv, locals_qkv)`` under the globals' own projections (a
        ``q`` of the locals may be ``None``: the global queries read none).
      local_queries: ``False``: only the global context (``local_context`` is ``None``).

    Returns:
      ``(global_context [B, H, G, Dh], local_context [B, H, N, T, Dh])``.
    """
    shape = tf.shape(local_valid)
    flat_valid = tf.reshape(local_valid, [shape[0], shape[1] * shape[2]])
    dropout = dropout or (lambda w: w)
    # === Global queries: every valid token, [B, H, G, G + N T] ===
    rows = global_rows or (globals_qkv, locals_qkv)
    global_context = _global_queries(
        *rows, global_valid, flat_valid, own_bias=own_bias, dropout=dropout
    )
    if not local_queries:
        return global_context, None
    # === Local queries: the globals and their own block, [B, H, N, T, G + T] ===
    local_context = _local_queries(
        globals_qkv, locals_qkv, global_valid, local_valid, window=window, dropout=dropout
    )
    return global_context, local_context


def dense_mask(global_valid, local_valid, *, window: int, pattern: str = "global_local"):
    """``[B, S, S]`` bool over the sequence ``globals + documents' blocks``, ``S = G + N T``."""
    batch, docs, block = tf.unstack(tf.shape(local_valid))
    num_global = tf.shape(global_valid)[1]
    valid = tf.concat([global_valid, tf.reshape(local_valid, [batch, docs * block])], axis=1)
    keys = tf.broadcast_to(valid[:, tf.newaxis, :], [batch, tf.shape(valid)[1], tf.shape(valid)[1]])
    if pattern == "full":
        return keys
    if pattern != "global_local":
        raise ValueError(f"Unknown attention pattern {pattern!r}; choose from {list(PATTERNS)}")
    same_doc = tf.cast(tf.eye(docs), tf.bool)[:, tf.newaxis, :, tf.newaxis]  # [N, 1, N, 1]
    local_local = same_doc & band(block, window)[tf.newaxis, :, tf.newaxis, :]  # [N, T, N, T]
    local_local = tf.reshape(local_local, [docs * block, docs * block])
    # The globals see all and are seen by all: [N T, N T] -> [S, S].
    pattern_mask = tf.pad(local_local, [[num_global, 0], [num_global, 0]], constant_values=True)
    return keys & pattern_mask[tf.newaxis]


def dense_attention(
    globals_qkv,
    locals_qkv,
    global_valid,
    local_valid,
    *,
    window: int,
    own_bias,
    pattern: str = "global_local",
    dropout=None,
    global_rows=None,
):
    """:func:`blocked_attention` through an ``[S, S]`` mask (``pattern`` ``full``: plain
    full attention without the own-document bias)."""
    qg, kg, vg = globals_qkv
    ql, kl, vl = locals_qkv
    dtype = qg.dtype
    batch, heads, docs, block, head_dim = tf.unstack(tf.shape(ql))
    num_global = tf.shape(qg)[2]
    scale = tf.cast(qg.shape[-1] ** -0.5, dtype)

    def sequence(g, loc):  # [B, H, G, Dh] and [B, H, N, T, Dh] -> [B, H, S, Dh]
        return tf.concat([g, tf.reshape(loc, [batch, heads, docs * block, head_dim])], axis=2)

    q, k, v = sequence(qg, ql), sequence(kg, kl), sequence(vg, vl)
    scores = tf.matmul(q, k, transpose_b=True) * scale  # [B, H, S, S]
    if global_rows is not None:  # the global rows from the global projections
        (g_q, g_k, g_v), (_, g_kl, g_vl) = global_rows
        g_scores = tf.matmul(g_q, sequence(g_k, g_kl), transpose_b=True) * scale  # [B, H, G, S]
        scores = tf.concat([g_scores, scores[:, :, num_global:]], axis=2)
    mask = dense_mask(global_valid, local_valid, window=window, pattern=pattern)
    scores += _bias(mask, dtype)[:, tf.newaxis]  # [B, H, S, S]
    if pattern == "global_local":
        own = tf.cast(own_document_bias(own_bias, num_global, docs, block), dtype)  # [H, G, N T]
        own = tf.pad(own, [[0, 0], [0, docs * block], [num_global, 0]])  # [H, S, S]
        scores += own[tf.newaxis]
    weights = tf.nn.softmax(scores, axis=-1)
    if dropout is not None:
        weights = dropout(weights)
    context = tf.matmul(weights, v)  # [B, H, S, Dh]
    local_context = tf.reshape(context[:, :, num_global:], [batch, heads, docs, block, head_dim])
    if global_rows is not None:
        return tf.matmul(weights[:, :, :num_global], sequence(g_v, g_vl)), local_context
    return context[:, :, :num_global], local_context
