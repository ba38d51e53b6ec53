"""In-graph checks that a list is scored only from what the client sent: an item of missing,
short, long or non-finite ``features`` fails the request (``reject``) or is ranked last and
flagged in ``invalid_items [B, L]`` (``score-last``).
"""

from __future__ import annotations

import tensorflow as tf

from tfr_rankformer.core.command_names import INVALID_ITEM_POLICIES

__all__ = [
    "check_policy",
    "item_lengths",
    "dense_features",
    "checked_items",
    "checked_tensors",
]

MESSAGE_PREFIX = "invalid input: "
_FIELD = "features"


def check_policy(policy: str) -> str:
    """Returns ``policy`` if it is known, else raises ``ValueError``."""
    if policy not in INVALID_ITEM_POLICIES:
        raise ValueError(
            f"Unknown invalid-item policy {policy!r}; choose from {list(INVALID_ITEM_POLICIES)}"
        )
    return policy


def item_lengths(sparse: tf.SparseTensor) -> tf.Tensor:
    """Values per item: ``[B, L, W]`` sparse -> ``[B, L]`` int32."""
    shape = tf.cast(sparse.dense_shape, tf.int32)
    rows = tf.cast(sparse.indices[:, 0] * sparse.dense_shape[1] + sparse.indices[:, 1], tf.int32)
    size = shape[0] * shape[1]
    counts = tf.math.bincount(rows, minlength=size, maxlength=size, dtype=tf.int32)
    return tf.reshape(counts, shape[:2])


def dense_features(sparse: tf.SparseTensor, num_features: int, lengths=None) -> tf.Tensor:
    """``[B, L, W]`` sparse values -> ``[B, L, d]`` float32, values past ``d`` dropped; given
    ``lengths``, a batch of exactly ``d`` values an item is reshaped without the scatter."""

    def scattered():
        dense = tf.sparse.to_dense(sparse)[:, :, :num_features]  # [B, L, W] -> [B, L, <= d]
        missing = tf.maximum(num_features - tf.shape(dense)[2], 0)
        return tf.pad(dense, [[0, 0], [0, 0], [0, missing]])  # -> [B, L, d]

    if lengths is None:
        dense = scattered()
    else:
        full = tf.reduce_all(tf.equal(lengths, num_features))
        shape = tf.concat([tf.shape(lengths), [num_features]], axis=0)
        dense = tf.cond(full, lambda: tf.reshape(sparse.values, shape), scattered)
    dense.set_shape([None, None, num_features])
    return dense


def _nonfinite_message(features, position) -> tf.Tensor:
    """The message for the first non-finite value of the item at ``position`` ([2] int64)."""
    row = tf.gather_nd(features, position[tf.newaxis])[0]  # [d]
    column = tf.where(~tf.math.is_finite(row))[0, 0]
    return tf.strings.format(
        MESSAGE_PREFIX + "list {}, item {}: the " + _FIELD + " field holds {} at position {} "
        "of {}, expected finite values",
        (position[0], position[1], row[column], column + 1, tf.shape(row, tf.int64)[0]),
    )


def _length_message(lengths, position, num_features: int) -> tf.Tensor:
    found = tf.gather_nd(lengths, position[tf.newaxis])[0]
    missing = tf.strings.format(
        MESSAGE_PREFIX + "list {}, item {}: the " + _FIELD + " field is missing (0 values), "
        "expected {}",
        (position[0], position[1], num_features),
    )
    wrong = tf.strings.format(
        MESSAGE_PREFIX + "list {}, item {}: the " + _FIELD + " field holds {} values, expected {}",
        (position[0], position[1], found, num_features),
    )
    return tf.where(found == 0, missing, wrong)


def _fail_if(bad: tf.Tensor, message_fn) -> tf.Operation:
    """An assertion that ``bad`` ([B, L] bool) is all False, its message built only on failure."""
    any_bad = tf.reduce_any(bad)
    message = tf.cond(
        any_bad, lambda: message_fn(tf.where(bad)[0]), lambda: tf.constant("", tf.string)
    )
    return tf.debugging.Assert(tf.logical_not(any_bad), [message], name="check_items")


def _assert(condition, template: str, values) -> tf.Operation:
    message = tf.strings.format(MESSAGE_PREFIX + template, values)
    return tf.debugging.Assert(condition, [message])


def _apply(features, mask, invalid, policy: str, checks: list):
    """Masks invalid items (``score-last``) or makes the features wait on the checks."""
    if policy == "score-last":
        kept = tf.logical_and(mask, tf.logical_not(invalid))
        # Zeroed, so a NaN can reach no score through masked arithmetic either.
        features = tf.where(kept[..., tf.newaxis], features, tf.zeros_like(features))
        return features, kept, invalid
    with tf.control_dependencies(checks):
        features = tf.identity(features)
    return features, mask, None


def checked_items(features, mask, lengths, *, num_features: int, policy: str):
    """Checks parsed ELWC items; returns the features, the mask of the items to score and
    (``score-last`` only) the ``[B, L]`` bool of invalid items."""
    bad_length = tf.logical_and(mask, tf.not_equal(lengths, num_features))
    finite = tf.reduce_all(tf.math.is_finite(features), axis=-1)  # [B, L, d] -> [B, L]
    nonfinite = tf.logical_and(mask, tf.logical_and(tf.logical_not(bad_length), ~finite))
    if policy == "score-last":
        return _apply(features, mask, tf.logical_or(bad_length, nonfinite), policy, [])
    # One assertion for both checks: the message (formatted only on failure)
    # names the first item of the wrong length, else the first non-finite one.
    checks = [
        _fail_if(
            tf.logical_or(bad_length, nonfinite),
            lambda _: tf.cond(
                tf.reduce_any(bad_length),
                lambda: _length_message(lengths, tf.where(bad_length)[0], num_features),
                lambda: _nonfinite_message(features, tf.where(nonfinite)[0]),
            ),
        )
    ]
    return _apply(features, mask, None, policy, checks)


def checked_tensors(features, mask, *, num_features: int, policy: str):
    """Checks the tensor signature's inputs as ``checked_items`` does, and their shapes."""
    shape = tf.shape(features)
    shape_checks = [
        _assert(
            tf.equal(shape[2], num_features),
            "the features input holds {} values per item, expected {}",
            (shape[2], num_features),
        ),
        _assert(
            tf.reduce_all(tf.equal(tf.shape(mask), shape[:2])),
            "the mask input has shape {}, expected {} (the first two dimensions of features)",
            (tf.shape(mask), shape[:2]),
        ),
    ]
    with tf.control_dependencies(shape_checks):
        mask = tf.identity(mask)
    finite = tf.reduce_all(tf.math.is_finite(features), axis=-1)
    nonfinite = tf.logical_and(mask, tf.logical_not(finite))
    features = tf.where(mask[..., tf.newaxis], features, tf.zeros_like(features))
    if policy == "score-last":
        return _apply(features, mask, nonfinite, policy, [])
    raw = features
    checks = [_fail_if(nonfinite, lambda p: _nonfinite_message(raw, p))]
    return _apply(features, mask, None, policy, checks)
