"""Scoring text lists through a Listformer export (raw strings or token ids)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator

import numpy as np

from tfr_rankformer.core.elwc_schema import FIRST_STAGE_INPUT
from tfr_rankformer.serving.export import SIGNATURE_ELWC
from tfr_rankformer.serving.prediction import ScoredList, batched, opened_export, unpacked

__all__ = ["text_signature", "text_inputs", "score_text_lists"]


def text_signature(export):
    """The default signature of a Listformer export (its directory or the loaded SavedModel)."""
    return opened_export(export).signatures[SIGNATURE_ELWC]


def text_inputs(queries: list[str], documents: list[list[str]]) -> dict:
    """A raw-string export's inputs: ``query [B]`` and ``documents [B, L]``, shorter lists
    padded with empty strings."""
    width = max(map(len, documents))
    padded = [[*texts, *[""] * (width - len(texts))] for texts in documents]
    return {"query": np.array(queries, dtype=object), "documents": np.array(padded, object)}


def score_text_lists(
    signature,
    lists: Iterable[tuple],
    *,
    batch_size: int = 16,
    inputs: Callable[[list[str], list[list[str]]], dict] = text_inputs,
) -> Iterator[ScoredList]:
    """Scores ``(qid, docids, query text, document texts[, first-stage scores])`` lists
    through a Listformer export's ``signature``; ``inputs`` makes a batch's inputs (``text_inputs``,
    or a token-id export's ids). An empty document cannot be told from padding: it gets the
    padding score, is ranked last and is counted in ``ScoredList.num_invalid``.
    """
    first_stage = FIRST_STAGE_INPUT in signature.structured_input_signature[1]
    for batch in batched(lists, batch_size):
        queries = [item[2] for item in batch]
        given = inputs(queries, [list(item[3]) for item in batch])
        if first_stage:
            given[FIRST_STAGE_INPUT] = _first_stage_scores(batch)
        outputs = signature(**given)
        for i, (qid, docids, _, texts, *_) in enumerate(batch):
            empty = sum(1 for text in texts if not text)
            yield ScoredList(qid, docids, *unpacked(outputs, i, len(docids)), num_invalid=empty)


def _first_stage_scores(batch: list) -> np.ndarray:
    """``[B, L]`` float32 first-stage scores of a batch's lists, 0 after their documents."""
    width = max(len(item[1]) for item in batch)
    scores = np.zeros([len(batch), width], np.float32)
    for i, item in enumerate(batch):
        if len(item) < 5 or item[4] is None:
            raise ValueError(
                f"query {item[0]}: the model takes the first stage's scores, and the list "
                "has none (convert the lists from a run: tfr-convert --input trec --run)"
            )
        scores[i, : len(item[4])] = item[4]
    return scores
