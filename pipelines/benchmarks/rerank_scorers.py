"""Scorers of re-ranking benchmarks: each ranks a split's text lists.

A :data:`Scorer` takes the lists (``text_elwc.TextList``) and returns one
float array per list, a score per document; ``cranfield_rerank.fold_row``
turns each into a column of NDCG figures. Here: the first stage's own scores
(a TREC run's, :func:`bm25_scorer`) and the zero-shot cosine of sentence
embeddings (:class:`CosineScorer`). A trained model's scorer is one more.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from tfrecords_tools.text.text_elwc import TextList

__all__ = ["Scorer", "read_run_scores", "bm25_scorer", "CosineScorer", "ModelScorer"]

# A ranking of a split's lists: one float array of scores per list, a score per document.
Scorer = Callable[[Sequence[TextList]], list]


def read_run_scores(path: str) -> dict[tuple[str, str], float]:
    """``(qid, docid) -> score`` of a TREC run ``qid Q0 docid rank score tag``."""
    scores = {}
    with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, start=1):
            columns = line.split()
            if len(columns) != 6:
                raise ValueError(f"{path}: line {number}: expected 6 columns, got {len(columns)}")
            scores[columns[0], columns[2]] = float(columns[4])
    return scores


def bm25_scorer(run_scores: dict[tuple[str, str], float]) -> Scorer:
    """The run's own scores of each list's documents."""

    def score(lists: Sequence[TextList]) -> list:
        return [np.array([run_scores[t.query_id, d] for d in t.document_ids]) for t in lists]

    return score


class CosineScorer:
    """The zero-shot cosine of each list's query and documents under a ``SentenceEncoder``;
    every text is encoded once, however many lists and folds hold it.

    Args:
      encoder: a ``sentence_encoding.SentenceEncoder``.
      max_query_tokens: WordPiece tokens kept of a query.
      max_document_tokens: WordPiece tokens kept of a document.
      batch_size: texts per call of the tower.
    """

    def __init__(self, encoder, *, max_query_tokens: int, max_document_tokens: int, batch_size):
        self.encoder = encoder
        self.caps = {"query": max_query_tokens, "document": max_document_tokens}
        self.batch_size = batch_size
        self.cache: dict[str, dict[str, np.ndarray]] = {"query": {}, "document": {}}

    def _embeddings(self, kind: str, texts: list[str]) -> np.ndarray:
        cache = self.cache[kind]
        missing = sorted({t for t in texts if t not in cache})
        if missing:
            vectors = self.encoder.encode(
                missing, max_tokens=self.caps[kind], batch_size=self.batch_size, progress=True
            )
            cache.update(zip(missing, vectors))
        return np.stack([cache[t] for t in texts]) if texts else np.zeros([0, 0], np.float32)

    def __call__(self, lists: Sequence[TextList]) -> list:
        queries = self._embeddings("query", [" ".join(t.query_tokens) for t in lists])
        documents = self._embeddings(
            "document", [" ".join(tokens) for t in lists for tokens in t.document_tokens]
        )
        scores, start = [], 0
        for query, t in zip(queries, lists):
            end = start + len(t.document_ids)
            scores.append(documents[start:end] @ query)  # [n, D] @ [D] -> [n]
            start = end
        return scores


class ModelScorer:
    """A text model's scores of each list (the Listformer's, in this process).

    Args:
      model: the Keras text model (``text_family``'s build, or ``load_text_run``'s).
      tokenizer: its ``TextTokenizer``.
    """

    def __init__(self, model, tokenizer):
        self.model = model
        self.tokenizer = tokenizer

    def __call__(self, lists: Sequence[TextList]) -> list:
        import tensorflow as tf

        from tfr_rankformer.text import text_data
        from tfr_rankformer.text.text_runs import takes_first_stage, text_model_inputs

        first_stage = takes_first_stage(self.model)
        scores = []
        for t in lists:  # one list a call: a whole list of 100 is 12,800 tokens
            batch = {
                text_data.QUERY: tf.constant([" ".join(t.query_tokens)]),
                text_data.DOCUMENTS: tf.constant([[" ".join(d) for d in t.document_tokens]]),
                text_data.MASK: tf.ones([1, len(t.document_ids)], tf.bool),
            }
            if first_stage:
                batch[text_data.FIRST_STAGE] = tf.constant([t.first_stage_scores], tf.float32)
            inputs = text_model_inputs(self.tokenizer, batch, first_stage=first_stage)
            scores.append(self.model(inputs, training=False)["scores"].numpy()[0])
        return scores
