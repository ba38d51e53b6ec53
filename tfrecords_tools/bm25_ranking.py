"""BM25 as a first stage (a TREC run from queries and a collection) and as a baseline.

Scoring is bm25s's (Lù, 2024, "BM25S: Orders of magnitude faster lexical
search via eager sparse scoring"), over the tokens of
``text_tokenizer.tokenize`` (lower-cased runs of letters and digits, no
stemming, no stop words), so BM25 sees the very tokens the text ELWC holds.
Defaults ``k1 = 0.9``, ``b = 0.4`` are Anserini's, which the MS MARCO and
TripClick BM25 baselines use; ``method="lucene"`` is Lucene's BM25 (its idf
``log(1 + (N - df + 0.5) / (df + 0.5))``).

* :func:`write_bm25_run` indexes a whole collection and writes each query's
  top ``k`` documents as a TREC run (the first stage a user without a run
  needs for ``tfr-convert --input trec``).
* :func:`evaluate_bm25` scores the lists of a text ELWC dataset. The index
  statistics (document frequencies, average length) come from the documents
  of the dataset's lists, over every split, each document once (by its
  ``document_id``): the collection as the lists show it. NDCG follows
  ``tfr_rankformer.ranking_metrics`` (x 100, lists whose labels are all equal
  left out, tied scores averaged).
"""

from __future__ import annotations

import array
import dataclasses
import logging
import os

import numpy as np

from tfr_rankformer.ranking_metrics import CONVENTION, evaluate_rankings
from tfrecords_tools.text_elwc import read_text_split
from tfrecords_tools.text_tokenizer import TOKENIZER_DESCRIPTION, tokenize
from tfrecords_tools.trec_files import TrecFormatError, read_collection, read_queries

__all__ = [
    "Bm25Config",
    "Bm25Index",
    "write_bm25_run",
    "evaluate_bm25",
    "evaluate_bm25_splits",
    "METHODS",
]

logger = logging.getLogger(__name__)

METHODS = ("lucene", "robertson", "atire", "bm25l", "bm25+")


@dataclasses.dataclass(frozen=True)
class Bm25Config:
    """BM25's parameters.

    Attributes:
      k1: term-frequency saturation (>= 0).
      b: document-length normalisation, in ``[0, 1]``.
      method: bm25s's variant: ``lucene`` (default), ``robertson``, ``atire``,
        ``bm25l`` or ``bm25+``.
    """

    k1: float = 0.9
    b: float = 0.4
    method: str = "lucene"

    def __post_init__(self):
        if not self.k1 >= 0:
            raise ValueError(f"`k1` must be >= 0, got {self.k1}")
        if not 0 <= self.b <= 1:
            raise ValueError(f"`b` must be in [0, 1], got {self.b}")
        if self.method not in METHODS:
            raise ValueError(f"Unknown BM25 method {self.method!r}; choose from {list(METHODS)}")


class Bm25Index:
    """A bm25s index over tokenised documents.

    Documents are held as arrays of int32 token ids (4 bytes a token), not as
    strings, so a large collection streams into it.

    Args:
      documents: each document's tokens (any iterable; consumed once).
      config: BM25's parameters.
      progress: show bm25s's progress bars.
    """

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


def write_bm25_run(
    queries: list[str],
    collection: list[str],
    output: str,
    *,
    top_k: int = 100,
    config: Bm25Config = Bm25Config(),
    tag: str = "bm25",
    progress: bool = True,
) -> dict:
    """Writes a TREC run of each query's ``top_k`` BM25 documents.

    The collection is streamed into the index (token ids, not strings; the
    docids are kept). Documents that share no term with a query are not listed
    for it, so a query may get fewer than ``top_k`` (counted). The run is
    written under a temporary name and renamed when complete.

    Args:
      queries: query files (``qid<TAB>text``).
      collection: collection files (``docid<TAB>text...``).
      output: the run file to write.
      top_k: documents per query.
      config: BM25's parameters.
      tag: the run's tag column.
      progress: show progress bars.

    Returns:
      Counts: ``queries``, ``documents``, ``run_lines``, ``queries_short_of_top_k``,
      ``queries_without_match``.

    Raises:
      TrecFormatError: a malformed line, a qid or docid given twice.
    """
    if top_k < 1:
        raise ValueError(f"`top_k` must be a positive int, got {top_k}")
    query_list = list(_read_unique(queries, read_queries, "qid"))
    index, doc_ids = _index_collection(collection, config, progress=progress)
    counts = {"queries": len(query_list), "documents": len(doc_ids), "run_lines": 0}
    counts.update(queries_short_of_top_k=0, queries_without_match=0)
    temporary = f"{output}.partial"
    from tqdm.auto import tqdm

    try:
        with open(temporary, "w", encoding="utf-8", newline="\n") as f:
            for qid, text in tqdm(query_list, desc="queries", disable=None if progress else True):
                scores = index.scores(tokenize(text))
                top = _top_documents(scores, top_k)
                counts["queries_short_of_top_k"] += len(top) < top_k
                counts["queries_without_match"] += len(top) == 0
                f.writelines(
                    f"{qid} Q0 {doc_ids[j]} {rank} {scores[j]:.6f} {tag}\n"
                    for rank, j in enumerate(top.tolist(), start=1)
                )
                counts["run_lines"] += len(top)
        os.replace(temporary, output)
    except BaseException:
        if os.path.exists(temporary):
            os.remove(temporary)
        raise
    return counts


