"""TF-Ranking's text ELWC (``<dir>/{train,vali,test}-*.tfrecord``: context ``query_tokens``,
per-item ``document_tokens`` words and ``relevance``; an optional text ``manifest.json`` may
rename them, list the files and name a ``first_stage_feature``) read into ``tf.data``.

A parsed list is ``{"query": [], "documents": [L], "mask": [L], "label": [L]}`` (words joined
with spaces) and, with a first stage, ``"first_stage": [L]`` float32.
"""

from __future__ import annotations

import collections
import dataclasses
import glob
import os

import numpy as np
import tensorflow as tf

from tfr_rankformer.core.elwc_schema import PADDING_LABEL, SPLITS
from tfr_rankformer.inputs.manifest import (
    MANIFEST_NAME,
    TEXT_KIND,
    Manifest,
    SplitEntry,
    read_manifest,
)
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
    "QUERY",
    "DOCUMENTS",
    "MASK",
    "LABEL",
    "FIRST_STAGE",
]

QUERY, DOCUMENTS, MASK, LABEL = "query", "documents", "mask", "label"
FIRST_STAGE = "first_stage"
_PARSE_BATCH = 64


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


def _manifest_files(directory: str, entry: SplitEntry | None) -> list[str] | None:
    if entry is None or not entry.files:
        return None
    return [os.path.join(directory, name) for name in entry.files]


def load_text_data(directory: str, config: TextConfig) -> TextData:
    """The splits and feature names of a text ELWC directory: the manifest's, else files
    found by name and ``TextConfig``'s names. No train file: ``FileNotFoundError``; a
    feature-vector manifest: ``ValueError``."""
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
        listed = _manifest_files(directory, manifest.splits.get(split))
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
    """``[B]`` serialized ELWC -> a batch of parsed lists ``[B, L]``; TF-Ranking's parser
    shuffles and cuts whole examples, so every per-document tensor keeps one order."""
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
    """One element per list, in file order; with ``list_size`` every list is padded or cut
    to it (after shuffling its documents when ``shuffle_documents``)."""
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
    """A batch whose document axis is cut after its last real document, rounded up to a
    multiple of ``multiple``: only padding is cut."""
    mask = batch[MASK]
    length = tf.shape(mask)[1]
    last = tf.reduce_max(tf.where(mask, tf.range(1, length + 1)[tf.newaxis], 0))
    keep = tf.minimum(-(-tf.maximum(last, 1) // multiple) * multiple, length)
    return {key: value[:, :keep] if key != QUERY else value for key, value in batch.items()}


def length_sorted_batches(
    lists: tf.data.Dataset,
    batch_size: int,
    *,
    window: int = 16,
    multiple: int = 1,
    seed: int | None = None,
) -> tf.data.Dataset:
    """The lists ``batched_text_lists`` would batch, sorted by length within each
    ``window`` of batches and trimmed, so that little is padding; with ``seed`` the batches
    are shuffled within a window, anew on each pass."""
    lists = lists.padded_batch(batch_size * window, padding_values=padding_values(lists))

    def sorted_window(group):
        sizes = tf.reduce_sum(tf.cast(group[MASK], tf.int32), axis=1)
        order = tf.argsort(sizes, stable=True)
        return {key: tf.gather(value, order) for key, value in group.items()}

    batches = lists.map(sorted_window).unbatch().batch(batch_size)
    batches = batches.map(lambda b: trimmed_to_documents(b, multiple))
    if seed is not None:
        batches = batches.shuffle(window, seed=seed, reshuffle_each_iteration=True)
    return batches


def scan_split(
    data: TextData, split: str, *, word_counts=None, list_size: int | None = None
) -> dict:
    """One pass over a split (``ValueError`` if it holds no list): counts of lists,
    documents and labels, lists by length, and its words into ``word_counts``."""
    from tfr_rankformer.text.text_tokenizer import count_words

    lists = documents = longest = longer = unlabelled = 0
    max_label = 0.0
    empty_lists = ranked = 0
    lengths: collections.Counter = collections.Counter()  # documents -> lists
    relevant_lengths: collections.Counter = collections.Counter()  # of lists with t > 0
    batches = batched_text_lists(parsed_text_lists(data, split, list_size=None), 256)
    for batch in batches.as_numpy_iterator():
        mask = batch[MASK]
        sizes = mask.sum(axis=1)
        lists += len(sizes)
        documents += int(sizes.sum())
        longest = max(longest, int(sizes.max(initial=0)))
        longer += int((sizes > list_size).sum()) if list_size else 0
        unlabelled += int((mask & (batch[LABEL] < 0)).sum())
        labels = np.where(mask, batch[LABEL], 0.0)
        max_label = max(max_label, float(labels.max(initial=0.0)))
        empty_lists += int((labels.max(axis=1, initial=0.0) <= 0).sum())
        low = np.where(mask, batch[LABEL], np.inf).min(axis=1, initial=np.inf)
        ranked += int((labels.max(axis=1, initial=0.0) > low).sum())  # two different labels
        lengths.update(sizes.tolist())
        relevant_lengths.update(sizes[labels.max(axis=1, initial=0.0) > 0].tolist())
        if word_counts is not None:
            count_words((q.decode("utf-8") for q in batch[QUERY]), word_counts)
            count_words((d.decode("utf-8") for d in batch[DOCUMENTS][mask]), word_counts)
    if lists == 0:
        raise ValueError(f"{data.directory}: the {split!r} split holds no list")
    return {
        "lists": lists,
        "documents": documents,
        "longest_list": longest,
        "lists_longer_than_list_size": longer,
        "unlabelled_documents": unlabelled,
        "max_label": int(max_label),
        "lists_without_relevant": empty_lists,
        "lists_with_two_labels": ranked,
        "lengths": {int(n): c for n, c in sorted(lengths.items())},
        "lengths_with_relevant": {int(n): c for n, c in sorted(relevant_lengths.items())},
    }
