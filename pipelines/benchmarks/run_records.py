"""A benchmark's records: one JSON object a line.

``web30k_scale`` and ``cranfield_rerank`` keep their figures this way, the
run's settings first (:func:`write_records`, :func:`read_records`), so a docs
table reprints from the file (``--reprint``) without rerunning anything;
``train_bench`` and ``serve_bench`` append a line per run to theirs
(:func:`append_line`, :func:`read_lines`).
"""

from __future__ import annotations

import argparse
import json
import os
from collections.abc import Callable

__all__ = ["append_line", "read_lines", "read_records", "reprint", "write_records"]


def write_records(path: str, run: dict, records: list[dict], *, kind: str) -> None:
    """The run's settings (``{kind: "run", ...}``), then one object per record, written
    under a temporary name and renamed."""
    with open(path + ".partial", "w", encoding="utf-8") as f:
        for record in [{kind: "run", **run}, *records]:
            f.write(json.dumps(record) + "\n")
    os.replace(path + ".partial", path)


def append_line(path: str, line: dict) -> None:
    """Appends ``line`` to the JSON-lines file ``path`` (made if missing)."""
    with open(path, "a", encoding="utf-8") as f:
        f.write(json.dumps(line, sort_keys=True) + "\n")


def read_lines(path: str) -> list[dict]:
    """The JSON objects of ``path``, one a line (blank lines skipped).

    Raises:
      ValueError: naming the file and line of a line that is not a JSON object.
    """
    lines = []
    with open(path, encoding="utf-8") as f:
        for number, text in enumerate(f, 1):
            if not text.strip():
                continue
            try:
                line = json.loads(text)
            except json.JSONDecodeError as error:
                raise ValueError(f"{path}, line {number}: not JSON ({error.msg})") from None
            if not isinstance(line, dict):
                raise ValueError(f"{path}, line {number}: not a JSON object")
            lines.append(line)
    return lines


def read_records(path: str) -> tuple[dict | None, list[dict]]:
    """The run's settings and its records of ``path`` (``None, []`` if it does not exist)."""
    if not os.path.isfile(path):
        return None, []
    run, *records = read_lines(path) or [None]
    return run, records


def reprint(
    parser: argparse.ArgumentParser, path: str, report: Callable[[dict, list[dict]], str]
) -> int:
    """``--reprint``: prints ``report`` of ``path``'s run and records; 0. Without the file,
    ``parser`` exits with an error."""
    run, records = read_records(path)
    if run is None:
        parser.error(f"nothing to reprint: no {path}")
    print(report(run, records), end="")
    return 0
