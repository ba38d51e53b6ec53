"""Reading LETOR files on Beam, one file per element; invalid lines are set aside as
:class:`BadLine` with the local parser's message."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator

import numpy as np

from tfrecords_tools.converted_fold import letor_entry
from tfrecords_tools.letor.letor_parser import LetorFormatError, ParsedLines, parse_letor_lines
from tfrecords_tools.letor.letor_reader import (
    LetorFile,
    ParseCounts,
    QueryList,
    parse_block,
    query_lists,
)
from tfrecords_tools.list_processing import label_error
from tfrecords_tools.normalization import FitPartial


@dataclasses.dataclass(frozen=True)
class BadLine:
    """A line set aside, with the local converter's message (line 0: the whole file)."""

    path: str
    line: int
    message: str

    @classmethod
    def of(cls, error: LetorFormatError) -> BadLine:
        where = f"{error.path}:{error.line}" if error.line else error.path
        # The local message without its "path:line: " prefix, token detail kept.
        return cls(error.path, error.line or 0, str(error)[len(where) + 2 :])

    def to_text(self) -> str:
        """One dead-letter line: file, line number and message, tab-separated."""
        return f"{self.path}\t{self.line}\t{self.message}"


@dataclasses.dataclass
class ListPiece:
    """Consecutive items of one query in one file (its index among the split's files)."""

    file_index: int
    query: QueryList

    @property
    def order(self) -> tuple[int, int]:
        """Where the piece starts in the split's input: (file, line)."""
        return self.file_index, int(self.query.line_numbers[0])


def parse_lenient(
    block, num_features: int, *, duplicates: str = "error"
) -> tuple[ParsedLines, list[LetorFormatError]]:
    """Parses a block; on an error, line by line, keeping valid lines and every error."""
    try:
        parsed, _ = parse_block(block, num_features, use_threads=False, duplicates=duplicates)
        return parsed, []
    except LetorFormatError:
        pass
    lines, errors = block.read().split(b"\n")[: block.num_lines], []
    options = {"num_features": num_features, "path": block.path, "duplicates": duplicates}
    for offset, line in enumerate(lines):
        try:
            parse_letor_lines([line], first_line=block.first_line + offset, **options)
        except LetorFormatError as error:
            errors.append(error)
            lines[offset] = b""  # a blank line is skipped
    return parse_letor_lines(lines, first_line=block.first_line, **options), errors


def _drop_high_labels(parsed: ParsedLines, max_relevance: int, path: str):
    """Removes items above ``max_relevance``; returns the rest and their errors."""
    high = parsed.labels > max_relevance
    if not high.any():
        return parsed, []
    errors = [
        label_error(path, int(parsed.line_numbers[i]), int(parsed.labels[i]), max_relevance)
        for i in np.flatnonzero(high)
    ]
    keep = ~high
    kept = dataclasses.replace(
        parsed,
        labels=parsed.labels[keep],
        qids=parsed.qids[keep],
        features=parsed.features[keep],
        line_numbers=parsed.line_numbers[keep],
        last_features=None,
    )
    return kept, errors


def read_letor_file(
    path: str,
    file_index: int,
    *,
    num_features: int,
    max_relevance: int,
    fit_seed: int | None,
    chunk_bytes: int,
    opener=None,
    duplicates: str = "error",
) -> Iterator[tuple[str, object]]:
    """Reads one LETOR file leniently; yields ``(kind, value)``: ``piece``, ``bad``, ``fit``,
    ``columns`` (``[d, n]`` for the sketches) and last ``file`` (its manifest entry)."""
    letor = LetorFile(path, chunk_bytes=chunk_bytes, opener=opener)
    counts, bad_lines = ParseCounts(), 0
    try:
        for block in letor.blocks(keep_data=True):
            parsed, errors = parse_lenient(block, num_features, duplicates=duplicates)
            counts.add(ParseCounts.of(parsed, False))
            parsed, label_errors = _drop_high_labels(parsed, max_relevance, block.path)
            for error in sorted(errors + label_errors, key=lambda error: error.line or 0):
                bad_lines += 1
                yield "bad", BadLine.of(error)
            if not len(parsed):
                continue
            for query in query_lists(parsed):
                yield "piece", ListPiece(file_index, query)
            if fit_seed is not None:
                order = (file_index, int(parsed.line_numbers[0]))
                # A threshold below every key: moments and extremes only, no sample rows.
                fit = FitPartial.of(
                    parsed.features, parsed.line_numbers, seed=fit_seed, threshold=-1
                )
                yield "fit", (order, fit)
                yield "columns", np.ascontiguousarray(parsed.features.T)
    except LetorFormatError as error:  # truncated or corrupt gzip data
        bad_lines += 1
        yield "bad", BadLine.of(error)
    if counts.items == 0 and not bad_lines:
        yield (
            "bad",
            BadLine.of(LetorFormatError(path, None, "file is empty: it holds no LETOR lines")),
        )
    yield "file", letor_entry(path, letor, counts)
