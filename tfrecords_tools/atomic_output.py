"""Publishing a converted directory: built in a scratch directory, then renamed.

Every local conversion writes into a scratch directory beside its output and
only renames it into place when complete, so a failure leaves nothing partial:
:func:`scratch_directory` does the whole of it; :func:`prepare` and
:func:`publish` are its two ends, for a writer that must pick its working
directory itself (the Beam converter's remote outputs).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Iterator

__all__ = ["prepare", "publish", "scratch_directory"]


def prepare(output: str, *, overwrite: bool) -> tuple[str, str]:
    """Checks ``output`` and makes an empty scratch directory beside it.

    Returns:
      ``(final path, scratch path)``, both absolute.

    Raises:
      FileExistsError: ``output`` exists (and is not an empty directory) and
        ``overwrite`` is off.
    """
    final = os.path.abspath(output)
    if os.path.exists(final) and not overwrite:
        if not os.path.isdir(final) or os.listdir(final):
            raise FileExistsError(f"{final} already exists; pass --overwrite to replace it")
    parent = os.path.dirname(final)
    os.makedirs(parent, exist_ok=True)
    scratch = tempfile.mkdtemp(prefix=f".{os.path.basename(final)}.partial-", dir=parent)
    return final, scratch


def publish(scratch: str, final: str) -> None:
    """Replaces ``final`` (a file or directory, if any) with the complete ``scratch``."""
    if os.path.exists(final):
        shutil.rmtree(final) if os.path.isdir(final) else os.remove(final)
    os.rename(scratch, final)


@contextlib.contextmanager
def scratch_directory(output: str, *, overwrite: bool) -> Iterator[str]:
    """A scratch directory beside ``output`` that becomes ``output`` when the block
    ends normally and is removed when it raises (see :func:`prepare` for the checks)."""
    final, scratch = prepare(output, overwrite=overwrite)
    try:
        yield scratch
        publish(scratch, final)
    except BaseException:
        shutil.rmtree(scratch, ignore_errors=True)
        raise
