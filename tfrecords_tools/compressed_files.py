"""Files that may be gzip-compressed, recognised by their first bytes, not their name."""

from __future__ import annotations

import gzip
import hashlib
import zlib
from collections.abc import Callable
from typing import BinaryIO

# What reading truncated or corrupt gzip data raises, depending on where it breaks.
GZIP_READ_ERRORS = (EOFError, gzip.BadGzipFile, zlib.error, OSError)


def is_gzip(path: str, *, opener: Callable[[str], BinaryIO] | None = None) -> bool:
    """Whether the file starts with the gzip magic bytes (``opener``: another file system)."""
    with (opener or (lambda p: open(p, "rb")))(path) as f:
        return f.read(2) == b"\x1f\x8b"


def open_maybe_gzip(path: str) -> BinaryIO:
    """Opens a local file for reading its bytes, decompressed when it is gzip data."""
    return gzip.open(path, "rb") if is_gzip(path) else open(path, "rb")


class HashingReader:
    """Wraps a binary stream; hashes and counts every byte read through it."""

    def __init__(self, raw):
        self._raw = raw
        self.sha256 = hashlib.sha256()
        self.bytes_read = 0

    def read(self, size: int = -1) -> bytes:
        block = self._raw.read(size)
        self.sha256.update(block)
        self.bytes_read += len(block)
        return block

    def close(self) -> None:
        self._raw.close()
