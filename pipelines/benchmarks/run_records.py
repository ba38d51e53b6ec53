"""A benchmark's records: one JSON object a line, the run's settings first.

``web30k_scale`` and ``cranfield_rerank`` keep their figures this way, so a
docs table reprints from the file (``--reprint``) without rerunning anything.
"""

from __future__ import annotations

import argparse
import json
import os
from collections.abc import Callable

__all__ = ["write_records", "read_records", "reprint"]


def write_records(path: str, run: dict, records: list[dict], *, kind: str) -> None:
    """The run's settings (``{kind: "run", ...}``), then one object per record, written
    under a temporary name and renamed."""
    with open(path + ".partial", "w", encoding="utf-8") as f:
        for record in [{kind: "run", **run}, *records]:
            f.write(json.dumps(record) + "\n")
    os.replace(path + ".partial", path)


def read_records(path: str) -> tuple[dict | None, list[dict]]:
    """The run's settings and its records of ``path`` (``None, []`` if it does not exist)."""
    if not os.path.isfile(path):
        return None, []
    with open(path, encoding="utf-8") as f:
        run, *records = [json.loads(line) for line in f if line.strip()] or [None]
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
