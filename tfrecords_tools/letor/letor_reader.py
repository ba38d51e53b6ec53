"""Streaming LETOR files (plain or gzip) as blocks of whole lines, in bounded memory,
and parsing a block into items grouped by contiguous ``qid``."""

from __future__ import annotations

import dataclasses
import gzip
import os
from collections.abc import Iterator

import numpy as np

from tfrecords_tools.compressed_files import GZIP_READ_ERRORS, HashingReader, is_gzip
from tfrecords_tools.letor.letor_fast_path import parse_dense_chunk
from tfrecords_tools.letor.letor_parser import LetorFormatError, ParsedLines, parse_letor_lines

DEFAULT_CHUNK_BYTES = 8 << 20


@dataclasses.dataclass
class QueryList:
    """One query's items in file order: labels, ``[n, d]`` raw features, line numbers and
    further context as serialised ``Features`` (ELWC input)."""

    qid: int
    labels: np.ndarray
    features: np.ndarray
    line_numbers: np.ndarray
    context: bytes = b""

    def __len__(self) -> int:
        return int(self.labels.shape[0])

    @staticmethod
    def join(pieces: list[QueryList]) -> QueryList:
        """One list from consecutive pieces of the same query (split across blocks)."""
        if len(pieces) == 1:
            return pieces[0]
        return QueryList(
            pieces[0].qid,
            np.concatenate([p.labels for p in pieces]),
            np.concatenate([p.features for p in pieces]),
            np.concatenate([p.line_numbers for p in pieces]),
            pieces[0].context,
        )


@dataclasses.dataclass
class ParseCounts:
    """What parsing found so far: items (those the dense fast path took), and lines whose
    features were sorted, had a repeated index resolved, or omitted some index."""

    items: int = 0
    fast_items: int = 0
    unsorted_lines: int = 0
    duplicate_lines: int = 0
    sparse_lines: int = 0

    @classmethod
    def of(cls, parsed: ParsedLines, fast: bool) -> ParseCounts:
        n = len(parsed)
        fast_items = n if fast else 0
        return cls(
            n, fast_items, parsed.unsorted_lines, parsed.duplicate_lines, parsed.sparse_lines
        )

    def add(self, other: ParseCounts) -> None:
        for field in dataclasses.fields(self):
            setattr(self, field.name, getattr(self, field.name) + getattr(other, field.name))


@dataclasses.dataclass(frozen=True)
class Block:
    """Whole lines of a file; ``data`` is ``None`` when a worker reads them itself from
    ``offset`` (plain files; -1 for gzip)."""

    path: str
    data: bytes | None
    offset: int
    length: int
    first_line: int
    num_lines: int

    def read(self) -> bytes:
        if self.data is not None:
            return self.data
        with open(self.path, "rb", buffering=0) as f:
            f.seek(self.offset)
            return f.read(self.length)


class LetorFile:
    """One LETOR file read once in blocks; ``sha256``, ``size_bytes`` and ``num_lines`` are
    set once :meth:`blocks` is exhausted."""

    def __init__(self, path: str, *, chunk_bytes: int = DEFAULT_CHUNK_BYTES, opener=None):
        self.path = str(path)
        self.chunk_bytes = chunk_bytes
        self.sha256: str | None = None
        self._opener = opener or (lambda p: open(p, "rb", buffering=0))
        self.size_bytes = os.path.getsize(self.path) if opener is None else None
        self.bytes_read = 0
        self.num_lines = 0

    def blocks(self, *, keep_data: bool = True) -> Iterator[Block]:
        """Yields the blocks in order; without ``keep_data`` workers re-read plain files' blocks."""
        compressed = is_gzip(self.path, opener=self._opener)
        keep_data = keep_data or compressed or self.size_bytes is None
        hashing = HashingReader(self._opener(self.path))
        stream = gzip.GzipFile(fileobj=hashing) if compressed else hashing
        next_line, pending, offset = 1, b"", 0
        try:
            while True:
                try:
                    chunk = stream.read(self.chunk_bytes)
                except GZIP_READ_ERRORS as e:
                    raise LetorFormatError(
                        self.path,
                        next_line,
                        f"truncated or corrupt gzip data at or after this line ({e})",
                    ) from None
                self.bytes_read = hashing.bytes_read
                data = pending + chunk
                if not data:
                    break
                # At the end, the last line may lack its newline.
                cut = data.rfind(b"\n") + 1 if chunk else len(data)
                if cut == 0:
                    pending = data
                    continue
                data, pending = data[:cut], data[cut:]
                count = data.count(b"\n") or 1
                kept = data if keep_data else None
                yield Block(self.path, kept, -1 if compressed else offset, cut, next_line, count)
                next_line += count
                offset += cut
        finally:
            stream.close()
            hashing.close()
        self.num_lines = next_line - 1
        self.size_bytes = hashing.bytes_read
        self.sha256 = hashing.sha256.hexdigest()


def parse_block(
    block: Block, num_features: int, *, use_threads: bool = True, duplicates: str = "error"
) -> tuple[ParsedLines, ParseCounts]:
    """Parses a block, by the dense fast path when it can; returns its items and counts."""
    data = block.read()
    parsed = parse_dense_chunk(
        data,
        num_features=num_features,
        first_line=block.first_line,
        num_lines=block.num_lines,
        use_threads=use_threads,
    )
    fast = parsed is not None
    if not fast:
        parsed = parse_letor_lines(
            data.split(b"\n"),
            num_features=num_features,
            path=block.path,
            first_line=block.first_line,
            duplicates=duplicates,
        )
    return parsed, ParseCounts.of(parsed, fast)


def group_bounds(qids: np.ndarray) -> list[tuple[int, int]]:
    """``(begin, end)`` of each run of equal consecutive qids."""
    starts = np.flatnonzero(np.diff(qids)) + 1
    bounds = [0, *starts.tolist(), len(qids)]
    return list(zip(bounds[:-1], bounds[1:]))


def query_lists(parsed: ParsedLines) -> list[QueryList]:
    """The lists of a parsed block: its runs of one qid."""
    return [
        QueryList(
            int(parsed.qids[b]), parsed.labels[b:e], parsed.features[b:e], parsed.line_numbers[b:e]
        )
        for b, e in group_bounds(parsed.qids)
    ]
