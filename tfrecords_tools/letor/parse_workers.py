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
import threading

from tfrecords_tools.letor.letor_parser import warm_up_fast_path

__all__ = ["parse_workers", "default_workers"]


def default_workers() -> int:
    """One parsing process per core, at most 4 (memory grows with each)."""
    return max(1, min(4, os.cpu_count() or 1))


def _init_worker() -> None:
    # Ctrl-C reaches the main process, which tears the pool down.
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def _start_method() -> str:
    # fork is fast and keeps the warm-up, but a worker forked while another
    # thread holds a lock can crash (seen with TensorFlow imported), and a pool
    # whose worker dies in a task waits for it forever. So a process running
    # Python threads or TensorFlow (whose native threads Python does not count;
    # pyarrow's own are fork-safe) uses forkserver: workers forked from a fresh
    # server, each setting pyarrow up itself, as under spawn elsewhere.
    if not sys.platform.startswith("linux"):
        return "spawn"
    if threading.active_count() > 1 or "tensorflow" in sys.modules:
        return "forkserver"
    return "fork"


@contextlib.contextmanager
def parse_workers(count: int):
    """A pool of ``count`` parsing processes, or none when ``count <= 1``.

    On Linux the workers are forked while the process runs no other Python
    thread and no TensorFlow (fast: they inherit the warm-up), and come from a
    fork server otherwise, where forking could crash one and hang the pool.

    Yields:
      ``(pool, count)``: the pool (``None`` for ``count <= 1``) and its size.
    """
    if count <= 1:
        yield None, 1
        return
    method = _start_method()
    if method == "fork":
        # Done once here, so that forked workers inherit pyarrow's one-time set-up
        # instead of each paying for it (a large share of a small conversion).
        warm_up_fast_path()
    context = multiprocessing.get_context(method)
    pool = context.Pool(count, initializer=_init_worker)
    try:
        yield pool, count
    finally:
        pool.terminate()
        pool.join()
