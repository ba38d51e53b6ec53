"""TREC-layout text data to text ELWC: the run decides the lists, the qrels their labels
(unjudged: 0); refused lines name file and line, filtered ones are counted."""

from __future__ import annotations

import collections
import functools
import logging
import os

from tfr_rankformer.core.elwc_schema import SPLITS
from tfr_rankformer.inputs.manifest import Manifest
from tfr_rankformer.text.word_tokens import tokenize, truncate_tokens
from tfrecords_tools.converted_fold import relative_paths
from tfrecords_tools.text.text_dataset import (
    first_stage_score_source,
    text_manifest,
    write_atomically,
)
from tfrecords_tools.text.text_elwc import (
    FIRST_STAGE_FEATURE,
    TextList,
    TextSplitWriter,
    to_float32,
)
from tfrecords_tools.text.trec_config import TrecConfig, hash_split
from tfrecords_tools.text.trec_files import (
    TrecFormatError,
    read_collection,
    read_qid_list,
    read_qrels,
    read_queries,
    read_run,
    read_unique,
)

logger = logging.getLogger(__name__)

# What was read, as opposed to what was filtered (the manifest's ``input`` entry).
_INPUT_COUNTS = ("queries", "run_lines", "qrels_lines", "documents_read")


def _check_float32(score: float, path: str, line: int) -> None:
    try:
        to_float32(score)
    except ValueError as e:
        raise TrecFormatError(
            path, line, f"score {e} (it is written as the float32 {FIRST_STAGE_FEATURE!r})"
        ) from None


class _Reader:
    """Reads the files into lists, counting what it filters; with ``first_stage`` each
    run score must fit the float32 ``first_stage_score``."""

    def __init__(self, config: TrecConfig, *, first_stage: bool = True):
        self.config, self.first_stage = config, first_stage
        self.counts = collections.Counter()
        # Written items whose run line gave its score (True) or not (False: -rank).
        self.score_given: collections.Counter = collections.Counter()
        self.queries: dict[str, tuple[list, str]] = {}  # qid -> (tokens, split)
        # qid -> [(rank, -score, order, docid, score given)]
        self.runs: dict[str, list] = {}
        self.qrels: dict[str, dict] = collections.defaultdict(dict)  # qid -> docid -> label
        self.excluded: set[str] = set()  # queries in no qid list

    def _split_lists(self) -> dict[str, str] | None:
        """qid -> split from the qid list files; ``None`` without them."""
        files = {path: split for split in SPLITS for path in getattr(self.config, f"{split}_qids")}
        read = read_unique(files, read_qid_list, "qid", "listed")
        return {qid: files[path] for path, qid, _ in read} or None

    def read_queries(self) -> None:
        config = self.config
        split_lists = self._split_lists()
        files = {path: None for path in config.queries}
        for split in SPLITS:
            files.update((path, split) for path in getattr(config, f"{split}_queries"))
        for path, qid, text in read_unique(files, read_queries, "qid"):
            tokens, cut = truncate_tokens(tokenize(text), config.max_query_tokens)
            self.counts["queries_truncated"] += cut
            if files[path]:
                split = files[path]
            elif split_lists is not None:
                split = split_lists.get(qid)
            else:
                split = hash_split(qid, seed=config.seed, fractions=config.split_fractions)
            if split is None:
                self.excluded.add(qid)
                continue
            self.queries[qid] = (tokens, split)
        self.counts["queries"] = len(self.queries) + len(self.excluded)
        self.counts["queries_in_no_split_list"] = len(self.excluded)
        if split_lists is not None:
            unknown = split_lists.keys() - self.queries.keys() - self.excluded
            self.counts["split_list_qids_without_query"] = len(unknown)

    def read_runs(self) -> None:
        order, runs = 0, self.config.run
        first: dict[tuple, tuple[int, int]] = {}  # (qid, docid) -> (file, line)
        for number, path in enumerate(runs):
            for line, qid, docid, rank, score, given in read_run(path):
                if qid in self.excluded:
                    self.counts["run_lines_of_queries_in_no_split_list"] += 1
                    continue
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
                if self.first_stage:
                    _check_float32(score, path, line)
                self.runs.setdefault(qid, []).append((rank, -score, order, docid, given))
                order += 1
                self.counts["run_lines"] += 1

    def read_qrels(self) -> None:
        for path in self.config.qrels:
            first_line: dict[tuple, int] = {}
            for line, qid, docid, label in read_qrels(path):
                if qid in self.excluded:
                    self.counts["qrels_lines_of_queries_in_no_split_list"] += 1
                    continue
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

    def candidate_lists(self) -> dict[str, list[tuple]]:
        """Each kept query's ``(docid, score, given)`` in run order, cut to ``max_list_size``."""
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
            ranked = [(d, -neg, given) for _, neg, _, d, given in sorted(entries)]
            if limit is not None and len(ranked) > limit:
                self.counts["lists_cut_to_max_list_size"] += 1
                self.counts["run_documents_beyond_max_list_size"] += len(ranked) - limit
                ranked = ranked[:limit]
            kept = {d for d, *_ in ranked}
            self.counts["relevant_documents_not_in_lists"] += sum(
                1 for d, label in self.qrels[qid].items() if label > 0 and d not in kept
            )
            lists[qid] = ranked
        return lists

    def read_documents(self, wanted: set, progress: bool) -> dict[str, list]:
        """The tokens of the ``wanted`` documents, streamed from the collection."""
        from tqdm.auto import tqdm

        documents = {}
        bar = tqdm(
            total=len(wanted), desc="documents", unit="doc", disable=None if progress else True
        )
        with bar:
            read = functools.partial(read_collection, wanted=wanted)
            for _, docid, text in read_unique(self.config.collection, read, "document"):
                tokens, cut = truncate_tokens(tokenize(text), self.config.max_document_tokens)
                self.counts["documents_truncated"] += cut
                self.counts["documents_without_tokens"] += not tokens
                documents[docid] = tokens
                bar.update(1)
        return documents


