"""Scoring LETOR text or ELWC shards with an exported SavedModel or a GBDT.

LETOR lines go through the converter's validating parser (raw features; the
model normalises them), grouped into lists by contiguous qid; a document's id
is the ``docid`` of its line's comment (``#docid = GX...``), else its line
number. ELWC records go through the proto signature; their items are numbered
in list order. Results are written as a TREC run (``qid Q0 docid rank score
tag``) or as CSV with the list-quality prediction of each query.

A GBDT (``tfr-train --model gbdt`` or a ``tfr-distill`` student) scores each
item on its own features; ELWC records are then parsed with ``tfr.data``.
"""

from __future__ import annotations

import csv
import dataclasses
import gzip
import os
import re
from collections.abc import Iterator

import numpy as np
import tensorflow as tf

from tfr_rankformer.export import SIGNATURE_ELWC, SIGNATURE_TENSORS

__all__ = [
    "ScoredList",
    "resolve_export",
    "score_letor",
    "score_elwc",
    "score_letor_gbdt",
    "score_elwc_gbdt",
    "write_results",
]

_DOCID = re.compile(rb"docid\s*=\s*(\S+)")


@dataclasses.dataclass
class ScoredList:
    """One query's documents and the model's outputs.

    Attributes:
      qid: the query id.
      docids: document ids, in input order.
      scores: ``[n]`` scores, in input order.
      list_probs: ``[K]`` ``P(t >= k)``, or ``None`` without a list head.
    """

    qid: int
    docids: list[str]
    scores: np.ndarray
    list_probs: np.ndarray | None = None


def resolve_export(path: str) -> str:
    """A SavedModel directory: ``path`` itself, or a run's newest ``export/<version>``.

    Raises:
      FileNotFoundError: if neither is there.
    """
    if os.path.isfile(os.path.join(path, "saved_model.pb")):
        return path
    export = os.path.join(path, "export")
    versions = sorted(
        (int(v) for v in os.listdir(export) if v.isdigit()) if os.path.isdir(export) else []
    )
    if not versions:
        raise FileNotFoundError(
            f"{path} is neither an exported SavedModel nor a run with export/<version>/ "
            "(tfr-export writes one)"
        )
    return os.path.join(export, str(versions[-1]))


def _letor_lists(
    path: str, num_features: int, duplicates: str
) -> Iterator[tuple[int, list[str], np.ndarray]]:
    """``(qid, docids, [n, d] raw features)`` per contiguous qid of a LETOR file.

    Features may come in any order; a repeated index follows ``duplicates``
    (``letor_parser.DUPLICATE_POLICIES``).
    """
    from tfrecords_tools.letor_parser import parse_letor_lines
    from tfrecords_tools.letor_reader import group_bounds

    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rb") as f:
        lines = f.read().split(b"\n")
    parsed = parse_letor_lines(
        lines, num_features=num_features, path=path, first_line=1, duplicates=duplicates
    )
    docids = []
    for number in parsed.line_numbers:
        found = _DOCID.search(lines[number - 1].partition(b"#")[2])
        docids.append(found.group(1).decode("utf-8", "replace") if found else str(number))
    for begin, end in group_bounds(parsed.qids):
        yield int(parsed.qids[begin]), docids[begin:end], parsed.features[begin:end]


def _batches(items: Iterator, size: int) -> Iterator[list]:
    batch = []
    for item in items:
        batch.append(item)
        if len(batch) == size:
            yield batch
            batch = []
    if batch:
        yield batch


def _unpack(outputs: dict, row: int, length: int) -> tuple[np.ndarray, np.ndarray | None]:
    scores = outputs["scores"].numpy()[row, :length]
    probs = outputs["list_probs"].numpy()[row] if "list_probs" in outputs else None
    return scores, probs


def score_letor(
    export: str, path: str, *, batch_size: int = 256, duplicates: str = "error"
) -> Iterator[ScoredList]:
    """Scores every list of a LETOR text file (plain or ``.gz``).

    ``duplicates`` says what a repeated feature index on a line gives (see
    ``letor_parser.DUPLICATE_POLICIES``).
    """
    signature = tf.saved_model.load(export).signatures[SIGNATURE_TENSORS]
    num_features = signature.structured_input_signature[1]["features"].shape[-1]
    for batch in _batches(_letor_lists(path, num_features, duplicates), batch_size):
        width = max(len(docids) for _, docids, _ in batch)
        features = np.zeros((len(batch), width, num_features), np.float32)
        mask = np.zeros((len(batch), width), bool)
        for i, (_, docids, x) in enumerate(batch):
            features[i, : len(docids)] = x
            mask[i, : len(docids)] = True
        outputs = signature(features=tf.constant(features), mask=tf.constant(mask))
        for i, (qid, docids, _) in enumerate(batch):
            scores, probs = _unpack(outputs, i, len(docids))
            yield ScoredList(qid, docids, scores, probs)


