"""A converted directory is built in a scratch directory, then swapped in; ``--overwrite``
replaces only what tfr-convert wrote (``core.atomic_files`` cannot check that)."""

from __future__ import annotations

import contextlib
import glob
import json
import logging
import os
import re
import shutil
import socket
import tempfile
from collections.abc import Callable, Iterable, Iterator

from tfr_rankformer.core.atomic_files import WRITE_ERRORS

logger = logging.getLogger(__name__)

_SHARD = re.compile(r"(train|vali|test)-\d{5,}-of-\d{5,}\.tfrecord")
_FOLD = re.compile(r"Fold\d+/")
_MANIFEST, _SOURCE = "manifest.json", "source/"
_SHOWN = 5


class OutputError(OSError):
    """The output directory cannot be created, written or moved into place."""


class MountPointError(OutputError):
    """The output is a mount point, which no rename can replace."""


class ForeignOutputError(FileExistsError):
    """The output exists and is not tfr-convert's own; the message names what it holds."""


# === Whose output it is ===


def manifest_is_ours(text: bytes | str) -> bool:
    """Whether a ``manifest.json`` is tfr-convert's (not JSON: a damaged one of ours)."""
    try:
        manifest = json.loads(text)
    except ValueError:
        return True
    created_by = manifest.get("created_by") if isinstance(manifest, dict) else None
    return isinstance(created_by, str) and created_by.startswith("tfr-convert")


def foreign_entries_of(paths: Iterable[str], is_ours: Callable[[str], bool]) -> list[str]:
    """The sorted entries of ``paths`` (relative, ``/``-separated, directories ending in
    ``/``) that tfr-convert never writes; ``is_ours(path)`` judges a ``manifest.json``."""
    top: set[str] = set()
    folds: dict[str, set[str]] = {}
    for path in paths:
        head, sep, rest = path.partition("/")
        top.add(head + sep)
        if sep and _FOLD.fullmatch(head + sep):
            entries = folds.setdefault(head + sep, set())
            if rest:
                child, child_sep, _ = rest.partition("/")
                entries.add(child + child_sep)
    if not top:
        return []
    foreign = _foreign_in_converted(top, "", is_ours)
    if foreign is not None:
        return foreign
    foreign = []
    for name in sorted(top):
        inner = _foreign_in_converted(folds[name], name, is_ours) if name in folds else None
        foreign += [name] if inner is None else inner
    return foreign


def _foreign_in_converted(names: set[str], prefix: str, is_ours) -> list[str] | None:
    """Foreign entries of one converted directory; ``None`` when it has no manifest of ours."""
    if _MANIFEST not in names or not is_ours(prefix + _MANIFEST):
        return None
    return [
        prefix + name
        for name in sorted(names)
        if name not in (_MANIFEST, _SOURCE) and not _SHARD.fullmatch(name)
    ]


def foreign_entries(directory: str) -> list[str]:
    """The entries of a local ``directory`` that tfr-convert never writes."""

    def listing(path: str, prefix: str = "") -> Iterator[str]:
        for name in os.listdir(path):
            entry = prefix + name + ("/" if os.path.isdir(os.path.join(path, name)) else "")
            yield entry
            if not prefix and _FOLD.fullmatch(entry):
                yield from listing(os.path.join(path, name), entry)

    def is_ours(path: str) -> bool:
        try:
            with open(os.path.join(directory, path), "rb") as f:
                return manifest_is_ours(f.read())
        except OSError:
            return False

    return foreign_entries_of(listing(directory), is_ours)


def foreign_output_message(output: str, foreign: list[str] | None) -> str:
    """Why ``output`` is refused; ``foreign`` lists what it holds (``None``: it is a file)."""
    advice = (
        "--overwrite replaces only a directory tfr-convert wrote (manifest.json, "
        "TFRecord shards, source/, FoldN/), so move {} away or choose another --output"
    )
    if foreign is None:
        return f"{output} is a file, not a directory written by tfr-convert; " + advice.format("it")
    shown = ", ".join(foreign[:_SHOWN])
    if len(foreign) > _SHOWN:
        shown += f" and {len(foreign) - _SHOWN} more"
    return f"{output} was not written by tfr-convert: it holds {shown}; " + advice.format(
        "them" if len(foreign) > 1 else "it"
    )


