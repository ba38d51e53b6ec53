"""TREC-layout text ranking data (queries, collection, qrels, a run) to text ELWC.

The run decides the lists: each query's documents in the run's order (rank,
then score), cut to ``max_list_size``; the qrels give their labels (an
unjudged document is 0). The files are read in an order that keeps memory to
what the lists need: the queries, then the run (so the needed docids are
known), then the qrels, and the collection last, streamed, keeping only the
documents of some list. Text is tokenised by ``text_tokenizer.tokenize``.

Refused (a :class:`~tfrecords_tools.trec_files.TrecFormatError` naming the
file and line; nothing is written): a malformed line, a qid given twice in
the queries, a run line of a qid the queries lack, a document listed twice
for one query in the run, a (qid, docid) judged twice in the qrels, a needed
document given twice in the collection.

Counted in the manifest's ``filtered`` entry and logged (never dropped
silently): queries without run lines, queries without qrels (dropped),
queries with no tokens (dropped), qrels lines of unknown queries (ignored),
negative labels (read as 0), run documents missing from the collection
(removed from their lists), lists cut to ``max_list_size``, lists left shorter
than ``min_list_size`` (dropped), truncated queries and documents, unjudged
list items, lists without a relevant document, relevant documents the run
misses.

Everything is written under a temporary name beside the output and renamed
when complete.
"""

from __future__ import annotations

import collections
import dataclasses
import logging
import os
import zlib

from tfr_rankformer.config_io import from_dict, require_positive_ints
from tfrecords_tools.text_dataset import relative_paths, text_manifest, write_atomically
from tfrecords_tools.text_elwc import TextList, TextSplitWriter
from tfrecords_tools.text_tokenizer import tokenize, truncate_tokens
from tfrecords_tools.trec_files import (
    TrecFormatError,
    read_collection,
    read_qrels,
    read_queries,
    read_run,
)

__all__ = [
    "TrecConfig",
    "convert_trec",
    "hash_split",
    "write_text_dataset",
    "TEXT_SPLITS",
]

logger = logging.getLogger(__name__)

TEXT_SPLITS = ("train", "vali", "test")
# What was read, as opposed to what was filtered (the manifest's ``input`` entry).
_INPUT_COUNTS = ("queries", "run_lines", "qrels_lines", "documents_read")


def _files(value) -> tuple:
    if value is None:
        return ()
    return (value,) if isinstance(value, str) else tuple(value)


@dataclasses.dataclass(frozen=True)
class TrecConfig:
    """Settings of one TREC-layout conversion.

    Attributes:
      output: the output directory.
      queries: query files whose queries are split by a seeded hash of the qid
        (``split_fractions``); exclusive with the per-split files.
      train_queries: query files of the train split.
      vali_queries: query files of the vali split.
      test_queries: query files of the test split.
      collection: collection files.
      qrels: qrels files.
      run: run files (TREC or MS MARCO format).
      split_fractions: train, vali and test shares for ``queries``.
      max_list_size: each list keeps the run's first this many documents;
        ``None`` keeps all.
      min_list_size: shorter lists (after removing missing documents) are dropped.
      max_query_tokens: queries are cut to this many tokens; ``None``: no limit.
      max_document_tokens: documents are cut to this many tokens; ``None``: no limit.
      shards: TFRecord files per split.
      seed: seed of the hash split.
      overwrite: replace an existing output directory.
    """

    output: str
    queries: tuple = ()
    train_queries: tuple = ()
    vali_queries: tuple = ()
    test_queries: tuple = ()
    collection: tuple = ()
    qrels: tuple = ()
    run: tuple = ()
    split_fractions: tuple = (0.8, 0.1, 0.1)
    max_list_size: int | None = None
    min_list_size: int = 1
    max_query_tokens: int | None = None
    max_document_tokens: int | None = None
    shards: int = 1
    seed: int = 0
    overwrite: bool = False

    def __post_init__(self):
        for name in (
            "queries",
            "train_queries",
            "vali_queries",
            "test_queries",
            "collection",
            "qrels",
            "run",
        ):
            object.__setattr__(self, name, _files(getattr(self, name)))
        object.__setattr__(self, "split_fractions", tuple(self.split_fractions))
        if not self.output:
            raise ValueError("`output` must be a directory path")
        per_split = self.train_queries or self.vali_queries or self.test_queries
        if self.queries and per_split:
            raise ValueError(
                "give either `queries` (split by a hash of the qid) or per-split query files "
                "(`train_queries`, `vali_queries`, `test_queries`), not both"
            )
        if not (self.queries or per_split):
            raise ValueError("no query file given (`queries` or `train_queries`, ...)")
        for name in ("collection", "qrels", "run"):
            if not getattr(self, name):
                raise ValueError(f"no {name} file given (`{name}`)")
        fractions = self.split_fractions
        if len(fractions) != 3 or any(f < 0 for f in fractions) or abs(sum(fractions) - 1) > 1e-6:
            raise ValueError(
                f"`split_fractions` must be three non-negative shares (train, vali, test) "
                f"summing to 1, got {fractions}"
            )
        require_positive_ints(self, "shards", "min_list_size")
        require_positive_ints(
            self, "max_list_size", "max_query_tokens", "max_document_tokens", optional=True
        )

    def to_json(self) -> dict:
        return {k: list(v) if isinstance(v, tuple) else v for k, v in vars(self).items()}

    @classmethod
    def from_json(cls, values: dict) -> TrecConfig:
        return from_dict(cls, values, what="text conversion settings")


