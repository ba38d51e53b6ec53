"""Every file or directory the project writes goes to a temporary name first and is
renamed into place when complete, so that an error or a kill leaves nothing partial."""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
from collections.abc import Iterator
from typing import IO

# Errors of writing: an ``OSError`` of a write or a flush names no file.
WRITE_ERRORS = {errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EROFS, errno.EACCES, errno.EPERM}


def _remove(path: str) -> None:
    """Removes ``path`` if there; a failure is left to the writes that follow."""
    if os.path.isdir(path) and not os.path.islink(path):
        shutil.rmtree(path, ignore_errors=True)
    elif os.path.lexists(path):
        with contextlib.suppress(OSError):
            os.remove(path)


@contextlib.contextmanager
def atomic_path(path: str, *, suffix: str = ".partial") -> Iterator[str]:
    """Yields ``path + suffix`` to write at, renamed to ``path`` when the block ends
    normally, removed when it raises; an ``OSError`` of writing it names ``path``.

    >>> import tempfile; target = os.path.join(tempfile.mkdtemp(), "out.txt")
    >>> with atomic_path(target) as temporary:
    ...     _ = open(temporary, "w").write("done")
    >>> open(target).read(), os.path.exists(target + ".partial")
    ('done', False)
    """
    temporary = path + suffix
    _remove(temporary)  # left by a run that was killed
    try:
        yield temporary
        os.replace(temporary, path)
    except BaseException as error:
        _remove(temporary)
        if (
            isinstance(error, OSError)
            and error.errno
            and (
                error.filename == temporary
                or (error.filename is None and error.errno in WRITE_ERRORS)
            )
        ):
            raise OSError(error.errno, error.strerror, path) from error
        raise


@contextlib.contextmanager
def atomic_write(path: str, mode: str = "w", **open_options) -> Iterator[IO]:
    """``open(path, mode)`` through :func:`atomic_path`; text files are UTF-8 unless told."""
    if "b" not in mode:
        open_options.setdefault("encoding", "utf-8")
    with atomic_path(path) as temporary, open(temporary, mode, **open_options) as f:
        yield f
