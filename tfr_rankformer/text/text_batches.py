"""A text run's training batches: lists sampled to ``--list-size`` documents, judged
relevant ones first, grouped by their number of documents, tokenised in the pipeline.

A re-ranker's lists are a first stage's top 100; a pretrained encoder's step
on all of them is a 12,800-token sequence per list. Training lists are
therefore sampled anew each epoch to at most the plan's cap: every judged
relevant document is kept (up to the cap), the rest is a uniform sample of
the others. Evaluation and prediction keep whole lists.

Batches follow the run's ``RunPlan`` (``text_plan``): each bucket's lists are
batched by its lists per batch and padded to the batch's longest list, rounded
up to a multiple of 8 documents, so a batch's shape is one of few, and the
epoch's batches number the plan's steps.
"""

from __future__ import annotations

import tensorflow as tf

from tfr_rankformer.core.elwc_schema import PADDING_LABEL
from tfr_rankformer.inputs.batching import BatchPlan
from tfr_rankformer.text import text_data
from tfr_rankformer.text.text_data import DOCUMENTS, LABEL, MASK, QUERY

__all__ = ["sample_documents", "training_batches", "padding_values"]

# Query and document tokens are padded to multiples of these (few shapes to trace),
# and a batch's documents to a multiple of DOCUMENT_MULTIPLE.
TOKEN_MULTIPLES = (4, 16)
DOCUMENT_MULTIPLE = 8
SHUFFLE_LISTS = 10_000


def padding_values(spec: dict) -> dict:
    """The padding of each key of a parsed text list (``spec``: its element spec)."""
    fixed = {QUERY: "", DOCUMENTS: "", MASK: False, LABEL: PADDING_LABEL}
    return {k: fixed[k] if k in fixed else tf.zeros([], v.dtype) for k, v in spec.items()}


def sample_documents(element: dict, cap: int, key) -> dict:
    """One parsed list with at most ``cap`` of its documents: every judged relevant one
    (label > 0) first, then a uniform sample of the others, drawn from ``key``; padding
    documents are dropped. Per-document keys stay aligned.

    Args:
      element: ``{"query": [], "documents": [L], "mask": [L], "label": [L], ...}``.
      cap: documents kept at most.
      key: an int64 scalar; the same key draws the same sample.
    """
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
    """Batches of one bucket each (``plan``'s lists per batch), padded to their longest
    list rounded up to a multiple of ``multiple`` documents, at most the bucket's edge."""
    edges = tf.constant(plan.edges, tf.int64)
    sizes = tf.constant(plan.lists_per_batch, tf.int64)
    padding = padding_values(lists.element_spec)

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
    """A batch's document axis padded up to a multiple of ``multiple``, at most its
    bucket's ``edge``, so that batches take few shapes (each traced once) with little
    padding."""
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
    """The epoch's ``to_model_io(batch)`` batches of the training split, by ``plan``.

    Args:
      data: the text dataset.
      plan: the run's batches (``text_plan``): their count is asserted.
      cap: documents a training list keeps at most (``sample_documents``).
      include_empty_lists: keep lists without a judged relevant document.
      seed: the seed of the list shuffle and the document samples (anew each epoch).
      to_model_io: a batch of parsed lists -> ``(inputs, targets)``.
      pad_to_cap: pad every batch to the plan's last edge (``--length-buckets off``,
        the baseline) rather than to its longest list.
    """
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
