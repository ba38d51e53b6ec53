"""What the benchmarks share: the machine's CPU, LETOR folds, a stand-in manifest, child runs.

* :func:`cpu_extensions`: the CPU's model and wide vector extensions, printed
  and recorded beside every speed.
* :func:`letor_folds`: a LETOR dataset's folds converted once under
  ``output/data`` through the experiment runner's conversion
  (``experiment_runner.convert_folds``).
* :func:`feature_manifest`: the manifest of ``d`` features (standardised, or
  with a quantile table) that the speed and memory benchmarks build their
  models from, with no data.
* :func:`run_child`: one configuration in a fresh Python process (its own peak
  resident memory, a capped address space) that prints one JSON line;
  :data:`CAPPED_STEPS` is the child's code that caps, times and measures.
* :func:`run_stage`: one stage of a benchmark in a process of its own, with
  its wall time, exit code and peak memory.

>>> record = run_stage(["true"], "/tmp/bench_support_doctest.log")
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

__all__ = [
    "CAPPED_STEPS",
    "MAX_LABEL",
    "cpu_extensions",
    "feature_manifest",
    "letor_folds",
    "read_json",
    "run_child",
    "run_stage",
]

MAX_LABEL = 4  # the released code's purchase label
TAIL_LINES = 20
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def cpu_extensions() -> str:
    """The CPU's model name and its wide vector extensions, from /proc/cpuinfo."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            text = f.read()
    except OSError:
        return "unknown CPU"
    fields = dict(
        line.split(":", 1) for line in text.splitlines()[:40] if ":" in line and line.strip()
    )
    flags = set(fields.get("flags\t\t", fields.get("flags", "")).split())
    wide = [x for x in ("avx2", "fma", "avx512f", "avx512_bf16", "amx_tile") if x in flags]
    name = fields.get("model name\t", fields.get("model name", "unknown CPU")).strip()
    return f"{name}; {' '.join(wide) or 'no AVX2'}"


def letor_folds(
    dataset: str,
    output: str,
    *,
    data_dir: str | None,
    seed: int,
    simulate: bool = True,
    clicks=None,
    progress: bool = True,
) -> dict[int, str]:
    """Fold number -> ``output/data/FoldN``: every fold of ``dataset``, converted once,
    its clicks simulated with ``seed`` and ``clicks`` (a ``ClickConfig``; ``None``: the
    default click model) unless not ``simulate``."""
    from pipelines.experiment_runner import convert_folds
    from tfrecords_tools.convert import ConvertConfig

    config = ConvertConfig(
        input=dataset,
        output=os.path.join(output, "data"),
        data_dir=data_dir,
        all_folds=True,
        simulate_clicks=simulate,
        seed=seed,
        overwrite=True,
        **({} if clicks is None else {"clicks": clicks}),
    )
    return convert_folds(config, progress=progress)


def feature_manifest(d: int, normalization: str = "standard", num_quantiles: int = 1000):
    """A ``Manifest`` of ``d`` features with labels up to the purchase label: what a
    model needs to be built without data.

    ``normalization`` is the method the model applies: ``standard`` (mean 0, std
    1) for the training benchmarks, whose features arrive normalised, or
    ``quantile`` (the converter's default) with a table of ``num_quantiles``
    knots per feature, each feature's quantiles of a log-normal sample rounded
    to two decimals (so that some knots repeat, as counts and scores do in
    LETOR data), for what serving pays.
    """
    import numpy as np

    from tfr_rankformer.inputs.manifest import Manifest

    zeros, ones = [0.0] * d, [1.0] * d
    table = [[0.0, 1.0]] * d
    if normalization == "quantile":
        sample = np.random.default_rng(0).lognormal(size=(d, 20 * num_quantiles))
        levels = np.linspace(0.0, 1.0, num_quantiles)
        table = np.round(np.quantile(sample, levels, axis=1).T, 2).tolist()
    content = {
        "num_features": d,
        "max_relevance": MAX_LABEL,
        "label_kind": "simulated_implicit",
        "parameters": {"clicks": {"purchase_label": MAX_LABEL}},
        "normalization": {
            "method": normalization,
            "standard": {"mean": zeros, "std": ones},
            "log1p": {"mean": zeros, "std": ones},
            "quantile": {"values": table},
            "min": zeros,
            "max": ones,
        },
    }
    return Manifest.coerce(content)


# The end of a child's code: its ``model`` (a compiled Keras model), ``inputs``,
# ``targets``, ``steps`` and ``spare`` (GiB) are defined before. It caps the address
# space at what the process holds plus ``spare``, times ``steps`` training steps after
# one of warm-up, and prints wall and CPU ms per step (``None`` out of memory), the
# peak resident memory and the resident memory after building, in MB.
CAPPED_STEPS = """
import json, resource, time
statm = open("/proc/self/statm").read().split()
built_mb = int(statm[1]) * resource.getpagesize() / 2**20
limit = int(statm[0]) * resource.getpagesize() + int(spare * 2**30)
resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
try:
    model.train_on_batch(inputs, targets)  # tracing and warm-up
    started, cpu = time.perf_counter(), time.process_time()
    for _ in range(steps):
        model.train_on_batch(inputs, targets)
    result = {
        "ms_per_step": 1000 * (time.perf_counter() - started) / steps,
        "cpu_ms_per_step": 1000 * (time.process_time() - cpu) / steps,
    }
except (tf.errors.ResourceExhaustedError, MemoryError):
    result = {"ms_per_step": None}
result["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
result["built_rss_mb"] = built_mb
print(json.dumps(result))
"""


def run_child(code: str, argv: list[str]) -> dict:
    """Runs ``python -c code *argv`` with the repository on the path; its last JSON line.

    A child killed, or out of memory where TensorFlow could not report it, gives
    ``ms_per_step`` and ``peak_rss_mb`` of ``None`` with its stderr's tail.
    """
    done = subprocess.run(
        [sys.executable, "-c", code, *argv],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": REPO, "TF_CPP_MIN_LOG_LEVEL": "2"},
        check=False,
    )
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    if not lines:
        return {"ms_per_step": None, "peak_rss_mb": None, "error": done.stderr[-300:]}
    return json.loads(lines[-1])


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
