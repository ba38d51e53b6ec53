"""TF-Ranking's text ELWC (``<dir>/{train,vali,test}-*.tfrecord``, or as a text
``manifest.json`` lists and names them) in ``tf.data``: a parsed list is ``{"query": [],
"documents": [L], "mask": [L], "label": [L]}`` (words joined with spaces) and, with a first
stage, ``"first_stage": [L]`` float32. Training lists are sampled anew each epoch to the plan's
cap; evaluation and prediction keep whole lists.
"""

from __future__ import annotations

import collections
import dataclasses
import glob
import os

import numpy as np
import tensorflow as tf

from tfr_rankformer.core.elwc_schema import PADDING_LABEL, SPLITS
from tfr_rankformer.inputs.batching import BatchPlan
from tfr_rankformer.inputs.manifest import (
    MANIFEST_NAME,
    TEXT_KIND,
    Manifest,
    read_manifest,
)
from tfr_rankformer.training.run_plan import RunPlan
from tfr_rankformer.training.text_config import TextConfig

__all__ = [
    "TextData",
    "load_text_data",
    "parsed_text_lists",
    "batched_text_lists",
    "padding_values",
    "length_sorted_batches",
    "trimmed_to_documents",
    "scan_split",
    "sample_documents",
    "training_batches",
    "QUERY",
    "DOCUMENTS",
    "MASK",
    "LABEL",
    "FIRST_STAGE",
]

QUERY, DOCUMENTS, MASK, LABEL = "query", "documents", "mask", "label"
FIRST_STAGE = "first_stage"
_PARSE_BATCH = 64
# Query and document tokens are padded to multiples of these (few shapes to trace),
# and a batch's documents to a multiple of DOCUMENT_MULTIPLE.
TOKEN_MULTIPLES = (4, 16)
DOCUMENT_MULTIPLE = 8
SHUFFLE_LISTS = 10_000


@dataclasses.dataclass(frozen=True)
class TextData:
    """A directory of text ELWC: its files per split and its feature names."""

    directory: str
    files: dict[str, list[str]]
    query_feature: str
    document_feature: str
    label_feature: str
    manifest: Manifest
    first_stage_feature: str | None = None

    @property
    def has_first_stage(self) -> bool:
        """Whether parsed lists hold ``FIRST_STAGE``, the first stage's scores."""
        return self.first_stage_feature is not None

    def split_files(self, split: str) -> list[str]:
        if split not in self.files:
            raise ValueError(
                f"{self.directory} has no {split!r} split; it has {sorted(self.files)}"
            )
        return self.files[split]


def load_text_data(directory: str, config: TextConfig) -> TextData:
    """The splits and feature names of a text ELWC directory (the manifest's, else files found
    by name and ``TextConfig``'s names)."""
    manifest = Manifest()  # no manifest.json: nothing recorded
    path = os.path.join(directory, MANIFEST_NAME)
    if os.path.isfile(path):
        manifest = read_manifest(path, complete=False)
        if manifest.kind not in (None, TEXT_KIND) or manifest.num_features is not None:
            raise ValueError(
                f"{path} describes feature-vector lists, not text: the Listformer needs text "
                "ELWC (query_tokens / document_tokens)"
            )
    files = {}
    for split in SPLITS:
        listed = manifest.split_files(directory, split) if split in manifest.splits else []
        found = listed or sorted(glob.glob(os.path.join(directory, f"{split}-*.tfrecord")))
        missing = [f for f in found if not os.path.isfile(f)]
        if missing:
            raise FileNotFoundError(f"{path} lists {missing[0]}, which does not exist")
        if found:
            files[split] = found
    if "train" not in files:
        raise FileNotFoundError(
            f"{directory} holds no train-*.tfrecord text ELWC files (and no manifest listing them)"
        )
    return TextData(
        directory=directory,
        files=files,
        query_feature=config.query_feature or manifest.query_feature or "query_tokens",
        document_feature=config.document_feature or manifest.document_feature or "document_tokens",
        label_feature=config.label_feature or manifest.label_feature or "relevance",
        manifest=manifest,
        first_stage_feature=manifest.first_stage_feature,
    )


