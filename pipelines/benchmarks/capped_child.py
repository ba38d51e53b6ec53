"""Runs one benchmark configuration in its own Python process and reads its JSON line.

The memory benchmarks time each configuration in a fresh process (capped
address space, peak RSS of that process alone); the child prints one JSON
object, and a child killed or out of memory where TensorFlow could not report
it gives ``ms_per_step`` and ``peak_rss_mb`` of ``None`` with its stderr's tail.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

__all__ = ["run_child"]


def run_child(code: str, argv: list[str]) -> dict:
    """Runs ``python -c code *argv`` with the repository on the path; its last JSON line."""
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    done = subprocess.run(
        [sys.executable, "-c", code, *argv],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": root, "TF_CPP_MIN_LOG_LEVEL": "2"},
        check=False,
    )
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    if not lines:
        return {"ms_per_step": None, "peak_rss_mb": None, "error": done.stderr[-300:]}
    return json.loads(lines[-1])
