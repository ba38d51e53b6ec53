"""What the benchmarks share: their parsers, the CPU, LETOR folds, a stand-in manifest, child
runs and records (JSON lines: a line per speed run, or the run's settings then a line per
stage or fold, from which ``--reprint`` prints a table again)."""

from __future__ import annotations

import argparse
import contextlib
import csv
import datetime
import json
import math
import os
import shlex
import signal
import subprocess
import sys
import tempfile
import time

from tfr_rankformer.core.atomic_files import atomic_write
from tfr_rankformer.core.run_layout import HISTORY_NAME, read_json

MAX_LABEL = 4  # the released code's purchase label
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


class HelpFormatter(argparse.ArgumentDefaultsHelpFormatter):
    """Shows an option's default after its help, unless it is None or a switch's False."""

    def _get_help_string(self, action) -> str:
        if action.default is None or action.default is False:
            return action.help
        return super()._get_help_string(action)


def parser(doc: str, **kwargs) -> argparse.ArgumentParser:
    """A benchmark's parser: the first paragraph of ``doc`` and each option's default."""
    return argparse.ArgumentParser(
        description=doc.split("\n\n")[0], formatter_class=HelpFormatter, **kwargs
    )


def plus_minus(mean: float, se: float, spec: str = ".2f") -> str:
    """``mean ± se``, or the mean alone when ``se`` is NaN."""
    return format(mean, spec) + ("" if math.isnan(se) else f" ± {se:.2f}")


def names_of(allowed):
    """An option's type: comma-separated names, each one of ``allowed``."""

    def parse(text: str) -> list[str]:
        names = [n for n in text.split(",") if n]
        bad = sorted(set(names) - set(allowed))
        if bad or not names:
            given = ",".join(bad) or "none given"
            raise argparse.ArgumentTypeError(f"{given}; choose from {', '.join(allowed)}")
        return names

    return parse


def run_line(module: str, argv: list[str] | None) -> dict:
    """The command (as typed), date and CPU that start a record's run line."""
    words = sys.argv[1:] if argv is None else argv
    return {
        "command": shlex.join(["python", "-m", f"pipelines.benchmarks.{module}", *words]),
        "date": datetime.datetime.now().strftime("%Y-%m-%d %H:%M"),
        "cpu": cpu_extensions(),
    }


def cpu_line() -> str:
    """``CPU: ...; N CPUs``, as the speed benchmarks print it."""
    return f"CPU: {cpu_extensions()}; {os.cpu_count()} CPUs"


