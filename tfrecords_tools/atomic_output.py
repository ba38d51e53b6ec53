"""Publishing a converted directory: built in a scratch directory, then renamed.

Every local conversion writes into a scratch directory beside its output and
only renames it into place when complete, so a failure leaves nothing partial:
:func:`scratch_directory` does the whole of it; :func:`prepare` and
:func:`publish` are its two ends, for a writer that must pick its working
directory itself (the Beam converter's remote outputs).

An existing output is replaced only when ``overwrite`` is on and it is an
empty directory or tfr-convert's own (``converted_output``'s rule, checked
before the work starts and again before the swap). The swap never leaves the
path without a complete directory for longer than two renames: the old one is
renamed aside, the new one renamed in, and only then is the old one deleted.

Failures to create or move the output name the output as the caller gave it,
not the hidden scratch directory. A mount point cannot be the output: nothing
can be renamed onto it (``EBUSY``), so it is refused before any work, with the
advice to give a directory inside it.
"""

from __future__ import annotations

import contextlib
import glob
import logging
import os
import shutil
import socket
import tempfile
from collections.abc import Iterator

from tfrecords_tools.converted_output import (
    ForeignOutputError,
    foreign_entries,
    foreign_output_message,
)

__all__ = [
    "MountPointError",
    "OutputError",
    "check_replaceable",
    "prepare",
    "publish",
    "scratch_directory",
]

logger = logging.getLogger(__name__)


class OutputError(OSError):
    """The output directory cannot be created, written or moved into place."""


class MountPointError(OutputError):
    """The output is a mount point, which no rename can replace."""


def _output_error(output: str, action: str, error: OSError, hidden: str) -> OutputError:
    """``error`` restated for ``output``; paths inside the hidden ``hidden`` are not shown."""
    reason = error.strerror or str(error)
    where = str(error.filename or "")
    if where and not where.startswith(hidden) and where != os.path.abspath(output):
        reason += f" ({where})"
    return OutputError(f"{output}: cannot {action}: {reason}")


def check_replaceable(output: str, *, overwrite: bool, final: str | None = None) -> None:
    """Checks that ``output`` (absolute: ``final``) may become the new output.

    Raises:
      MountPointError: it is a mount point (the output is renamed onto its path,
        which the kernel refuses for a mount point, even an empty one).
      ForeignOutputError: it exists and is not an empty directory or tfr-convert's.
      FileExistsError: it is tfr-convert's (and not empty) and ``overwrite`` is off.
      OutputError: it cannot be listed.
    """
    final = final or os.path.abspath(output)
    if not os.path.lexists(final):
        return
    if os.path.ismount(final):
        raise MountPointError(
            f"--output {output} is a mount point: it cannot be replaced by a rename; "
            f"give a directory inside it, e.g. {os.path.join(output, 'data')}"
        )
    if not os.path.isdir(final):
        raise ForeignOutputError(foreign_output_message(output, None))
    try:
        empty = not os.listdir(final)
        foreign = [] if empty else foreign_entries(final)
    except OSError as e:
        raise _output_error(output, "list the existing output", e, final + os.sep) from None
    if foreign:
        raise ForeignOutputError(foreign_output_message(output, foreign))
    if not empty and not overwrite:
        raise FileExistsError(f"{output} already exists; pass --overwrite to replace it")


def _scratch_prefix(final: str) -> str:
    """Scratch directories of ``final`` are ``.<name>.partial-<host>-<pid>-<random>``."""
    return f".{os.path.basename(final)}.partial-"


