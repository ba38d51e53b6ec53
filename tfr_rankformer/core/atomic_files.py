"""Every file or directory the project writes goes to a temporary name first and is
renamed into place when complete, so that an error or a kill leaves nothing partial."""

from __future__ import annotations

import contextlib
import os
import shutil
from collections.abc import Iterator
from typing import IO

__all__ = ["atomic_path", "atomic_write"]


def _remove(path: str) -> None:
    if os.path.isdir(path) and not os.path.islink(path):
        shutil.rmtree(path, ignore_errors=True)
    else:
        with contextlib.suppress(FileNotFoundError):
            os.remove(path)


@contextlib.contextmanager
def atomic_path(path: str, *, suffix: str = ".partial") -> Iterator[str]:
    """Yields ``path + suffix`` to write a file or a directory at; it becomes ``path``
    when the block ends normally and is removed when the block raises.

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
    except BaseException:
        _remove(temporary)
        raise


@contextlib.contextmanager
def atomic_write(path: str, mode: str = "w", **open_options) -> Iterator[IO]:
    """``open(path, mode)`` through :func:`atomic_path`; text files are UTF-8 unless told."""
    if "b" not in mode:
        open_options.setdefault("encoding", "utf-8")
    with atomic_path(path) as temporary, open(temporary, mode, **open_options) as f:
        yield f
