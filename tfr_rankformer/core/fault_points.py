"""Named points at which a test can kill the process outright, as a crash would.

The fault-injection tests (``tests/test_fault_injection.py``) set
``TFR_RANKFORMER_KILL_AT=<point>[:<n>]`` for one command: the process sends
itself SIGKILL the ``n``-th time (default: first) it reaches ``<point>``, then
the test reruns the command and checks what it finds. Unset, as in every
other run, :func:`reached` only reads the environment.

The points: ``convert.block`` (a LETOR block parsed and its lists written to
part files), ``convert.shard`` (a split's parts being joined into shards),
``train.batch`` (a training step ended), ``train.checkpoint`` (the best
weights saved, the epoch's backup not yet), ``export.saved`` (a SavedModel
written under its temporary name, not yet renamed into place).
"""

from __future__ import annotations

import os
import signal

__all__ = ["ENV", "POINTS", "reached"]

ENV = "TFR_RANKFORMER_KILL_AT"
POINTS = ("convert.block", "convert.shard", "train.batch", "train.checkpoint", "export.saved")
_passes: dict[str, int] = {}


def reached(point: str) -> None:
    """Kills this process if ``TFR_RANKFORMER_KILL_AT`` names ``point`` and this is the pass."""
    spec = os.environ.get(ENV)
    if not spec:
        return
    name, _, nth = spec.partition(":")
    if name != point:
        return
    _passes[point] = _passes.get(point, 0) + 1
    if _passes[point] >= int(nth or 1):
        os.kill(os.getpid(), signal.SIGKILL)
