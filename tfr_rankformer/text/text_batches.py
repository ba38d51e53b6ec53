"""A text run's training batches by its ``RunPlan``: each list sampled anew each epoch to
the plan's cap (a whole top 100 makes too long a sequence), grouped by length, padded to few
shapes and tokenised in the pipeline. Evaluation and prediction keep whole lists.
"""

from __future__ import annotations

import tensorflow as tf

from tfr_rankformer.inputs.batching import BatchPlan
from tfr_rankformer.text import text_data
from tfr_rankformer.text.text_data import LABEL, MASK

__all__ = ["sample_documents", "training_batches"]

# Query and document tokens are padded to multiples of these (few shapes to trace),
# and a batch's documents to a multiple of DOCUMENT_MULTIPLE.
TOKEN_MULTIPLES = (4, 16)
DOCUMENT_MULTIPLE = 8
SHUFFLE_LISTS = 10_000


def sample_documents(element: dict, cap: int, key) -> dict:
    """One parsed list cut to ``cap`` documents: the relevant ones first, then a uniform
    sample of the others drawn from ``key`` (int64); padding dropped."""
    mask, label = element[MASK], element[LABEL]
    n = tf.shape(mask)[0]
    noise = tf.random.stateless_uniform([n], seed=tf.stack([key, key // 7 + 1]))
    # Relevant documents above the others, padding below both.
    priority = tf.where(mask, noise + tf.where(label > 0, 2.0, 1.0), 0.0)
    keep = tf.math.top_k(priority, k=tf.minimum(n, cap)).indices
    valid = tf.reduce_sum(tf.cast(tf.gather(mask, keep), tf.int32))
    keep = keep[:valid]
    keep = tf.gather(keep, tf.argsort(tf.gather(noise, keep)))  # relevant ones not in front
    return {k: tf.gather(v, keep) if v.shape.rank else v for k, v in element.items()}


def _bucketed(lists: tf.data.Dataset, plan: BatchPlan, multiple: int) -> tf.data.Dataset:
    """Batches of one bucket each, padded to their longest list rounded up to a multiple of
    ``multiple`` documents, at most the bucket's edge."""
    edges = tf.constant(plan.edges, tf.int64)
    sizes = tf.constant(plan.lists_per_batch, tf.int64)
    padding = text_data.padding_values(lists)

    def bucket(element):
        n = tf.reduce_sum(tf.cast(element[MASK], tf.int64))
        found = tf.searchsorted(edges, n[tf.newaxis], out_type=tf.int64)[0]
        return tf.minimum(found, len(plan.edges) - 1)

    def batch(key, window):
        batches = window.padded_batch(sizes[key], padding_values=padding)
        return batches.map(lambda b: _rounded_up(b, padding, edges[key], multiple))

    return lists.group_by_window(
        key_func=bucket, reduce_func=batch, window_size_func=lambda key: sizes[key]
    )


def _rounded_up(batch: dict, padding: dict, edge, multiple: int) -> dict:
    """A batch's document axis padded up to a multiple of ``multiple``, at most ``edge``."""
    length = tf.shape(batch[MASK], out_type=tf.int64)[1]
    target = tf.maximum(tf.minimum(-(-length // multiple) * multiple, edge), length)
    extra = target - length
    return {
        k: tf.pad(v, [[0, 0], [0, extra]], constant_values=padding[k]) if v.shape.rank > 1 else v
        for k, v in batch.items()
    }


def training_batches(
    data: text_data.TextData,
    plan: BatchPlan,
    *,
    cap: int,
    include_empty_lists: bool,
    seed: int,
    to_model_io,
    pad_to_cap: bool = False,
) -> tf.data.Dataset:
    """The epoch's ``to_model_io(batch)`` batches of the training split, as many as ``plan``
    says; ``pad_to_cap`` (``--length-buckets off``) pads every batch to the last edge."""
    lists = text_data.parsed_text_lists(data, "train", list_size=None)
    if not include_empty_lists:
        lists = lists.filter(lambda e: tf.reduce_max(tf.where(e[MASK], e[LABEL], 0.0)) > 0)
    lists = lists.shuffle(SHUFFLE_LISTS, seed=seed, reshuffle_each_iteration=True)
    keys = tf.data.Dataset.random(seed=seed, rerandomize_each_iteration=True)
    lists = tf.data.Dataset.zip((lists, keys)).map(
        lambda element, key: sample_documents(element, cap, key),
        num_parallel_calls=tf.data.AUTOTUNE,
    )
    multiple = plan.edges[-1] if pad_to_cap else DOCUMENT_MULTIPLE
    batches = _bucketed(lists, plan, multiple).map(to_model_io, num_parallel_calls=tf.data.AUTOTUNE)
    # The plan counts the batches exactly; a mismatch fails loudly.
    batches = batches.apply(tf.data.experimental.assert_cardinality(plan.steps))
    return batches.prefetch(2)
