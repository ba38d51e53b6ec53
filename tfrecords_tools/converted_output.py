"""Whether an existing output is tfr-convert's own, so that ``--overwrite`` may replace it.

``--overwrite`` replaces only what the converter wrote: an empty directory, or
a converted directory, which holds

* ``manifest.json``, written by tfr-convert (its ``created_by`` says so; a
  manifest that no longer parses counts as a damaged one of ours),
* TFRecord shards named ``{train,vali,test}-NNNNN-of-NNNNN.tfrecord``,
* ``source/``, the generated input of ``synthetic`` and ``synthetic-text``,

or, for ``--folds all``, only ``FoldN/`` directories that are each such a
directory. Anything else in it (or a plain file in its place) is foreign: the
output is refused, naming what it holds. One rule serves every writer: the
local and Beam LETOR converters and the text converters.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable, Iterable

__all__ = [
    "ForeignOutputError",
    "foreign_entries",
    "foreign_entries_of",
    "is_converted_directory",
    "manifest_is_ours",
    "foreign_output_message",
]

MANIFEST_NAME = "manifest.json"
_SHARD = re.compile(r"(train|vali|test)-\d{5,}-of-\d{5,}\.tfrecord")
_FOLD = re.compile(r"Fold\d+/")
_SOURCE = "source/"
_SHOWN = 5


class ForeignOutputError(FileExistsError):
    """The output exists and is not tfr-convert's own; the message names what it holds."""


def manifest_is_ours(text: bytes | str) -> bool:
    """Whether a ``manifest.json`` content comes from tfr-convert.

    Text that is not JSON counts as a damaged manifest of ours (rerunning with
    ``--overwrite`` is how such an output is repaired); JSON must be an object
    whose ``created_by`` starts with ``tfr-convert``.

    >>> manifest_is_ours('{"created_by": "tfr-convert 0.3.0"}'), manifest_is_ours('{"a": 1}')
    (True, False)
    """
    try:
        manifest = json.loads(text)
    except ValueError:
        return True
    created_by = manifest.get("created_by") if isinstance(manifest, dict) else None
    return isinstance(created_by, str) and created_by.startswith("tfr-convert")


def foreign_entries_of(paths: Iterable[str], is_ours: Callable[[str], bool]) -> list[str]:
    """The entries of a listing that tfr-convert never writes (empty: the output is ours).

    Args:
      paths: paths relative to the output, ``/``-separated: files, and
        directories with a trailing ``/`` (a directory need not be expanded,
        except ``FoldN/``, whose entries decide whether it is ours).
      is_ours: called with the relative path of a ``manifest.json``; whether
        its content is tfr-convert's (see :func:`manifest_is_ours`).

    Returns:
      Sorted entries: top-level names, and ``FoldN/name`` for a foreign entry
      inside a converted fold; directories end with ``/``.

    >>> foreign_entries_of(["manifest.json", "train-00000-of-00001.tfrecord"], lambda p: True)
    []
    >>> foreign_entries_of(["notes.txt", "Fold1/manifest.json", "Fold2/"], lambda p: True)
    ['Fold2/', 'notes.txt']
    """
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


def _foreign_in_converted(
    names: set[str], prefix: str, is_ours: Callable[[str], bool]
) -> list[str] | None:
    """Foreign entries of one converted directory; ``None`` when it has no manifest of ours."""
    if MANIFEST_NAME not in names or not is_ours(prefix + MANIFEST_NAME):
        return None
    return [
        prefix + name
        for name in sorted(names)
        if name not in (MANIFEST_NAME, _SOURCE) and not _SHARD.fullmatch(name)
    ]


def _listing(directory: str, prefix: str = "") -> list[str]:
    """One level of ``directory`` (directories with a trailing ``/``), ``FoldN/`` expanded."""
    paths = []
    for name in os.listdir(directory):
        full = os.path.join(directory, name)
        entry = prefix + name + ("/" if os.path.isdir(full) else "")
        paths.append(entry)
        if not prefix and _FOLD.fullmatch(entry):
            paths += _listing(full, entry)
    return paths


def _local_manifest_is_ours(path: str) -> bool:
    try:
        with open(path, "rb") as f:
            return manifest_is_ours(f.read())
    except OSError:
        return False


def foreign_entries(directory: str) -> list[str]:
    """The entries of a local ``directory`` that tfr-convert never writes.

    See :func:`foreign_entries_of`; a directory that cannot be listed raises
    ``OSError``.
    """
    return foreign_entries_of(
        _listing(directory),
        lambda path: _local_manifest_is_ours(os.path.join(directory, path)),
    )


def is_converted_directory(path: str) -> bool:
    """Whether ``path`` is a directory ``--overwrite`` may replace: empty or tfr-convert's."""
    return os.path.isdir(path) and not foreign_entries(path)


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
