"""BM25 from files: a TREC run from queries and a collection, and BM25's NDCG on a
converted text dataset."""

from __future__ import annotations

import os

from tfr_rankformer.core.atomic_files import atomic_write
from tfr_rankformer.inputs.manifest import read_manifest
from tfr_rankformer.text.bm25 import Bm25Config, Bm25Index, bm25_list_metrics, top_documents
from tfr_rankformer.text.word_tokens import tokenize
from tfrecords_tools.text.text_elwc import read_text_split
from tfrecords_tools.text.trec_files import read_collection, read_queries, read_unique


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
    """Writes a TREC run of each query's ``top_k`` BM25 documents (those sharing a term)."""
    if top_k < 1:
        raise ValueError(f"`top_k` must be a positive int, got {top_k}")
    query_list = [(qid, text) for _, qid, text in read_unique(queries, read_queries, "qid")]
    doc_ids = []

    def documents():
        for _, docid, text in read_unique(collection, read_collection, "document"):
            doc_ids.append(docid)
            yield tokenize(text)

    index = Bm25Index(documents(), config, progress=progress)
    counts = {"queries": len(query_list), "documents": len(doc_ids), "run_lines": 0}
    counts.update(queries_short_of_top_k=0, queries_without_match=0)
    from tqdm.auto import tqdm

    with atomic_write(output, "w", newline="\n") as f:
        for qid, text in tqdm(query_list, desc="queries", disable=None if progress else True):
            scores = index.scores(tokenize(text))
            top = top_documents(scores, top_k)
            counts["queries_short_of_top_k"] += len(top) < top_k
            counts["queries_without_match"] += len(top) == 0
            f.writelines(
                f"{qid} Q0 {doc_ids[j]} {rank} {scores[j]:.6f} {tag}\n"
                for rank, j in enumerate(top.tolist(), start=1)
            )
            counts["run_lines"] += len(top)
    return counts


def evaluate_bm25_splits(
    directory: str,
    splits,
    *,
    config: Bm25Config = Bm25Config(),
    ks=(1, 5, 10),
    progress: bool = False,
) -> dict[str, dict]:
    """NDCG@k x 100 of BM25 and list counts per split of a converted text dataset, over
    one index of all its documents: ``{split: metrics}``."""
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
        split: bm25_list_metrics(
            read_text_split(directory, split), index, position, split=split, ks=ks
        )
        for split in splits
    }


def _dataset_splits(directory: str) -> list[str]:
    path = os.path.join(directory, "manifest.json")
    if not os.path.isfile(path):
        raise FileNotFoundError(f"{path}: no such file (is {directory} a converted dataset?)")
    manifest = read_manifest(path, complete=False)
    if not manifest.is_text:
        raise ValueError(
            f"{path}: not a text dataset (kind {manifest.kind!r}); convert one with "
            "tfr-convert --input trec or synthetic-text"
        )
    return [name for name, entry in manifest.splits.items() if entry.num_lists]
