"""Files that may be gzip-compressed, recognised by their first bytes, not their name.

Every reader of the converter (LETOR, TREC, TFRecord) accepts plain and
gzip-compressed files alike; a file is gzip data when it starts with the gzip
magic bytes, whatever its name ends in.
"""

from __future__ import annotations

import gzip
import zlib
from collections.abc import Callable
from typing import BinaryIO

__all__ = ["GZIP_MAGIC", "GZIP_READ_ERRORS", "decompressing", "is_gzip", "open_maybe_gzip"]

GZIP_MAGIC = b"\x1f\x8b"

# What reading truncated or corrupt gzip data raises, depending on where it breaks.
GZIP_READ_ERRORS = (EOFError, gzip.BadGzipFile, zlib.error, OSError)


def _open_local(path: str) -> BinaryIO:
    return open(path, "rb")


def is_gzip(path: str, *, opener: Callable[[str], BinaryIO] | None = None) -> bool:
    """Whether the file starts with the gzip magic bytes.

    Args:
      path: the file.
      opener: opens ``path`` as a binary stream of its stored bytes (e.g.
        through a remote file system); ``None`` opens a local file.

    >>> import tempfile
    >>> with tempfile.NamedTemporaryFile(suffix=".txt", delete=False) as f:
    ...     _ = f.write(gzip.compress(b"1 qid:1 1:0.5\\n"))
    >>> is_gzip(f.name)
    True
    """
    with (opener or _open_local)(path) as f:
        return f.read(len(GZIP_MAGIC)) == GZIP_MAGIC


def decompressing(raw: BinaryIO, *, compressed: bool) -> BinaryIO:
    """``raw`` itself, or a stream of its decompressed bytes when ``compressed``.

    Closing the returned stream does not close ``raw``.
    """
    return gzip.GzipFile(fileobj=raw) if compressed else raw


def open_maybe_gzip(path: str) -> BinaryIO:
    """Opens a local file for reading its bytes, decompressed when it is gzip data.

    >>> import tempfile
    >>> with tempfile.NamedTemporaryFile(suffix=".txt", delete=False) as f:
    ...     _ = f.write(gzip.compress(b"1 qid:1 1:0.5\\n"))
    >>> with open_maybe_gzip(f.name) as stream:
    ...     stream.read()
    b'1 qid:1 1:0.5\\n'
    """
    return gzip.open(path, "rb") if is_gzip(path) else open(path, "rb")
