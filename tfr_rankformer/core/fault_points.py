"""Named points at which a test kills the process as a crash would:
``TFR_RANKFORMER_KILL_AT=<point>[:<n>]`` at its ``n``-th pass (default: first).
"""

from __future__ import annotations

import os
import signal

ENV = "TFR_RANKFORMER_KILL_AT"
_passes: dict[str, int] = {}


def reached(point: str) -> None:
    """Kills this process if ``TFR_RANKFORMER_KILL_AT`` names ``point`` at this pass."""
    spec = os.environ.get(ENV)
    if not spec:
        return
    name, _, nth = spec.partition(":")
    if name != point:
        return
    _passes[point] = _passes.get(point, 0) + 1
    if _passes[point] >= int(nth or 1):
        os.kill(os.getpid(), signal.SIGKILL)
