"""BM25 ranking: the index, a query's top documents, and NDCG of BM25 on lists.

Scoring is bm25s's (Lù, 2024) over the word tokens a text ELWC holds (``word_tokens``).
The defaults ``k1 = 0.9``, ``b = 0.4`` are Anserini's, which the MS MARCO and TripClick
baselines use. NDCG follows ``ranking_metrics`` (x 100, lists of equal labels left out).
"""

from __future__ import annotations

import array
import dataclasses
import logging

import numpy as np

from tfr_rankformer.core.config_io import setting
from tfr_rankformer.ranking.ranking_metrics import CONVENTION, evaluate_rankings
from tfr_rankformer.text.word_tokens import TOKENIZER_DESCRIPTION

__all__ = ["Bm25Config", "Bm25Index", "METHODS", "top_documents", "bm25_list_metrics"]

METHODS = ("lucene", "robertson", "atire", "bm25l", "bm25+")


@dataclasses.dataclass(frozen=True)
class Bm25Config:
    """BM25's parameters (bm25s's)."""

    k1: float = setting(0.9, "k1, term-frequency saturation (>= 0). Default: 0.9 (Anserini's)")
    b: float = setting(0.4, "b, document-length normalisation in [0, 1]. Default: 0.4 (Anserini's)")
    method: str = setting("lucene", "BM25 variant", choices=METHODS)

    def __post_init__(self):
        if not self.k1 >= 0:
            raise ValueError(f"`k1` must be >= 0, got {self.k1}")
        if not 0 <= self.b <= 1:
            raise ValueError(f"`b` must be in [0, 1], got {self.b}")
        if self.method not in METHODS:
            raise ValueError(f"Unknown BM25 method {self.method!r}; choose from {list(METHODS)}")


class Bm25Index:
    """A bm25s index over tokenised documents, held as int32 token ids so that a large
    collection streams into it."""

    def __init__(self, documents, config: Bm25Config = Bm25Config(), *, progress=False):
        import bm25s

        # bm25s logs every index build at DEBUG through its own handler.
        logging.getLogger("bm25s").setLevel(logging.WARNING)
        vocab: dict[str, int] = {}
        ids = [array.array("i", [vocab.setdefault(t, len(vocab)) for t in d]) for d in documents]
        if not ids:
            raise ValueError("BM25 needs at least one document to index")
        if not vocab:
            raise ValueError("BM25 needs at least one token in the documents")
        self.config = config
        self.num_docs = len(ids)
        self._vocab = vocab
        self._bm25 = bm25s.BM25(k1=config.k1, b=config.b, method=config.method)
        self._bm25.index((ids, vocab), show_progress=progress)

    def scores(self, query_tokens) -> np.ndarray:
        """``[num_docs]`` float32 BM25 scores of every document for one query."""
        ids = [self._vocab[t] for t in query_tokens if t in self._vocab]
        if not ids:  # no query term occurs in the collection
            return np.zeros(self.num_docs, dtype=np.float32)
        return np.asarray(self._bm25.get_scores_from_ids(ids), dtype=np.float32)


def top_documents(scores: np.ndarray, top_k: int) -> np.ndarray:
    """Positions of the ``top_k`` best-scoring documents that score above 0, best first;
    ties go to the document first in the collection.

    >>> top_documents(np.array([0.5, 2.0, 0.0, 2.0], np.float32), 3)
    array([1, 3, 0])
    """
    k = min(top_k, len(scores))
    top = np.argpartition(-scores, k - 1)[:k]
    top = top[np.lexsort((top, -scores[top]))]  # by score, then collection order
    return top[scores[top] > 0]


def bm25_list_metrics(
    lists, index: Bm25Index, position: dict, *, split: str, ks=(1, 5, 10)
) -> dict:
    """NDCG@k x 100 of BM25's ranking of each list's documents (lists with
    ``query_tokens``, ``document_ids`` and ``relevance``; ``position``: document id -> its row
    in ``index``).
    """
    lists = list(lists)
    if not lists:
        raise ValueError(f"the {split!r} split holds no list")
    size = max(len(t.document_ids) for t in lists)
    scores = np.zeros((len(lists), size))
    labels = np.zeros((len(lists), size))
    mask = np.zeros((len(lists), size), dtype=bool)
    for row, text_list in enumerate(lists):
        n = len(text_list.document_ids)
        all_scores = index.scores(text_list.query_tokens)
        scores[row, :n] = all_scores[[position[d] for d in text_list.document_ids]]
        labels[row, :n] = text_list.relevance
        mask[row, :n] = True
    metrics = evaluate_rankings(scores, labels, labels, mask, ks=ks)
    out = {f"ndcg@{k}": metrics[f"ndcg_r@{k}"] for k in ks}
    out.update(
        num_lists=metrics["num_lists"],
        num_lists_counted=metrics["num_lists_r"],
        index_documents=len(position),
        split=split,
        bm25=dataclasses.asdict(index.config),
        tokenizer=TOKENIZER_DESCRIPTION,
        convention=CONVENTION,
    )
    return out
