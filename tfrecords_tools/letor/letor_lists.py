"""A LETOR file as lists of raw features, for scoring (``tfr-predict``).

Lines go through the converter's validating parser (raw features; the model
normalises them) and are grouped into lists by contiguous qid. A document's id
is the ``docid`` of its line's comment (``#docid = GX...``), else its line
number; a docid that is not UTF-8 is an error naming the file, line and bytes.
The lists feed ``tfr_rankformer.serving.prediction.score_lists`` (or
``score_lists_gbdt``), which take lists from any source.

A line that omits a feature index reads 0 there, as ``tfr-convert`` reads it;
:class:`LetorLists` counts such lines, and :func:`check_complete_lines` refuses
a line whose features stop before the model's last one (``tfr-predict`` does
so when the model's training data gave every feature on every line).
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterator

import numpy as np

from tfrecords_tools.letor.letor_parser import LetorFormatError, parse_letor_lines
from tfrecords_tools.letor.letor_reader import group_bounds, read_letor_file

__all__ = ["LetorLists", "check_complete_lines", "load_letor_lists", "read_letor_lists"]

_DOCID = re.compile(rb"docid\s*=\s*(\S+)")


@dataclasses.dataclass(frozen=True)
class LetorLists:
    """A LETOR file parsed whole into query lists.

    Attributes:
      path: the file.
      num_features: the feature count ``d`` the lines were read into.
      lists: ``(qid, docids, [n, d] raw features)`` per contiguous qid.
      filled_items: items whose lines omitted some feature index of ``1..d``
        (read as 0).
      line_numbers: ``[items]`` int64 1-based line number of each item.
      last_features: ``[items]`` int64 highest feature index each line gave.
    """

    path: str
    num_features: int
    lists: list[tuple[int, list[str], np.ndarray]]
    filled_items: int
    line_numbers: np.ndarray
    last_features: np.ndarray


def load_letor_lists(path: str, num_features: int, *, duplicates: str = "error") -> LetorLists:
    """Reads a LETOR file (plain or gzip) into its query lists.

    Features may come in any order; a repeated index follows ``duplicates``
    (``letor_parser.DUPLICATE_POLICIES``).

    Raises:
      LetorFormatError: naming the file and line of the first line that does
        not parse, or truncated gzip data.
    """
    lines = read_letor_file(path).split(b"\n")
    parsed = parse_letor_lines(
        lines, num_features=num_features, path=path, first_line=1, duplicates=duplicates
    )
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
    """The ``docid`` of the line's comment, else its line number.

    Raises:
      LetorFormatError: the docid is not UTF-8. It is refused rather than
        decoded with replacement characters, which could make two ids one and
        stop them matching the qrels, which compare ids byte for byte.
    """
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
    """Refuses the first line whose highest feature index is below ``d``.

    Args:
      letor: the parsed file.
      why: why every line must reach ``d``, for the message.

    Raises:
      LetorFormatError: naming the file, the line, its highest index and ``d``.

    >>> letor = LetorLists("q.txt", 3, [], 1, np.array([1, 2]), np.array([3, 2]))
    >>> try:
    ...     check_complete_lines(letor, why="dense training data")
    ... except LetorFormatError as error:
    ...     print(error)
    q.txt:2: the line's features stop at 2, the model takes 3 (dense training data)
    """
    short = np.flatnonzero(letor.last_features < letor.num_features)
    if short.size:
        i = int(short[0])
        raise LetorFormatError(
            letor.path,
            int(letor.line_numbers[i]),
            f"the line's features stop at {int(letor.last_features[i])}, the model takes "
            f"{letor.num_features} ({why})",
        )


def read_letor_lists(
    path: str, num_features: int, *, duplicates: str = "error"
) -> Iterator[tuple[int, list[str], np.ndarray]]:
    """``(qid, docids, [n, num_features] raw features)`` per contiguous qid of a LETOR file.

    The whole file is checked (see :func:`load_letor_lists`) before the first
    list is given; omitted features read 0.
    """
    yield from load_letor_lists(path, num_features, duplicates=duplicates).lists
