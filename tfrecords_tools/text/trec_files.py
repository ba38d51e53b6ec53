"""Streaming readers of TREC-layout files (queries, collection, qrels, TREC or MS MARCO
runs; gzip accepted); a :class:`TrecFormatError` names the file and line."""

from __future__ import annotations

import os
from collections.abc import Iterator

from tfrecords_tools.compressed_files import open_maybe_gzip


class TrecFormatError(ValueError):
    """A line of a TREC-layout file that cannot be used; names the file and the line."""

    def __init__(self, path: str, line: int, message: str):
        self.path, self.line, self.message = str(path), line, message
        super().__init__(f"{self.path}: line {line}: {message}")

    def __reduce__(self):
        return (type(self), (self.path, self.line, self.message))


def _lines(path: str) -> Iterator[tuple[int, bytes]]:
    """Yields ``(line number, raw line without its end)``, skipping blank lines."""
    if not os.path.isfile(path):
        raise FileNotFoundError(f"{path}: no such file")
    with open_maybe_gzip(path) as f:
        for number, raw in enumerate(f, start=1):
            raw = raw.rstrip(b"\r\n")
            if raw.strip():
                yield number, raw


def _decode(path: str, number: int, raw: bytes) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise TrecFormatError(
            path,
            number,
            f"not UTF-8 text: {_word_at(raw, e.start)!r} ({e.reason}); re-encode the file as UTF-8",
        ) from None


def _word_at(raw: bytes, at: int, limit: int = 40) -> bytes:
    """The first ``limit`` bytes of the word of ``raw`` holding byte ``at``."""
    start = max(raw.rfind(b" ", 0, at), raw.rfind(b"\t", 0, at)) + 1
    ends = [i for i in (raw.find(b" ", at), raw.find(b"\t", at)) if i >= 0]
    return raw[start : min(ends, default=len(raw))][:limit]


def _split_id(path: str, number: int, raw: bytes, what: str) -> tuple[bytes, bytes]:
    key, tab, rest = raw.partition(b"\t")
    if not tab:
        raise TrecFormatError(
            path, number, f"expected '{what}<TAB>text', found no tab in {_preview(raw)}"
        )
    if not key.strip():
        raise TrecFormatError(path, number, f"empty {what}")
    return key.strip(), rest


def _preview(raw: bytes) -> str:
    text = raw[:60].decode("utf-8", errors="replace")
    return repr(text + ("..." if len(raw) > 60 else ""))


def read_queries(path: str) -> Iterator[tuple[int, str, str]]:
    """Yields ``(line, qid, text)`` of a ``qid<TAB>text`` file."""
    for number, raw in _lines(path):
        qid, text = _split_id(path, number, raw, "qid")
        yield number, _decode(path, number, qid), _decode(path, number, text)


def read_collection(path: str, wanted: set | None = None) -> Iterator[tuple[int, str, str]]:
    """Yields ``(line, docid, text)`` of a collection, only for ``wanted`` docids if
    given; the text of others is not decoded, so a large collection streams past them."""
    wanted_bytes = None if wanted is None else {d.encode("utf-8") for d in wanted}
    for number, raw in _lines(path):
        docid, rest = _split_id(path, number, raw, "docid")
        if not docid.isascii():
            _decode(path, number, docid)  # an id that is not UTF-8 matches no run or qrels
        if wanted_bytes is not None and docid not in wanted_bytes:
            continue
        text = _decode(path, number, rest).replace("\t", " ")
        yield number, _decode(path, number, docid), text


def read_qrels(path: str) -> Iterator[tuple[int, str, str, int]]:
    """Yields ``(line, qid, docid, relevance)`` of a TREC qrels file."""
    for number, raw in _lines(path):
        fields = _decode(path, number, raw).split()
        if len(fields) != 4:
            raise TrecFormatError(
                path,
                number,
                f"expected 4 columns 'qid iteration docid relevance', found {len(fields)} "
                f"in {_preview(raw)}",
            )
        try:
            relevance = int(fields[3])
        except ValueError:
            raise TrecFormatError(
                path, number, f"relevance {fields[3]!r} is not an integer"
            ) from None
        yield number, fields[0], fields[2], relevance


def read_run(path: str) -> Iterator[tuple[int, str, str, int, float, bool]]:
    """Yields ``(line, qid, docid, rank, score, score given)`` of a TREC or MS MARCO run;
    MS MARCO's three columns give no score, which is then ``-rank``."""
    for number, raw in _lines(path):
        fields = _decode(path, number, raw).split()
        if len(fields) == 6:
            qid, _, docid, rank, score = fields[:5]
        elif len(fields) == 3:
            qid, docid, rank = fields
            score = None
        else:
            raise TrecFormatError(
                path,
                number,
                f"expected a TREC run line 'qid Q0 docid rank score tag' (6 columns) or an "
                f"MS MARCO run line 'qid docid rank' (3 columns), found {len(fields)} columns "
                f"in {_preview(raw)}",
            )
        try:
            rank_value = int(rank)
        except ValueError:
            raise TrecFormatError(path, number, f"rank {rank!r} is not an integer") from None
        try:
            score_value = -float(rank_value) if score is None else float(score)
        except ValueError:
            raise TrecFormatError(path, number, f"score {score!r} is not a number") from None
        if score_value != score_value:
            raise TrecFormatError(path, number, "score is NaN")
        yield number, qid, docid, rank_value, score_value, score is not None


def read_qid_list(path: str) -> Iterator[tuple[int, str, str]]:
    """Yields ``(line, qid, "")``: the first column of each line (a queries TSV serves too)."""
    for number, raw in _lines(path):
        yield number, _decode(path, number, raw).split()[0], ""


def read_unique(paths, reader, what: str, given="given") -> Iterator[tuple[str, str, str]]:
    """Yields ``(path, id, text)`` of ``reader`` over ``paths``, refusing an id given twice."""
    seen: dict[str, str] = {}
    for path in paths:
        for line, key, text in reader(path):
            if key in seen:
                message = f"{what} {key!r} {given} twice (first at {seen[key]})"
                raise TrecFormatError(path, line, message)
            seen[key] = f"{path}: line {line}"
            yield path, key, text
