"""One benchmark stage in a process of its own: its wall time, exit code and peak memory.

>>> record = run_stage(["true"], "/tmp/stage_runner_doctest.log")
>>> record["returncode"], "failure" in record
(0, False)
"""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import signal
import subprocess
import sys
import time

__all__ = ["run_stage", "read_json"]

TAIL_LINES = 20

# Runs a stage (argv: a JSON file for its result, then the command), reaps it with os.wait4
# and writes its exit code and peak RSS (KiB: its own and its waited-for descendants' largest).
LAUNCHER = """\
import json, os, sys
pid = os.fork()
if pid == 0:
    os.execvp(sys.argv[2], sys.argv[2:])
_, status, usage = os.wait4(pid, 0)
with open(sys.argv[1], "w") as f:
    json.dump({"returncode": os.waitstatus_to_exitcode(status), "peak_rss_kib": usage.ru_maxrss}, f)
"""


def run_stage(command: list[str], log: str, timeout: float | None = None) -> dict:
    """Runs ``command`` with its output in ``log``, through :data:`LAUNCHER`.

    A process's peak RSS as ``os.wait4`` reports it starts at its parent's own
    peak (Linux carries the parent's high-water mark over ``fork`` and
    ``exec``), so this process, which holds TensorFlow and the lists, does not
    start the stage itself: a bare Python does, reaps it and reports its figure.

    Args:
        command: The program and its arguments.
        log: File for its standard output and error (the command line first).
        timeout: Seconds after which the stage's processes are killed; ``None``: never.

    Returns:
        ``command``, ``log``, ``returncode``, ``wall_seconds``, ``peak_rss_bytes``
        and, when it failed, ``failure`` (why) and ``tail`` (the log's last lines).
    """
    os.makedirs(os.path.dirname(log), exist_ok=True)
    usage_file, timed_out = log + ".rusage.json", False
    with contextlib.suppress(FileNotFoundError):
        os.remove(usage_file)
    with open(log, "w", encoding="utf-8") as out:
        out.write(f"$ {shlex.join(command)}\n")
        out.flush()
        started = time.perf_counter()
        launcher = [sys.executable, "-c", LAUNCHER, usage_file, *command]
        child = subprocess.Popen(launcher, stdout=out, stderr=out, start_new_session=True)
        try:
            child.wait(timeout=timeout)
        except BaseException as error:  # the time limit, or Ctrl-C: end the stage's processes
            with contextlib.suppress(ProcessLookupError):
                os.killpg(child.pid, signal.SIGKILL)
            child.wait()
            timed_out = isinstance(error, subprocess.TimeoutExpired)
            if not timed_out:
                raise
        wall = time.perf_counter() - started
    usage = read_json(usage_file) or {}  # none when the launcher was killed
    with contextlib.suppress(FileNotFoundError):
        os.remove(usage_file)
    code, peak = usage.get("returncode", child.returncode), usage.get("peak_rss_kib")
    record = {"command": shlex.join(command), "log": log, "returncode": code, "wall_seconds": wall}
    record["peak_rss_bytes"] = None if peak is None else peak * 1024
    if timed_out:
        record["failure"] = f"timed out after {timeout:.0f} s"
    elif code < 0:
        name = signal.Signals(-code).name
        killed = "does not fit in memory" if name == "SIGKILL" else "killed"
        record["failure"] = f"{killed} (killed by {name})"
    elif code:
        record["failure"] = f"exit code {code}"
    if code:
        with open(log, encoding="utf-8", errors="replace") as f:
            record["tail"] = "".join(f.readlines()[-TAIL_LINES:])
    return record


def read_json(path: str) -> dict | None:
    """The JSON object in ``path``, or ``None`` when there is no such file."""
    if not os.path.isfile(path):
        return None
    with open(path, encoding="utf-8") as f:
        return json.load(f)