def _text_lists(reader: _Reader, lists: dict, documents: dict):
    """Yields ``(split, TextList)``, counting missing documents and short lists."""
    counts = reader.counts
    for qid, ranked in lists.items():
        entries = [entry for entry in ranked if entry[0] in documents]
        present = [d for d, *_ in entries]
        counts["run_documents_missing_from_collection"] += len(ranked) - len(present)
        if len(present) < reader.config.min_list_size:
            counts["lists_below_min_list_size"] += 1
            continue
        judged = reader.qrels[qid]
        labels = tuple(judged.get(d, 0) for d in present)
        counts["unjudged_items"] += sum(1 for d in present if d not in judged)
        counts["lists_without_relevant"] += not any(labels)
        scores = None
        if reader.first_stage:
            scores = tuple(score for _, score, _ in entries)
            reader.score_given.update(given for *_, given in entries)
        tokens, split = reader.queries[qid]
        texts = tuple(tuple(documents[d]) for d in present)
        yield split, TextList(qid, tuple(tokens), tuple(present), texts, labels, scores)


def _write_splits(reader: _Reader, lists: dict, documents: dict, out_dir: str):
    """Writes the lists; returns the manifest's ``splits`` and the highest label."""
    writers = {s: TextSplitWriter(out_dir, s, reader.config.shards) for s in SPLITS}
    max_label = 0
    try:
        for split, text_list in _text_lists(reader, lists, documents):
            writers[split].write(text_list)
            max_label = max(max_label, *text_list.relevance)
    finally:
        splits = {s: w.close() for s, w in writers.items()}
    return splits, max_label


def write_text_dataset(
    config: TrecConfig,
    out_dir: str,
    *,
    progress: bool = True,
    source: dict | None = None,
    first_stage: bool = True,
) -> Manifest:
    """Converts the files into the existing ``out_dir``; returns the manifest. Without
    ``first_stage`` (a run in random order) the lists carry no ``first_stage_score``."""
    reader = _Reader(config, first_stage=first_stage)
    reader.read_queries()
    reader.read_runs()
    reader.read_qrels()
    lists = reader.candidate_lists()
    wanted = {d for ranked in lists.values() for d, *_ in ranked}
    documents = reader.read_documents(wanted, progress)
    reader.counts["documents_read"] = len(documents)
    reader.counts["run_docids_missing_from_collection"] = len(wanted - documents.keys())
    splits, max_label = _write_splits(reader, lists, documents, out_dir)
    filtered = dict(sorted(reader.counts.items()))
    read = {k: filtered.pop(k, 0) for k in _INPUT_COUNTS}
    shown = {k.replace("_", " "): v for k, v in filtered.items() if v}
    for name, count in shown.items():
        logger.debug("%s: %d", name, count)
    if not any(s["num_lists"] for s in splits.values()):
        raise ValueError(
            "no list left to write: " + ", ".join(f"{k} {v}" for k, v in shown.items())
        )
    given = reader.score_given
    scored = first_stage_score_source(scored=given[True], unscored=given[False])
    parameters = relative_paths(config.to_json(), os.path.abspath(out_dir))
    return text_manifest(
        parameters,
        splits,
        read,
        filtered,
        max_label,
        source,
        seed=config.seed,
        first_stage_source=scored if first_stage else None,
    )


def convert_trec(config: TrecConfig, *, progress: bool = True) -> Manifest:
    """Converts TREC-layout files into ``config.output``, which an error leaves as it was."""
    return write_atomically(
        config.output,
        overwrite=config.overwrite,
        build=lambda scratch: write_text_dataset(config, scratch, progress=progress),
    )