def score_elwc(export: str, files: list[str], *, batch_size: int = 256) -> Iterator[ScoredList]:
    """Scores ELWC records (the converter's shards) through the proto signature."""
    from tensorflow_serving.apis import input_pb2

    signature = tf.saved_model.load(export).signatures[SIGNATURE_ELWC]
    records = (r.numpy() for r in tf.data.TFRecordDataset(files))
    for batch in _batches(records, batch_size):
        outputs = signature(examples=tf.constant(batch))
        for i, record in enumerate(batch):
            elwc = input_pb2.ExampleListWithContext.FromString(record)
            qid = elwc.context.features.feature["qid"].int64_list.value[0]
            n = len(elwc.examples)
            scores, probs = _unpack(outputs, i, n)
            yield ScoredList(int(qid), [str(j) for j in range(1, n + 1)], scores, probs)


def _gbdt_lists(booster, batch) -> Iterator[ScoredList]:
    """Scores a batch of ``(qid, docids, [n, d] features)`` with one LightGBM call."""
    from tfr_rankformer.gbdt import score_arrays
    from tfr_rankformer.list_arrays import ListArrays

    sizes = [len(docids) for _, docids, _ in batch]
    offsets = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
    features = np.concatenate([x for _, _, x in batch])
    empty = np.zeros(len(features), np.float32)
    arrays = ListArrays(features, empty, empty, np.array([q for q, _, _ in batch]), offsets)
    scores = score_arrays(booster, arrays)
    for i, (qid, docids, _) in enumerate(batch):
        yield ScoredList(qid, docids, scores[offsets[i] : offsets[i + 1]])


def score_letor_gbdt(
    booster, path: str, *, batch_size: int = 256, duplicates: str = "error"
) -> Iterator[ScoredList]:
    """Scores every list of a LETOR text file with a LightGBM booster."""
    for batch in _batches(_letor_lists(path, booster.num_feature(), duplicates), batch_size):
        yield from _gbdt_lists(booster, batch)


def score_elwc_gbdt(booster, files: list[str], *, batch_size: int = 256) -> Iterator[ScoredList]:
    """Scores ELWC records with a LightGBM booster; items are numbered in list order."""
    from tfr_rankformer import data, elwc_schema

    lists = data.parsed_lists(
        files, booster.num_feature(), list_size=None, shuffle_items=False, seed=0
    )
    for batch in _batches(lists.as_numpy_iterator(), batch_size):
        rows = []
        for element in batch:
            features = element[elwc_schema.FEATURES][element[data.MASK]]
            docids = [str(j) for j in range(1, len(features) + 1)]
            rows.append((int(element[elwc_schema.QID]), docids, features))
        yield from _gbdt_lists(booster, rows)


def write_results(lists: Iterator[ScoredList], out, *, fmt: str, tag: str) -> int:
    """Writes a TREC run (``fmt="trec"``) or CSV; returns the number of lists."""
    writer = csv.writer(out) if fmt == "csv" else None
    count = 0
    for scored in lists:
        order = np.argsort(-scored.scores, kind="stable")
        if writer is not None and count == 0:
            levels = 0 if scored.list_probs is None else len(scored.list_probs)
            header = ["qid", "docid", "rank", "score"]
            header += ["expected_list_label"] if levels else []
            writer.writerow(header + [f"p_t_ge_{k}" for k in range(1, levels + 1)])
        for rank, j in enumerate(order, start=1):
            if writer is None:
                out.write(
                    f"{scored.qid} Q0 {scored.docids[j]} {rank} {scored.scores[j]:.6f} {tag}\n"
                )
                continue
            row = [scored.qid, scored.docids[j], rank, f"{scored.scores[j]:.6f}"]
            if scored.list_probs is not None:
                row.append(f"{scored.list_probs.sum():.6f}")
                row += [f"{p:.6f}" for p in scored.list_probs]
            writer.writerow(row)
        count += 1
    return count