def _join_tokens(tokens: tf.SparseTensor) -> tf.Tensor:
    """``[..., W]`` sparse word tokens -> ``[...]`` strings joined with spaces."""
    shape = tf.shape(tokens, out_type=tf.int64)
    rows = tf.reduce_prod(shape[:-1])
    flat = tf.sparse.reshape(tokens, tf.stack([rows, shape[-1]]))  # [R, W]
    joined = tf.strings.reduce_join(tf.RaggedTensor.from_sparse(flat), axis=-1, separator=" ")
    # Rows past the last non-empty one are missing from the ragged tensor's rows.
    joined = tf.concat([joined, tf.fill([rows - tf.shape(joined, out_type=tf.int64)[0]], "")], 0)
    return tf.reshape(joined, shape[:-1])


def parse_text_batch(
    serialized: tf.Tensor,
    data: TextData,
    *,
    list_size: int | None,
    shuffle_documents: bool = False,
    seed: int = 0,
) -> dict:
    """``[B]`` serialized ELWC -> a batch of parsed lists ``[B, L]``."""
    import tensorflow_ranking as tfr

    example_spec = {
        data.document_feature: tf.io.VarLenFeature(tf.string),
        data.label_feature: tf.io.FixedLenFeature([1], tf.int64, default_value=-1),
    }
    if data.has_first_stage:
        example_spec[data.first_stage_feature] = tf.io.FixedLenFeature(
            [1], tf.float32, default_value=0.0
        )
    parsed = tfr.data.parse_from_example_list(
        serialized,
        list_size=list_size,
        context_feature_spec={data.query_feature: tf.io.VarLenFeature(tf.string)},
        example_feature_spec=example_spec,
        mask_feature_name=MASK,
        shuffle_examples=shuffle_documents,
        seed=seed,
    )
    mask = parsed[MASK]
    label = tf.cast(tf.squeeze(parsed[data.label_feature], axis=-1), tf.float32)  # [B, L]
    lists = {
        QUERY: _join_tokens(parsed[data.query_feature]),
        DOCUMENTS: tf.where(mask, _join_tokens(parsed[data.document_feature]), ""),
        MASK: mask,
        LABEL: tf.where(mask, label, PADDING_LABEL),
    }
    if data.has_first_stage:
        score = tf.squeeze(parsed[data.first_stage_feature], axis=-1)  # [B, L, 1] -> [B, L]
        lists[FIRST_STAGE] = tf.where(mask, score, 0.0)
    return lists


def parsed_text_lists(
    data: TextData,
    split: str,
    *,
    list_size: int | None,
    shuffle_documents: bool = False,
    seed: int = 0,
) -> tf.data.Dataset:
    """One element per list, in file order, padded or cut to ``list_size`` if given."""
    dataset = tf.data.TFRecordDataset(data.split_files(split))
    dataset = dataset.batch(_PARSE_BATCH).map(
        lambda s: parse_text_batch(
            s, data, list_size=list_size, shuffle_documents=shuffle_documents, seed=seed
        ),
        num_parallel_calls=tf.data.AUTOTUNE,
    )
    return dataset.unbatch()


_PADDING = {QUERY: "", DOCUMENTS: "", MASK: False, LABEL: PADDING_LABEL, FIRST_STAGE: 0.0}


def padding_values(lists: tf.data.Dataset) -> dict:
    """The padding of each key the parsed ``lists`` hold."""
    return {key: _PADDING[key] for key in lists.element_spec}


def batched_text_lists(lists: tf.data.Dataset, batch_size: int) -> tf.data.Dataset:
    """Lists padded to the longest of each batch."""
    return lists.padded_batch(batch_size, padding_values=padding_values(lists))