def hash_split(qid: str, *, seed: int, fractions: tuple) -> str:
    """The split of ``qid``: a seeded CRC32 of it, cut at the cumulative ``fractions``."""
    u = zlib.crc32(f"{seed}\t{qid}".encode()) / 2**32
    if u < fractions[0]:
        return "train"
    return "vali" if u < fractions[0] + fractions[1] else "test"


# === Reading ===


class _Reader:
    """Reads the files into lists, counting what it filters."""

    def __init__(self, config: TrecConfig):
        self.config = config
        self.counts = collections.Counter()
        self.queries: dict[str, tuple[list, str]] = {}  # qid -> (tokens, split)
        self.runs: dict[str, list] = {}  # qid -> [(rank, -score, order, docid)]
        self.qrels: dict[str, dict] = collections.defaultdict(dict)  # qid -> docid -> label

    def read_queries(self) -> None:
        config, seen = self.config, {}
        files = [(path, None) for path in config.queries]
        for split in TEXT_SPLITS:
            files += [(path, split) for path in getattr(config, f"{split}_queries")]
        for path, file_split in files:
            for line, qid, text in read_queries(path):
                if qid in seen:
                    raise TrecFormatError(
                        path, line, f"qid {qid!r} given twice (first at {seen[qid]})"
                    )
                seen[qid] = f"{path}: line {line}"
                tokens, cut = truncate_tokens(tokenize(text), config.max_query_tokens)
                self.counts["queries_truncated"] += cut
                split = file_split or hash_split(
                    qid, seed=config.seed, fractions=config.split_fractions
                )
                self.queries[qid] = (tokens, split)
        self.counts["queries"] = len(self.queries)

    def read_runs(self) -> None:
        order, runs = 0, self.config.run
        first: dict[tuple, tuple[int, int]] = {}  # (qid, docid) -> (file, line)
        for number, path in enumerate(runs):
            for line, qid, docid, rank, score in read_run(path):
                if qid not in self.queries:
                    raise TrecFormatError(
                        path, line, f"qid {qid!r} is not in the query files (unknown qid)"
                    )
                key = (qid, docid)
                if key in first:
                    where = f"line {first[key][1]}"
                    if first[key][0] != number:
                        where = f"{runs[first[key][0]]}: {where}"
                    raise TrecFormatError(
                        path,
                        line,
                        f"document {docid!r} listed twice for qid {qid!r} (first at {where})",
                    )
                first[key] = (number, line)
                self.runs.setdefault(qid, []).append((rank, -score, order, docid))
                order += 1
                self.counts["run_lines"] += 1

    def read_qrels(self) -> None:
        for path in self.config.qrels:
            first_line: dict[tuple, int] = {}
            for line, qid, docid, label in read_qrels(path):
                if qid not in self.queries:
                    self.counts["qrels_lines_of_unknown_queries"] += 1
                    continue
                key = (qid, docid)
                if key in first_line or docid in self.qrels[qid]:
                    where = f"line {first_line[key]}" if key in first_line else "another file"
                    raise TrecFormatError(
                        path,
                        line,
                        f"qid {qid!r}, document {docid!r} judged twice (first at {where})",
                    )
                first_line[key] = line
                if label < 0:
                    self.counts["negative_labels_read_as_0"] += 1
                    label = 0
                self.qrels[qid][docid] = label
                self.counts["qrels_lines"] += 1

    def candidate_lists(self) -> dict[str, list[str]]:
        """Each kept query's docids in run order, cut to ``max_list_size``."""
        limit, lists = self.config.max_list_size, {}
        for qid, (tokens, _) in self.queries.items():
            entries = self.runs.get(qid)
            if not entries:
                self.counts["queries_without_run"] += 1
                continue
            if not self.qrels.get(qid):
                self.counts["queries_without_qrels"] += 1
                continue
            if not tokens:
                self.counts["queries_without_tokens"] += 1
                continue
            docids = [docid for *_, docid in sorted(entries)]
            if limit is not None and len(docids) > limit:
                self.counts["lists_cut_to_max_list_size"] += 1
                self.counts["run_documents_beyond_max_list_size"] += len(docids) - limit
                docids = docids[:limit]
            kept = set(docids)
            self.counts["relevant_documents_not_in_lists"] += sum(
                1 for d, label in self.qrels[qid].items() if label > 0 and d not in kept
            )
            lists[qid] = docids
        return lists

    def read_documents(self, wanted: set, progress: bool) -> dict[str, list]:
        """The tokens of the ``wanted`` documents, streamed from the collection."""
        documents, first = {}, {}
        from tqdm.auto import tqdm

        with tqdm(
            total=len(wanted), desc="documents", unit="doc", disable=None if progress else True
        ) as bar:
            for path in self.config.collection:
                for line, docid, text in read_collection(path, wanted):
                    if docid in first:
                        raise TrecFormatError(
                            path, line, f"document {docid!r} given twice (first at {first[docid]})"
                        )
                    first[docid] = f"{path}: line {line}"
                    tokens, cut = truncate_tokens(tokenize(text), self.config.max_document_tokens)
                    self.counts["documents_truncated"] += cut
                    self.counts["documents_without_tokens"] += not tokens
                    documents[docid] = tokens
                    bar.update(1)
        return documents


