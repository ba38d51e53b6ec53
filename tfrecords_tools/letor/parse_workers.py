"""Worker processes that parse LETOR blocks: parsing holds the GIL, so threads would not help."""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import signal
import sys
import threading

from tfrecords_tools.letor.letor_fast_path import warm_up_fast_path


def default_workers() -> int:
    """One parsing process per core, at most 4 (memory grows with each)."""
    return max(1, min(4, os.cpu_count() or 1))


def _init_worker() -> None:
    # Ctrl-C reaches the main process, which tears the pool down.
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def _start_method() -> str:
    # fork keeps the warm-up, but a worker forked while another thread holds a lock
    # can crash, and the pool then waits forever: a process running Python threads or
    # TensorFlow (whose native threads Python does not count) uses forkserver.
    if not sys.platform.startswith("linux"):
        return "spawn"
    if threading.active_count() > 1 or "tensorflow" in sys.modules:
        return "forkserver"
    return "fork"


@contextlib.contextmanager
def parse_workers(count: int):
    """Yields ``(pool, count)``: a pool of ``count`` parsing processes, or ``(None, 1)``
    when ``count <= 1``."""
    if count <= 1:
        yield None, 1
        return
    method = _start_method()
    if method == "fork":
        warm_up_fast_path()
    context = multiprocessing.get_context(method)
    pool = context.Pool(count, initializer=_init_worker)
    try:
        yield pool, count
    finally:
        pool.terminate()
        pool.join()
