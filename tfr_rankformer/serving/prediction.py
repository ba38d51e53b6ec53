"""Scoring lists with a feature-vector or text export, local or served; writing the results."""

from __future__ import annotations

import csv
import dataclasses
import itertools
import os
import re
from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING

import numpy as np
import tensorflow as tf

from tfr_rankformer.core.elwc_schema import FIRST_STAGE_INPUT
from tfr_rankformer.core.model_families import TEXT_KIND
from tfr_rankformer.core.run_layout import EXPORT_NAME
from tfr_rankformer.inputs.batching import ATTENTION_REFERENCE_LENGTH
from tfr_rankformer.inputs.list_limit import ListLimit
from tfr_rankformer.inputs.record_checks import RecordFileError, read_records
from tfr_rankformer.serving.export import INVALID_ITEMS, next_version
from tfr_rankformer.serving.serving_requests import (
    SIGNATURE_ELWC,
    padded_tensors,
)

if TYPE_CHECKING:
    from tfr_rankformer.serving.client_tokenizer import ClientTokenizer

__all__ = [
    "ScoredList",
    "ServedModel",
    "resolve_export",
    "check_list_limit",
    "signature_num_features",
    "score_lists",
    "score_elwc",
    "text_inputs",
    "score_text_lists",
    "write_results",
]


@dataclasses.dataclass
class ScoredList:
    """One query's documents and outputs in input order; ``num_invalid``: items ranked last."""

    qid: int | str
    docids: list[str]
    scores: np.ndarray
    list_probs: np.ndarray | None = None
    num_invalid: int = 0


@dataclasses.dataclass(frozen=True)
class ServedModel:
    """A trained model opened to score lists: a loaded SavedModel, a ``RemoteModel`` or a
    LightGBM booster; ``num_features`` is ``None`` for text."""

    path: str
    kind: str
    num_features: int | None
    model: object
    tokenizer: ClientTokenizer | None = None

    @property
    def is_text(self) -> bool:
        return self.kind == TEXT_KIND


def check_list_limit(served: ServedModel, longest: int, *, where: str) -> None:
    """Refuses lists longer than an export's position table before anything is scored."""
    items = getattr(served.model, "max_list_items", None)
    items = 0 if items is None else int(items.numpy())
    if items:
        what = f"it was trained with --max-positions {items}"
        limit = ListLimit(items, what, "retrain it with --max-positions {longest} or more")
        limit.check(longest, where=where)


def resolve_export(path: str) -> str:
    """``path`` if it is a SavedModel, else the run's newest ``export/<version>``."""
    if os.path.isfile(os.path.join(path, "saved_model.pb")):
        return path
    export = os.path.join(path, EXPORT_NAME)
    newest = next_version(export) - 1
    if not newest:
        raise FileNotFoundError(
            f"{path} is neither an exported SavedModel nor a run with export/<version>/ "
            "(tfr-export writes one)"
        )
    return os.path.join(export, str(newest))


def batched(items: Iterable, size: int) -> Iterator[list]:
    iterator = iter(items)
    while batch := list(itertools.islice(iterator, size)):
        yield batch


# Padded items per prediction batch, as evaluation's.
BATCH_ITEMS = 2 * 32768
_WINDOW = 8  # batches' worth of lists sorted by length at a time


def _by_length(
    items: Iterable, size: int, length_of, score_batch, *, max_items: int = BATCH_ITEMS
) -> Iterator:
    """``score_batch``'s results in input order, from batches of lists of similar length within
    the item and attention budgets."""
    for window in batched(iter(items), _WINDOW * size):
        order = sorted(range(len(window)), key=lambda i: length_of(window[i]))
        results: list = [None] * len(window)
        start = 0
        while start < len(order):
            end = start + 1
            while end < len(order) and end - start < size:
                width = length_of(window[order[end]])
                count = end - start + 1
                if count * width > max_items or (
                    count * width * width > max_items * ATTENTION_REFERENCE_LENGTH
                ):
                    break
                end += 1
            chosen = order[start:end]
            for i, result in zip(chosen, score_batch([window[i] for i in chosen])):
                results[i] = result
            start = end
        yield from results


def unpacked(outputs: dict, row: int, length: int) -> tuple[np.ndarray, np.ndarray | None]:
    scores = outputs["scores"].numpy()[row, :length]
    probs = outputs["list_probs"].numpy()[row] if "list_probs" in outputs else None
    return scores, probs


def signature_num_features(signature) -> int:
    """The feature count ``d`` the ``predict_tensors`` signature takes."""
    return int(signature.structured_input_signature[1]["features"].shape[-1])


def score_lists(
    signature, lists: Iterable[tuple[int, list[str], np.ndarray]], *, batch_size: int = 256
) -> Iterator[ScoredList]:
    """Scores ``(qid, docids, [n, d] raw features)`` lists in input order."""
    num_features = signature_num_features(signature)

    def score(batch):
        features, mask = padded_tensors(batch, num_features)  # [B, L, d], [B, L]
        outputs = signature(features=tf.constant(features), mask=tf.constant(mask))
        return [
            ScoredList(qid, docids, *unpacked(outputs, i, len(docids)))
            for i, (qid, docids, _) in enumerate(batch)
        ]

    yield from _by_length(lists, batch_size, lambda item: len(item[1]), score)


_REJECTED = re.compile(r"assertion failed: \[invalid input: list (\d+), (.*?)\]\s*$", re.M)


