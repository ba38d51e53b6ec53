"""The feature count of LETOR files that do not state it: the highest index of any line,
refused when the widest line reaches over 4 x (or 100 past) the rest's widest 1 %."""

from __future__ import annotations

import collections
import dataclasses
import logging
import math
import os
from collections.abc import Iterable, Iterator

from tfrecords_tools.compressed_files import GZIP_READ_ERRORS, open_maybe_gzip
from tfrecords_tools.letor.letor_parser import LetorFormatError

logger = logging.getLogger(__name__)

# The rule of the module docstring.
WIDTH_RATIO = 4
WIDTH_FLOOR = 100
SET_ASIDE_SHARE = 0.01


@dataclasses.dataclass
class FeatureScan:
    """What the quick pass found in one file: the largest label, the count of lines per
    highest feature index, and the first line reaching the largest index (0: none)."""

    path: str
    max_label: int = 0
    widths: collections.Counter = dataclasses.field(default_factory=collections.Counter)
    widest_line: int = 0

    @property
    def max_index(self) -> int:
        return max(self.widths, default=0)


def _lines(path: str) -> Iterator[tuple[int, bytes]]:
    """``(line number, line)`` of a plain or gzip file; gzip errors become LetorFormatError."""
    number = 0
    with open_maybe_gzip(path) as stream:
        try:
            for line in stream:
                number += 1
                yield number, line
        except GZIP_READ_ERRORS as e:
            raise LetorFormatError(
                path, number + 1, f"truncated or corrupt gzip data at or after this line ({e})"
            ) from None


def scan_letor_file(path: str) -> FeatureScan:
    """The largest label and every line's highest feature index (bad tokens left for later)."""
    scan = FeatureScan(path)
    widths, widest = scan.widths, 0
    for number, raw in _lines(path):
        tokens = raw.partition(b"#")[0].split()
        if len(tokens) < 3:
            continue
        try:
            label = int(tokens[0])
            # Indices may come in any order along a line.
            top = max(int(t.partition(b":")[0]) for t in tokens[2:])
        except ValueError:
            continue
        scan.max_label = max(scan.max_label, label)
        widths[top] += 1
        if top > widest:
            widest, scan.widest_line = top, number
    return scan


def inferred_num_features(scans: Iterable[FeatureScan]) -> tuple[int, str]:
    """The feature count the scanned files imply and the ``path:line`` that set it;
    :class:`LetorFormatError` names the widest line when it breaks the module's rule."""
    scans = list(scans)
    widths: collections.Counter = collections.Counter()
    for scan in scans:
        widths.update(scan.widths)
    if not widths:
        raise ValueError("no feature index found in the files; pass --num-features")
    # The first file (in conversion order) that reaches the widest index names it.
    widest = max(widths)
    where = next(scan for scan in scans if scan.max_index == widest)
    path = where.path if "://" in where.path else os.path.abspath(where.path)
    lines = sum(widths.values())
    set_aside = math.ceil(lines * SET_ASIDE_SHARE)
    typical = _highest_after_setting_aside(widths, set_aside)
    if typical and widest > max(WIDTH_RATIO * typical, WIDTH_FLOOR):
        raise LetorFormatError(
            where.path,
            where.widest_line,
            f"feature index {widest} on this line, while {lines - set_aside} of the {lines} "
            f"lines (all but the widest {SET_ASIDE_SHARE:.0%}, at least one) reach at most "
            f"index {typical}; without --num-features a widest line beyond {WIDTH_RATIO} x "
            f"that (or {WIDTH_FLOOR}) is refused, as it would make every item {widest} "
            f"values wide. If the data has {widest} features, pass --num-features {widest}; "
            "otherwise fix this line",
        )
    logger.info(
        "feature count %d inferred from the files: the highest feature index, first "
        "reached at %s:%d",
        widest,
        path,
        where.widest_line,
    )
    return widest, f"{path}:{where.widest_line}"


def _highest_after_setting_aside(widths: collections.Counter, count: int) -> int:
    """The largest width left once the ``count`` widest lines are set aside (0: none left)."""
    for width in sorted(widths, reverse=True):
        if count < widths[width]:
            return width
        count -= widths[width]
    return 0