def _index_collection(
    collection: list[str], config: Bm25Config, *, progress: bool
) -> tuple[Bm25Index, list[str]]:
    """The index of the collection files' documents, and their docids in index order."""
    doc_ids = []

    def documents():
        for docid, text in _read_unique(collection, read_collection, "document"):
            doc_ids.append(docid)
            yield tokenize(text)

    return Bm25Index(documents(), config, progress=progress), doc_ids


def _top_documents(scores: np.ndarray, top_k: int) -> np.ndarray:
    """Positions of the ``top_k`` best-scoring documents that score above 0, best first.

    Ties go to the document that comes first in the collection.

    >>> _top_documents(np.array([0.5, 2.0, 0.0, 2.0], np.float32), 3)
    array([1, 3, 0])
    """
    k = min(top_k, len(scores))
    top = np.argpartition(-scores, k - 1)[:k]
    top = top[np.lexsort((top, -scores[top]))]  # by score, then collection order
    return top[scores[top] > 0]


def _read_unique(paths: list[str], reader, what: str):
    """Yields ``(id, text)`` of the files, refusing an id given twice."""
    seen: dict[str, tuple[int, int]] = {}
    for number, path in enumerate(paths):
        for line, key, text in reader(path):
            if key in seen:
                first_file, first_line = seen[key]
                raise TrecFormatError(
                    path,
                    line,
                    f"{what} {key!r} given twice (first at {paths[first_file]}: line {first_line})",
                )
            seen[key] = (number, line)
            yield key, text


def evaluate_bm25(
    directory: str,
    *,
    split: str = "test",
    config: Bm25Config = Bm25Config(),
    ks=(1, 5, 10),
    progress: bool = False,
) -> dict:
    """NDCG@k x 100 of BM25 on one split of a text ELWC dataset.

    Args:
      directory: a dataset written by ``tfr-convert`` with a text input.
      split: the split to score.
      config: BM25's parameters.
      ks: NDCG cut-offs.
      progress: show bm25s's progress bars.

    Returns:
      ``{"ndcg@k": ..., "num_lists": ..., "num_lists_counted": ..., "index_documents":
      ..., "split": ..., "bm25": {...}, "tokenizer": ..., "convention": ...}``.
    """
    found = evaluate_bm25_splits(directory, (split,), config=config, ks=ks, progress=progress)
    return found[split]


def evaluate_bm25_splits(
    directory: str,
    splits,
    *,
    config: Bm25Config = Bm25Config(),
    ks=(1, 5, 10),
    progress: bool = False,
) -> dict[str, dict]:
    """``evaluate_bm25`` on several splits, over one index: ``{split: metrics}``."""
    available = _dataset_splits(directory)
    for split in splits:
        if split not in available:
            raise ValueError(f"{directory} has no {split!r} split; it has {sorted(available)}")
    position, documents = {}, []
    for name in available:
        for text_list in read_text_split(directory, name):
            for doc_id, tokens in zip(text_list.document_ids, text_list.document_tokens):
                if doc_id not in position:
                    position[doc_id] = len(documents)
                    documents.append(tokens)
    index = Bm25Index(documents, config, progress=progress)
    return {
        split: _split_metrics(directory, split, index, position, config, ks) for split in splits
    }


def _split_metrics(directory, split, index, position, config, ks) -> dict:
    lists = list(read_text_split(directory, split))
    if not lists:
        raise ValueError(f"the {split!r} split of {directory} holds no list")
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
        bm25=dataclasses.asdict(config),
        tokenizer=TOKENIZER_DESCRIPTION,
        convention=CONVENTION,
    )
    return out


def _dataset_splits(directory: str) -> list[str]:
    import json

    path = os.path.join(directory, "manifest.json")
    if not os.path.isfile(path):
        raise FileNotFoundError(f"{path}: no such file (is {directory} a converted dataset?)")
    with open(path, encoding="utf-8") as f:
        manifest = json.load(f)
    if manifest.get("kind") != "text":
        raise ValueError(
            f"{path}: not a text dataset (kind {manifest.get('kind')!r}); convert one with "
            "tfr-convert --input trec or synthetic-text"
        )
    return [name for name, entry in manifest["splits"].items() if entry.get("num_lists")]
