"""The ELWC layout the converter writes and the models read: context ``qid``; per item
``features`` (``d`` raw floats), ``label`` (the training label) and ``relevance``."""

from __future__ import annotations

# The splits of a converted dataset, in the order they are written and read.
SPLITS = ("train", "vali", "test")

QID = "qid"
FEATURES = "features"
LABEL = "label"
RELEVANCE = "relevance"
# The valid-item mask of parsed lists: ``[L]`` or ``[B, L]`` bool.
MASK = "mask"
# TF-Ranking's convention: padded items carry a negative label.
PADDING_LABEL = -1.0
# A Listformer export's input holding each document's first-stage score (``--first-stage``).
FIRST_STAGE_INPUT = "first_stage_scores"


def context_feature_spec() -> dict:
    """``tf.io`` parsing spec of the context, for ``tfr.data`` ELWC parsers."""
    import tensorflow as tf

    return {QID: tf.io.FixedLenFeature([1], tf.int64, default_value=[-1])}


def example_feature_spec(num_features: int) -> dict:
    """``tf.io`` parsing spec of one item, for ``tfr.data`` ELWC parsers."""
    import tensorflow as tf

    return {
        FEATURES: tf.io.FixedLenFeature(
            [num_features], tf.float32, default_value=[0.0] * num_features
        ),
        LABEL: tf.io.FixedLenFeature([1], tf.float32, default_value=[PADDING_LABEL]),
        RELEVANCE: tf.io.FixedLenFeature([1], tf.float32, default_value=[PADDING_LABEL]),
    }