# === The swap ===


def _output_error(output: str, action: str, error: OSError, hidden: str) -> OutputError:
    """``error`` restated for ``output``; paths inside the hidden ``hidden`` are not shown."""
    reason = error.strerror or str(error)
    where = str(error.filename or "")
    if where and not where.startswith(hidden) and where != os.path.abspath(output):
        reason += f" ({where})"
    return OutputError(f"{output}: cannot {action}: {reason}")


def check_replaceable(output: str, *, overwrite: bool) -> None:
    """Checks that ``output`` may become the new output."""
    final = os.path.abspath(output)
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


def _remove_dead_scratch(final: str, prefix: str) -> None:
    """Deletes this host's scratch directories for ``final`` whose conversion was killed."""
    parent = glob.escape(os.path.dirname(final))
    for scratch in glob.glob(os.path.join(parent, glob.escape(prefix) + "*")):
        owner = os.path.basename(scratch)[len(prefix) :].rsplit("-", 2)
        if len(owner) != 3 or owner[0] != socket.gethostname() or not owner[1].isdigit():
            continue
        try:
            os.kill(int(owner[1]), 0)
        except ProcessLookupError:
            logger.info("removing %s, left by a conversion that was killed", scratch)
            shutil.rmtree(scratch, ignore_errors=True)
        except PermissionError:
            pass


def publish(scratch: str, output: str, *, overwrite: bool) -> None:
    """Swaps the complete ``scratch`` in as ``output``: old aside, new in, old deleted last."""
    check_replaceable(output, overwrite=overwrite)
    final = os.path.abspath(output)
    if not os.path.lexists(final):
        try:
            os.rename(scratch, final)
        except OSError as e:
            raise _output_error(output, "move the new output into place", e, scratch) from None
        return
    parent = os.path.dirname(final)
    try:
        aside_dir = tempfile.mkdtemp(prefix=f".{os.path.basename(final)}.replaced-", dir=parent)
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
    try:
        shutil.rmtree(aside_dir)
    except OSError as e:  # the new output is in place: only warn
        logger.warning(
            "%s: replaced, but the old output in %s was not deleted: %s", output, aside_dir, e
        )


@contextlib.contextmanager
def scratch_directory(output: str, *, overwrite: bool) -> Iterator[str]:
    """A scratch directory that becomes ``output`` when the block ends and is removed when
    it raises; an ``OSError`` inside it becomes an :class:`OutputError` naming ``output``."""
    check_replaceable(output, overwrite=overwrite)
    final = os.path.abspath(output)
    parent = os.path.dirname(final)
    _remove_dead_scratch(final, f".{os.path.basename(final)}.partial-")
    prefix = f".{os.path.basename(final)}.partial-{socket.gethostname()}-{os.getpid()}-"
    try:
        os.makedirs(parent, exist_ok=True)
        scratch = tempfile.mkdtemp(prefix=prefix, dir=parent)
        # mkdtemp makes it owner-only; made again, it gets a new directory's usual mode.
        os.rmdir(scratch)
        os.mkdir(scratch)
    except OSError as e:
        raise _output_error(
            output, "create the output directory", e, os.path.join(parent, prefix)
        ) from None
    try:
        yield scratch
        publish(scratch, output, overwrite=overwrite)
    except BaseException as e:
        shutil.rmtree(scratch, ignore_errors=True)
        if isinstance(e, OSError) and e.filename is None and e.errno in WRITE_ERRORS:
            raise _output_error(output, "write it", e, scratch) from None  # a write names no file
        if isinstance(e, OSError) and str(e.filename or "").startswith(scratch + os.sep):
            name = os.path.relpath(str(e.filename), scratch)
            raise _output_error(output, f"write {name}", e, scratch) from None
        raise