def _rejected(error: tf.errors.InvalidArgumentError, batch: list) -> RecordFileError:
    """The signature's error, naming the file and record of the list it names."""
    found = _REJECTED.search(error.message)
    if found:
        path, number, _ = batch[int(found.group(1))]
        return RecordFileError(path, number, found.group(2).replace("\\'", "'"))
    # The batch is sorted by list length, not by record: name its lowest and highest.
    numbers = [number for _, number, _ in batch]
    same_file = len({path for path, _, _ in batch}) == 1
    where = f"records {min(numbers)}-{max(numbers)}" if same_file else "a batch of records"
    detail = error.message.strip().splitlines()[0]
    return RecordFileError(batch[0][0], None, f"{where}: the model rejected the input ({detail})")


def score_elwc(export, files: list[str], *, batch_size: int = 256) -> Iterator[ScoredList]:
    """Scores ELWC records through ``export``'s proto signature, items numbered in list order;
    ``RecordFileError`` names the file and record of a bad list."""
    from google.protobuf.message import DecodeError
    from tensorflow_serving.apis import input_pb2

    signature = export.signatures[SIGNATURE_ELWC]

    def score(batch):
        try:
            outputs = signature(examples=tf.constant([record for _, _, record, _ in batch]))
        except tf.errors.InvalidArgumentError as e:
            raise _rejected(e, [item[:3] for item in batch]) from None
        invalid = outputs[INVALID_ITEMS].numpy() if INVALID_ITEMS in outputs else None
        scored = []
        for i, (_, _, _, elwc) in enumerate(batch):
            qid = elwc.context.features.feature["qid"].int64_list.value
            n = len(elwc.examples)
            scores, probs = unpacked(outputs, i, n)
            docids = [str(j) for j in range(1, n + 1)]
            count = int(invalid[i, :n].sum()) if invalid is not None else 0
            scored.append(ScoredList(int(qid[0]) if qid else -1, docids, scores, probs, count))
        return scored

    def parsed():
        for path in files:
            for number, record in read_records(path):
                try:
                    elwc = input_pb2.ExampleListWithContext.FromString(record)
                except DecodeError:
                    what = "not an ExampleListWithContext proto (tfr-convert writes them)"
                    raise RecordFileError(path, number, what) from None
                yield path, number, record, elwc

    yield from _by_length(parsed(), batch_size, lambda item: len(item[3].examples), score)


def text_inputs(queries: list[str], documents: list[list[str]], first_stage_scores=None) -> dict:
    """A raw-string export's inputs, lists padded with empty documents (and scores of 0)."""
    width = max(map(len, documents))
    padded = [[*texts, *[""] * (width - len(texts))] for texts in documents]
    inputs = {"query": np.array(queries, dtype=object), "documents": np.array(padded, object)}
    if first_stage_scores is not None:
        scores = np.zeros([len(documents), width], np.float32)
        for i, row in enumerate(first_stage_scores):
            scores[i, : len(row)] = row
        inputs[FIRST_STAGE_INPUT] = scores
    return inputs


def score_text_lists(
    signature,
    lists: Iterable[tuple],
    *,
    batch_size: int = 16,
    inputs: Callable[..., dict] = text_inputs,
) -> Iterator[ScoredList]:
    """Scores ``(qid, docids, query, documents[, first-stage scores])`` lists; an empty document
    is padding to the model, ranked last and counted in ``num_invalid``."""
    first_stage = FIRST_STAGE_INPUT in signature.structured_input_signature[1]
    for batch in batched(lists, batch_size):
        queries = [item[2] for item in batch]
        texts = [list(item[3]) for item in batch]
        scores = [[_first_stage_scores(item) for item in batch]] if first_stage else []
        outputs = signature(**inputs(queries, texts, *scores))
        for i, (qid, docids, _, texts, *_) in enumerate(batch):
            empty = sum(1 for text in texts if not text)
            yield ScoredList(qid, docids, *unpacked(outputs, i, len(docids)), num_invalid=empty)


def _first_stage_scores(item: tuple) -> list[float]:
    if len(item) < 5 or item[4] is None:
        raise ValueError(
            f"query {item[0]}: the model takes the input {FIRST_STAGE_INPUT} and the list has "
            "no first-stage scores (convert the lists from a run: tfr-convert --input trec --run)"
        )
    return list(item[4])


def write_results(lists: Iterator[ScoredList], out, *, fmt: str, tag: str) -> int:
    """Writes a TREC run (``fmt="trec"``) or CSV; returns the number of lists."""
    writer = csv.writer(out) if fmt == "csv" else None
    count = 0
    for count, scored in enumerate(lists, start=1):
        probs = scored.list_probs
        extra = [] if probs is None or not len(probs) else [probs.sum(), *probs]
        if writer is not None and count == 1:
            header = ["qid", "docid", "rank", "score"]
            if extra:
                header += ["expected_list_label", *(f"p_t_ge_{k}" for k in range(1, len(extra)))]
            writer.writerow(header)
        for rank, j in enumerate(np.argsort(-scored.scores, kind="stable"), start=1):
            values = [f"{v:.6f}" for v in (scored.scores[j], *extra)]
            if writer is None:
                out.write(f"{scored.qid} Q0 {scored.docids[j]} {rank} {values[0]} {tag}\n")
            else:
                writer.writerow([scored.qid, scored.docids[j], rank, *values])
    return count
