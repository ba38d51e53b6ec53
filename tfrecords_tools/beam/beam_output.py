"""The Beam converter's remote outputs (``gs://...``), which cannot be renamed.

A remote output is written in place, ``manifest.json`` last; before that,
:func:`prepare_remote` checks what the output already holds with the local
converter's rule (``converted_output``): foreign objects are refused, and an
old converted output is deleted only with ``overwrite``. Object stores cannot
rename a directory aside, so unlike a local output the old one is gone before
the new one is complete.
"""

from __future__ import annotations

import logging

from apache_beam.io.filesystem import CompressionTypes
from apache_beam.io.filesystems import FileSystems

from tfrecords_tools.converted_output import (
    ForeignOutputError,
    foreign_entries_of,
    foreign_output_message,
    manifest_is_ours,
)

__all__ = ["prepare_remote", "write_text", "delete_quietly"]

logger = logging.getLogger(__name__)


def prepare_remote(output: str, *, overwrite: bool) -> str:
    """Checks a remote ``output`` and empties it when it may be replaced; returns it
    without a trailing ``/``.

    Raises:
      ForeignOutputError: it holds objects tfr-convert never writes.
      FileExistsError: it holds a converted output and ``overwrite`` is off.
    """
    root = output.rstrip("/")
    existing = [m.path for m in FileSystems.match([root + "/**"])[0].metadata_list]
    if existing:
        relative = [path[len(root) + 1 :] for path in existing]
        foreign = foreign_entries_of(relative, lambda name: _manifest_is_ours(root, name))
        if foreign:
            raise ForeignOutputError(foreign_output_message(output, foreign))
        if not overwrite:
            raise FileExistsError(f"{output} already holds files; pass --overwrite to replace them")
        FileSystems.delete(existing)
    return root


def _manifest_is_ours(root: str, name: str) -> bool:
    path = FileSystems.join(root, name)
    with FileSystems.open(path, compression_type=CompressionTypes.UNCOMPRESSED) as stream:
        return manifest_is_ours(stream.read())


def write_text(path: str, text: str) -> None:
    """Writes ``text`` as UTF-8 to ``path`` on any Beam file system."""
    with FileSystems.create(path) as stream:
        stream.write(text.encode("utf-8"))


def delete_quietly(path: str) -> None:
    """Deletes ``path``, only warning on failure (the error that led here matters more)."""
    try:
        FileSystems.delete([path])
    except Exception as error:  # noqa: BLE001 - the original error matters more
        logger.warning("could not delete %s: %s", path, error)