def cpu_extensions() -> str:
    """The CPU's model name and its wide vector extensions, from /proc/cpuinfo."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            text = f.read()
    except OSError:
        return "unknown CPU"
    fields = {
        k.strip(): v.strip() for k, _, v in (x.partition(":") for x in text.splitlines()[:40])
    }
    flags = set(fields.get("flags", "").split())
    wide = [x for x in ("avx2", "fma", "avx512f", "avx512_bf16", "amx_tile") if x in flags]
    return f"{fields.get('model name', 'unknown CPU')}; {' '.join(wide) or 'no AVX2'}"


def feature_manifest(d: int, normalization: str = "standard", num_quantiles: int = 1000):
    """A ``Manifest`` of ``d`` features and no data; quantile knots repeat, as in LETOR."""
    import numpy as np

    from tfr_rankformer.inputs.manifest import Manifest

    zeros, ones = [0.0] * d, [1.0] * d
    table = [[0.0, 1.0]] * d
    if normalization == "quantile":
        sample = np.random.default_rng(0).lognormal(size=(d, 20 * num_quantiles))
        levels = np.linspace(0.0, 1.0, num_quantiles)
        table = np.round(np.quantile(sample, levels, axis=1).T, 2).tolist()
    stats = {"mean": zeros, "std": ones}
    found = dict(standard=stats, log1p=stats, quantile={"values": table}, min=zeros, max=ones)
    content = dict(num_features=d, max_relevance=MAX_LABEL, label_kind="simulated_implicit")
    content["parameters"] = {"clicks": {"purchase_label": MAX_LABEL}}
    return Manifest.coerce(dict(content, normalization=dict(found, method=normalization)))


def training_batch(model: str, d: int, *, batch: int, items: int, precision="float32", **config):
    """``(compiled model, inputs, targets)``: ``model`` and one batch of normalised lists."""
    import numpy as np
    import tensorflow as tf

    from tfr_rankformer.training.precision import precision_policy
    from tfr_rankformer.training.train_config import TrainConfig
    from tfr_rankformer.training.training_setup import build_compiled_model

    xla = config.pop("xla", False)
    settings = TrainConfig(model=model, data="-", model_dir="-", **config)
    with precision_policy(precision):
        _, compiled = build_compiled_model(
            settings, feature_manifest(d), steps_per_epoch=100, xla=xla
        )
    rng = np.random.default_rng(0)
    labels = rng.integers(0, MAX_LABEL + 1, (batch, items)).astype(np.float32)
    features = tf.constant(rng.normal(size=(batch, items, d)).astype(np.float32))
    inputs = {"features": features, "mask": tf.ones((batch, items), tf.bool)}
    targets = {"scores": tf.constant(labels)}
    if settings.uses_list_head:
        targets["list_quality"] = tf.constant(labels.max(axis=1, keepdims=True))
    return compiled, inputs, targets


# The end of a child's code after its ``model``, ``inputs``, ``targets``, ``steps`` and ``spare``
# (GiB): ms per ``steps`` steps within ``spare`` more address space (``None``: out of memory).
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
    """The last JSON line of ``python -c code *argv`` (else ``None`` figures, stderr's tail)."""
    env = {**os.environ, "PYTHONPATH": REPO, "TF_CPP_MIN_LOG_LEVEL": "2"}
    done = subprocess.run(
        [sys.executable, "-c", code, *argv], capture_output=True, text=True, env=env
    )
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    if not lines:
        return {"ms_per_step": None, "peak_rss_mb": None, "error": done.stderr[-300:]}
    return json.loads(lines[-1])


# argv: a JSON file for the stage's exit code and peak RSS (KiB, as os.wait4 gives it), the command.
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
    """``command``'s wall time, exit code, peak RSS and any failure, its output in ``log``.
    A bare Python (:data:`LAUNCHER`) starts it: Linux carries a parent's peak RSS over exec."""
    os.makedirs(os.path.dirname(log), exist_ok=True)
    timed_out = False
    with tempfile.TemporaryDirectory() as scratch, open(log, "w", encoding="utf-8") as out:
        usage_file = os.path.join(scratch, "rusage.json")
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
        usage = read_json(usage_file)  # empty when the launcher was killed
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
            record["tail"] = "".join(f.readlines()[-20:])
    return record


def epoch_rates(run_dir: str) -> list[float]:
    """The training lists/s of each epoch in a run's history (none without one)."""
    path = os.path.join(run_dir, HISTORY_NAME)
    if not os.path.isfile(path):
        return []
    with open(path, encoding="utf-8", newline="") as f:
        rows = csv.DictReader(f)
        return [float(row["lists_per_sec"]) for row in rows if row.get("lists_per_sec")]


# === Records ===


def write_records(path: str, run: dict, records: list[dict], *, kind: str) -> None:
    """The run's settings (``{kind: "run", ...}``), then one line per record."""
    with atomic_write(path) as f:
        f.writelines(json.dumps(record) + "\n" for record in [{kind: "run", **run}, *records])


def append_line(path: str, line: dict) -> None:
    """Appends ``line`` to the JSON-lines file ``path`` (made if missing)."""
    with open(path, "a", encoding="utf-8") as f:
        f.write(json.dumps(line, sort_keys=True) + "\n")


def append_record(path: str, kind: str, **fields) -> None:
    """Appends a speed record's line: its ``kind``, the CPU and ``fields``."""
    append_line(path, {"kind": kind, "cpu": cpu_extensions(), **fields})


def read_lines(path: str) -> list[dict]:
    """The JSON objects of ``path``, one a line; a bad line raises ``ValueError`` naming it."""
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


def reprint(p: argparse.ArgumentParser, path: str, report) -> int:
    """``--reprint``: prints ``report(run, records)`` of ``path``; 0, or a parser error."""
    run, records = read_records(path)
    if run is None:
        p.error(f"nothing to reprint: no {path}")
    print(report(run, records), end="")
    return 0