# === Writing ===


def _text_lists(reader: _Reader, lists: dict, documents: dict):
    """Yields ``(split, TextList)``, counting missing documents and short lists."""
    counts = reader.counts
    for qid, docids in lists.items():
        present = [d for d in docids if d in documents]
        counts["run_documents_missing_from_collection"] += len(docids) - len(present)
        if len(present) < reader.config.min_list_size:
            counts["lists_below_min_list_size"] += 1
            continue
        judged = reader.qrels[qid]
        labels = tuple(judged.get(d, 0) for d in present)
        counts["unjudged_items"] += sum(1 for d in present if d not in judged)
        counts["lists_without_relevant"] += not any(labels)
        tokens, split = reader.queries[qid]
        yield (
            split,
            TextList(
                qid,
                tuple(tokens),
                tuple(present),
                tuple(tuple(documents[d]) for d in present),
                labels,
            ),
        )


def _log_filtered(filtered: dict) -> None:
    for name, count in filtered.items():
        if count:
            logger.debug("%s: %d", name.replace("_", " "), count)


def write_text_dataset(
    config: TrecConfig, out_dir: str, *, progress: bool = True, source: dict | None = None
) -> dict:
    """Converts the files into ``out_dir`` (which must exist); returns the manifest.

    Raises:
      TrecFormatError: a refused line (see the module docstring).
      ValueError: no list is left to write.
    """
    reader = _Reader(config)
    reader.read_queries()
    reader.read_runs()
    reader.read_qrels()
    lists = reader.candidate_lists()
    wanted = {d for docids in lists.values() for d in docids}
    documents = reader.read_documents(wanted, progress)
    reader.counts["documents_read"] = len(documents)
    reader.counts["run_docids_missing_from_collection"] = len(wanted - documents.keys())
    writers = {s: TextSplitWriter(out_dir, s, config.shards) for s in TEXT_SPLITS}
    max_label = 0
    try:
        for split, text_list in _text_lists(reader, lists, documents):
            writers[split].write(text_list)
            max_label = max(max_label, *text_list.relevance)
    finally:
        files = {s: w.close() for s, w in writers.items()}
    splits = {
        s: {"num_lists": w.num_lists, "num_items": w.num_items, "files": files[s]}
        for s, w in writers.items()
    }
    counts = dict(sorted(reader.counts.items()))
    read = {k: counts.pop(k, 0) for k in _INPUT_COUNTS}
    filtered = counts
    _log_filtered(filtered)
    if not any(s["num_lists"] for s in splits.values()):
        raise ValueError(
            "no list left to write: "
            + ", ".join(f"{k.replace('_', ' ')} {v}" for k, v in filtered.items() if v)
        )
    parameters = relative_paths(config.to_json(), os.path.abspath(out_dir))
    return text_manifest(parameters, splits, read, filtered, max_label, source, seed=config.seed)


def convert_trec(config: TrecConfig, *, progress: bool = True) -> dict:
    """Converts TREC-layout files to a text ELWC dataset in ``config.output``.

    Returns:
      The manifest (also written to ``output/manifest.json``).

    Raises:
      TrecFormatError, ValueError, FileExistsError, OSError: nothing is left in
        ``output``.
    """
    return write_atomically(
        config.output,
        overwrite=config.overwrite,
        build=lambda scratch: write_text_dataset(config, scratch, progress=progress),
    )
