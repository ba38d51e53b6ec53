"""A LETOR file as lists of raw features for ``tfr-predict``; a document's id is its
comment's ``docid``, else its line number."""

from __future__ import annotations

import dataclasses
import re

import numpy as np

from tfrecords_tools.letor.letor_parser import LetorFormatError, parse_letor_lines
from tfrecords_tools.letor.letor_reader import LetorFile, group_bounds

_DOCID = re.compile(rb"docid\s*=\s*(\S+)")


@dataclasses.dataclass(frozen=True)
class LetorLists:
    """A LETOR file parsed whole: ``(qid, docids, [n, d] features)`` per list."""

    path: str
    num_features: int
    lists: list[tuple[int, list[str], np.ndarray]]
    filled_items: int
    line_numbers: np.ndarray
    last_features: np.ndarray


def load_letor_lists(path: str, num_features: int, *, duplicates: str = "error") -> LetorLists:
    """Reads a LETOR file (plain or gzip) into its lists; ``LetorFormatError`` at a bad line."""
    lines = b"".join(block.data for block in LetorFile(path).blocks()).split(b"\n")
    parsed = parse_letor_lines(
        lines, num_features=num_features, path=path, first_line=1, duplicates=duplicates
    )
    if not len(parsed.qids):
        raise LetorFormatError(path, None, "file is empty: it holds no LETOR lines")
    docids = [_docid(path, int(n), lines[n - 1]) for n in parsed.line_numbers]
    lists = [
        (int(parsed.qids[begin]), docids[begin:end], parsed.features[begin:end])
        for begin, end in group_bounds(parsed.qids)
    ]
    return LetorLists(
        path=path,
        num_features=num_features,
        lists=lists,
        filled_items=parsed.sparse_lines,
        line_numbers=parsed.line_numbers,
        last_features=parsed.last_features,
    )


def _docid(path: str, number: int, line: bytes) -> str:
    """The ``docid`` of the line's comment, else its line number. One that is not UTF-8
    is refused: decoded with replacement characters it could no longer match the qrels."""
    found = _DOCID.search(line.partition(b"#")[2])
    if not found:
        return str(number)
    try:
        return found.group(1).decode("utf-8")
    except UnicodeDecodeError as e:
        raise LetorFormatError(
            path,
            number,
            f"docid {found.group(1)!r} is not UTF-8 ({e.reason}); re-encode the file as UTF-8",
        ) from None


def check_complete_lines(letor: LetorLists, *, why: str) -> None:
    """Refuses the first line whose highest feature index is below ``d``."""
    short = np.flatnonzero(letor.last_features < letor.num_features)
    if short.size:
        i = int(short[0])
        raise LetorFormatError(
            letor.path,
            int(letor.line_numbers[i]),
            f"the line's features stop at {int(letor.last_features[i])}, the model takes "
            f"{letor.num_features} ({why})",
        )
