"""Worker processes that parse LETOR blocks in parallel.

Parsing holds the GIL for part of its work, so threads alone leave the main
loop (simulation, encoding, writing) competing with it; worker processes do
not. Each worker handles one block at a time, with pyarrow single-threaded.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import signal
import sys

from tfrecords_tools.letor_parser import warm_up_fast_path

__all__ = ["parse_workers", "default_workers"]


def default_workers() -> int:
    """One parsing process per core, at most 4 (memory grows with each)."""
    return max(1, min(4, os.cpu_count() or 1))


def _init_worker() -> None:
    # Ctrl-C reaches the main process, which tears the pool down.
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def _start_method() -> str:
    # fork is fast and keeps the warm-up; elsewhere (macOS, Windows) spawn is the
    # safe choice, and each worker then sets pyarrow up itself.
    return "fork" if sys.platform.startswith("linux") else "spawn"


@contextlib.contextmanager
def parse_workers(count: int):
    """A pool of ``count`` parsing processes, or none when ``count <= 1``.

    Enter it before starting any thread: on Linux the workers are forked, which
    is fast and safe only while the process has a single thread.

    Yields:
      ``(pool, count)``: the pool (``None`` for ``count <= 1``) and its size.
    """
    if count <= 1:
        yield None, 1
        return
    # Done once here, so that forked workers inherit pyarrow's one-time set-up
    # instead of each paying for it (a large share of a small conversion).
    warm_up_fast_path()

    context = multiprocessing.get_context(_start_method())
    pool = context.Pool(count, initializer=_init_worker)
    try:
        yield pool, count
    finally:
        pool.terminate()
        pool.join()