def trimmed_to_documents(batch: dict, multiple: int = 1) -> dict:
    """``batch`` without the padding after its last document (rounded up to ``multiple``)."""
    mask = batch[MASK]
    length = tf.shape(mask)[1]
    last = tf.reduce_max(tf.where(mask, tf.range(1, length + 1)[tf.newaxis], 0))
    keep = tf.minimum(-(-tf.maximum(last, 1) // multiple) * multiple, length)
    return {key: value[:, :keep] if key != QUERY else value for key, value in batch.items()}


def length_sorted_batches(
    lists: tf.data.Dataset, batch_size: int, *, window: int = 16
) -> tf.data.Dataset:
    """Batches sorted by length within each ``window`` of batches and trimmed, so that little
    is padding."""
    lists = batched_text_lists(lists, batch_size * window)

    def sorted_window(group):
        sizes = tf.reduce_sum(tf.cast(group[MASK], tf.int32), axis=1)
        order = tf.argsort(sizes, stable=True)
        return {key: tf.gather(value, order) for key, value in group.items()}

    return lists.map(sorted_window).unbatch().batch(batch_size).map(trimmed_to_documents)


def scan_split(
    data: TextData, split: str, *, word_counts=None, list_size: int | None = None
) -> dict:
    """Counts of a split's lists, documents and labels, and lists by length, in one pass
    (its words into ``word_counts``)."""
    from tfr_rankformer.text.text_tokenizer import count_words

    parts = collections.defaultdict(list)  # per list: documents, top and lowest label
    batches = batched_text_lists(parsed_text_lists(data, split, list_size=None), 256)
    for batch in batches.as_numpy_iterator():
        mask, labels = batch[MASK], batch[LABEL]
        parts["sizes"].append(mask.sum(axis=1))
        parts["top"].append(np.where(mask, labels, 0.0).max(axis=1, initial=0.0))
        parts["low"].append(np.where(mask, labels, np.inf).min(axis=1, initial=np.inf))
        parts["unlabelled"].append((mask & (labels < 0)).sum(axis=1))
        if word_counts is not None:
            count_words((q.decode("utf-8") for q in batch[QUERY]), word_counts)
            count_words((d.decode("utf-8") for d in batch[DOCUMENTS][mask]), word_counts)
    if not parts:
        raise ValueError(f"{data.directory}: the {split!r} split holds no list")
    sizes, top, low, unlabelled = (np.concatenate(parts[k]) for k in parts)

    def histogram(values) -> dict:
        return {int(n): int(c) for n, c in zip(*np.unique(values, return_counts=True))}

    return {
        "lists": len(sizes),
        "documents": int(sizes.sum()),
        "longest_list": int(sizes.max()),
        "lists_longer_than_list_size": int((sizes > list_size).sum()) if list_size else 0,
        "unlabelled_documents": int(unlabelled.sum()),
        "max_label": int(top.max()),
        "lists_without_relevant": int((top <= 0).sum()),
        "lists_with_two_labels": int((top > low).sum()),
        "lengths": histogram(sizes),
        "lengths_with_relevant": histogram(sizes[top > 0]),
    }


def sample_documents(element: dict, cap: int, key) -> dict:
    """One list cut to ``cap`` documents, the relevant ones first, then a uniform sample of
    the others drawn from ``key`` (int64)."""
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
    """Batches of one bucket each, trimmed (``trimmed_to_documents``)."""
    batches = lists.bucket_by_sequence_length(
        lambda element: tf.reduce_sum(tf.cast(element[MASK], tf.int32)),
        bucket_boundaries=[edge + 1 for edge in plan.edges],
        bucket_batch_sizes=[*plan.lists_per_batch, 1],  # the last: no list is that long
        padding_values=padding_values(lists),
        pad_to_bucket_boundary=True,
    )
    return batches.map(lambda batch: trimmed_to_documents(batch, multiple))


def training_batches(data: TextData, plan: RunPlan, config, to_model_io) -> tf.data.Dataset:
    """The epoch's ``to_model_io(batch)`` training batches, as many as ``plan`` says."""
    lists = parsed_text_lists(data, "train", list_size=None)
    if not config.training_includes_empty_lists():
        lists = lists.filter(lambda e: tf.reduce_max(tf.where(e[MASK], e[LABEL], 0.0)) > 0)
    seed = config.seed
    lists = lists.shuffle(SHUFFLE_LISTS, seed=seed, reshuffle_each_iteration=True)
    keys = tf.data.Dataset.random(seed=seed, rerandomize_each_iteration=True)
    lists = tf.data.Dataset.zip((lists, keys)).map(
        lambda element, key: sample_documents(element, plan.cap, key),
        num_parallel_calls=tf.data.AUTOTUNE,
    )
    buckets = plan.batches
    multiple = DOCUMENT_MULTIPLE if config.length_buckets else buckets.edges[-1]
    batches = _bucketed(lists, buckets, multiple)
    batches = batches.map(to_model_io, num_parallel_calls=tf.data.AUTOTUNE)
    # The plan counts the batches exactly; a mismatch fails loudly.
    batches = batches.apply(tf.data.experimental.assert_cardinality(buckets.steps))
    return batches.prefetch(2)