def _remove_dead_scratch(final: str) -> None:
    """Deletes the scratch directories of conversions into ``final`` that were killed:
    those of this host whose process (named in the directory) no longer runs."""
    parent, prefix = os.path.dirname(final), _scratch_prefix(final)
    for scratch in glob.glob(os.path.join(glob.escape(parent), glob.escape(prefix) + "*")):
        owner = os.path.basename(scratch)[len(prefix) :].rsplit("-", 2)
        if len(owner) != 3 or owner[0] != socket.gethostname() or not owner[1].isdigit():
            continue
        if _alive(int(owner[1])):
            continue
        logger.info("removing %s, left by a conversion that was killed", scratch)
        shutil.rmtree(scratch, ignore_errors=True)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def prepare(output: str, *, overwrite: bool) -> tuple[str, str]:
    """Checks ``output`` (see :func:`check_replaceable`) and makes an empty scratch
    directory beside it.

    Returns:
      ``(final path, scratch path)``, both absolute.

    Raises:
      ForeignOutputError, FileExistsError: see :func:`check_replaceable`.
      OutputError: the scratch directory (or the output's parent) cannot be created.
    """
    check_replaceable(output, overwrite=overwrite)
    final = os.path.abspath(output)
    parent = os.path.dirname(final)
    _remove_dead_scratch(final)
    prefix = f"{_scratch_prefix(final)}{socket.gethostname()}-{os.getpid()}-"
    try:
        os.makedirs(parent, exist_ok=True)
        scratch = tempfile.mkdtemp(prefix=prefix, dir=parent)
        # mkdtemp makes it owner-only; the output gets a new directory's usual mode.
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(scratch, 0o777 & ~umask)
    except OSError as e:
        raise _output_error(
            output, "create the output directory", e, os.path.join(parent, prefix)
        ) from None
    return final, scratch


def publish(scratch: str, final: str, *, overwrite: bool, output: str | None = None) -> None:
    """Makes the complete ``scratch`` the output ``final``, replacing the old one if any.

    ``output`` is the path as the caller gave it, for messages (default ``final``).
    The old output is checked again, renamed aside, the new one renamed in, and
    the old one deleted last; if the second rename fails the old one is put back.

    Raises:
      ForeignOutputError, FileExistsError: see :func:`check_replaceable`.
      OutputError: a rename fails (the old output, if any, is left in place).
    """
    output = output or final
    check_replaceable(output, overwrite=overwrite, final=final)
    if not os.path.lexists(final):
        try:
            os.rename(scratch, final)
        except OSError as e:
            raise _output_error(output, "move the new output into place", e, scratch) from None
        return
    parent = os.path.dirname(final)
    prefix = f".{os.path.basename(final)}.replaced-"
    try:
        aside_dir = tempfile.mkdtemp(prefix=prefix, dir=parent)
    except OSError as e:
        raise _output_error(output, "replace the existing output", e, parent + os.sep) from None
    aside = os.path.join(aside_dir, "old")
    try:
        os.rename(final, aside)
    except OSError as e:
        with contextlib.suppress(OSError):
            os.rmdir(aside_dir)
        raise _output_error(output, "move the existing output aside", e, aside_dir) from None
    try:
        os.rename(scratch, final)
    except OSError as e:
        try:
            os.rename(aside, final)
        except OSError:
            raise OutputError(
                f"{output}: cannot move the new output into place ({e.strerror or e}), nor "
                f"the old one back; the old output is in {aside}"
            ) from None
        with contextlib.suppress(OSError):
            os.rmdir(aside_dir)
        raise _output_error(output, "move the new output into place", e, scratch) from None
    _remove_aside(output, aside_dir)


def _remove_aside(output: str, aside_dir: str) -> None:
    """Deletes the replaced output; the new one is in place, so a failure only warns."""
    try:
        shutil.rmtree(aside_dir)
    except OSError as e:
        logger.warning(
            "%s: replaced, but the old output in %s was not deleted: %s", output, aside_dir, e
        )


@contextlib.contextmanager
def scratch_directory(output: str, *, overwrite: bool) -> Iterator[str]:
    """A scratch directory beside ``output`` that becomes ``output`` when the block
    ends normally and is removed when it raises (see :func:`prepare` for the checks).

    An ``OSError`` about a file inside the scratch directory (a full disk, say)
    becomes an :class:`OutputError` naming ``output``.
    """
    final, scratch = prepare(output, overwrite=overwrite)
    try:
        yield scratch
        publish(scratch, final, overwrite=overwrite, output=output)
    except OSError as e:
        shutil.rmtree(scratch, ignore_errors=True)
        inside = str(e.filename or "").startswith(scratch + os.sep)
        if inside and not isinstance(e, OutputError):
            name = os.path.relpath(str(e.filename), scratch)
            raise _output_error(output, f"write {name}", e, scratch) from None
        raise
    except BaseException:
        shutil.rmtree(scratch, ignore_errors=True)
        raise
