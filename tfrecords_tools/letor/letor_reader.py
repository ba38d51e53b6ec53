"""Streaming LETOR files (plain or gzip) as blocks of whole lines, in bounded memory,
and parsing a block into items grouped by contiguous ``qid``."""

from __future__ import annotations

import dataclasses
import gzip
import hashlib
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
            if hasattr(os, "pread"):
                return os.pread(f.fileno(), self.length, self.offset)
            f.seek(self.offset)  # Windows has no pread
            return f.read(self.length)


class LetorFile:
    """One LETOR file read once in blocks; ``sha256``, ``size_bytes`` and ``num_lines`` are
    set once :meth:`blocks` is exhausted."""

    def __init__(self, path: str, *, chunk_bytes: int = DEFAULT_CHUNK_BYTES, opener=None):
        self.path = str(path)
        self.chunk_bytes = chunk_bytes
        self.sha256: str | None = None
        self._opener = opener
        self.size_bytes = os.path.getsize(self.path) if opener is None else None
        self.bytes_read = 0
        self.num_lines = 0
        self._hash = hashlib.sha256()

    def blocks(self, *, keep_data: bool = True) -> Iterator[Block]:
        """Yields the blocks in order; without ``keep_data`` workers re-read them by offset."""
        if keep_data or self._opener is not None or is_gzip(self.path):
            yield from self._blocks_with_data()
        else:
            yield from self._blocks_by_offset()
        self.sha256 = self._hash.hexdigest()

    def _open_raw(self):
        if self._opener is None:
            return open(self.path, "rb", buffering=0)
        return self._opener(self.path)

    def _blocks_with_data(self) -> Iterator[Block]:
        compressed = is_gzip(self.path, opener=self._opener)
        hashing = HashingReader(self._open_raw())
        self._hash = hashing.sha256
        stream = gzip.GzipFile(fileobj=hashing) if compressed else hashing
        next_line, pending, offset = 1, b"", 0
        try:
            while True:
                try:
                    data = stream.read(self.chunk_bytes)
                except GZIP_READ_ERRORS as e:
                    raise LetorFormatError(
                        self.path,
                        next_line,
                        f"truncated or corrupt gzip data at or after this line ({e})",
                    ) from None
                self.bytes_read = hashing.bytes_read
                if not data:
                    break
                data = pending + data
                cut = data.rfind(b"\n") + 1
                if cut == 0:
                    pending = data
                    continue
                data, pending = data[:cut], data[cut:]
                count = data.count(b"\n")
                yield Block(self.path, data, -1 if compressed else offset, cut, next_line, count)
                next_line += count
                offset += cut
            if pending:
                yield Block(
                    self.path, pending, -1 if compressed else offset, len(pending), next_line, 1
                )
                next_line += 1
        finally:
            stream.close()
            hashing.close()
        self.num_lines = next_line - 1
        self.size_bytes = hashing.bytes_read

    def _blocks_by_offset(self) -> Iterator[Block]:
        self._hash = hashlib.sha256()
        buffer = bytearray(self.chunk_bytes)
        filled, offset, next_line = 0, 0, 1
        with open(self.path, "rb", buffering=0) as f:
            while True:
                if filled == len(buffer):  # a line longer than the buffer
                    buffer.extend(bytes(len(buffer)))
                with memoryview(buffer) as view:
                    n = f.readinto(view[filled:])
                    self._hash.update(view[filled : filled + n])
                self.bytes_read += n
                end = filled + n
                if n == 0:
                    if end:
                        yield Block(self.path, None, offset, end, next_line, 1)
                        next_line += 1
                    break
                cut = buffer.rfind(b"\n", 0, end) + 1
                if cut == 0:
                    filled = end
                    continue
                count = buffer.count(b"\n", 0, cut)
                yield Block(self.path, None, offset, cut, next_line, count)
                next_line += count
                offset += cut
                buffer[: end - cut] = buffer[cut:end]
                filled = end - cut
        self.num_lines = next_line - 1


def parse_block(
    block: Block, num_features: int, *, use_threads: bool = True, duplicates: str = "error"
) -> tuple[ParsedLines, bool]:
    """Parses a block; returns its items and whether the dense fast path took it."""
    data = block.read()
    parsed = parse_dense_chunk(
        data,
        num_features=num_features,
        first_line=block.first_line,
        num_lines=block.num_lines,
        use_threads=use_threads,
    )
    if parsed is not None:
        return parsed, True
    lines = data.split(b"\n")
    return (
        parse_letor_lines(
            lines,
            num_features=num_features,
            path=block.path,
            first_line=block.first_line,
            duplicates=duplicates,
        ),
        False,
    )


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
