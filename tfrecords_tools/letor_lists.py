"""A LETOR text file as lists of raw features, for scoring (``tfr-predict``).

Lines go through the converter's validating parser (raw features; the model
normalises them) and are grouped into lists by contiguous qid. A document's id
is the ``docid`` of its line's comment (``#docid = GX...``), else its line
number. The lists feed ``tfr_rankformer.prediction.score_lists`` (or
``score_lists_gbdt``), which take lists from any source.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

import numpy as np

from tfrecords_tools.letor_parser import parse_letor_lines
from tfrecords_tools.letor_reader import group_bounds, read_letor_file

__all__ = ["read_letor_lists"]

_DOCID = re.compile(rb"docid\s*=\s*(\S+)")


def read_letor_lists(
    path: str, num_features: int, *, duplicates: str = "error"
) -> Iterator[tuple[int, list[str], np.ndarray]]:
    """``(qid, docids, [n, num_features] raw features)`` per contiguous qid of a LETOR file.

    The file may be plain or gzip. Features may come in any order; a repeated
    index follows ``duplicates`` (``letor_parser.DUPLICATE_POLICIES``).

    Raises:
      LetorFormatError: naming the file and line of the first line that does
        not parse (the whole file is checked before the first list is given),
        or truncated gzip data.
    """
    lines = read_letor_file(path).split(b"\n")
    parsed = parse_letor_lines(
        lines, num_features=num_features, path=path, first_line=1, duplicates=duplicates
    )
    docids = []
    for number in parsed.line_numbers:
        found = _DOCID.search(lines[number - 1].partition(b"#")[2])
        docids.append(found.group(1).decode("utf-8", "replace") if found else str(number))
    for begin, end in group_bounds(parsed.qids):
        yield int(parsed.qids[begin]), docids[begin:end], parsed.features[begin:end]
