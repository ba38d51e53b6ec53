"""Training speed of our models against the RankFormer authors' released code, in one run.

For the RankFormer (alpha > 0), the transformer (alpha = 0, the encoder
alone) and the MLP, with the paper's settings (3 layers, 1 head, feed-forward
512, heads of 128, dropout 0.25), it times full training steps (forward, the
losses, backward, AdamW) on one in-memory batch of random lists (2048 lists of
16 items, 46 features, labels 0 .. 4 as the released click simulation's; the
input pipeline is left out on both sides). Where the authors' code and a
Python with torch are given (``--official-dir`` and ``--official-python``, or
``$RANKFORMER_OFFICIAL_DIR`` and ``$RANKFORMER_OFFICIAL_PYTHON``), it runs
their model in a subprocess (``reference_step_timer.py``) and times it in
alternating rounds with ours, so that load from other processes hits both
alike: each round times ``--steps`` steps of each side, the order swapping
every round, and only one side computes at a time. It prints the CPU's vector
extensions, each round's lists/s, and per model the median round of each side
with their ratio. ``--compare-plain`` adds our step traced without the
XLA-compiled pieces (``tfr_rankformer.model.compiled_ops``) to the rounds,
``--compare-xla`` our step compiled whole with XLA. ``--precision``, repeated,
times our step in each compute precision given (``--precision float32
--precision bf16``), each one more side of the same rounds. ``--peak`` also times
TensorFlow's float32 matmul alone on the step's own shapes and on a square
2048 x 2048 product, in the same run, and prints how many lists/s a step
could reach if every matmul ran at that best rate: a ceiling on any float32
implementation of the same arithmetic on this machine, and so on its ratio to
the authors' code. ``--record FILE`` appends each model and feature count's
medians, CPU and peak to a JSON-lines record (``speed_records``).

The released code's training step holds over 13 GB at batch 2048 (1.2 GB at
512): on a smaller machine, lower ``--batch-size`` for both sides, or give
theirs its own with ``--official-batch-size`` (each round then runs as many
of their steps as make the same number of lists as ours), e.g. our default
2048 lists against their fastest, 128.

Run: ``python -m pipelines.benchmarks.train_bench --official-dir DIR
--official-python PYTHON``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

import numpy as np
import tensorflow as tf

from pipelines.benchmarks.bench_support import MAX_LABEL, cpu_extensions, feature_manifest
from pipelines.benchmarks.run_records import append_line
from pipelines.benchmarks.speed_records import step_line
from pipelines.flag_table import add_flag
from tfr_rankformer.core import model_families
from tfr_rankformer.model import compiled_ops
from tfr_rankformer.model.models import ModelConfig
from tfr_rankformer.training.precision import precision_policy
from tfr_rankformer.training.train_config import TrainConfig
from tfr_rankformer.training.training_setup import build_compiled_model

MODELS = ("rankformer", "transformer", "mlp")
TIMER = os.path.join(
    os.path.dirname(os.path.abspath(__file__)), "reference", "reference_step_timer.py"
)
SETUP = """\
The authors' released code is not set up, so only our side is timed. To compare:
  git clone https://github.com/maartenbuyl/rankformer rankformer-official
  python3.11 -m venv ref-venv && ref-venv/bin/pip install torch
then pass --official-dir rankformer-official --official-python ref-venv/bin/python
(or set RANKFORMER_OFFICIAL_DIR and RANKFORMER_OFFICIAL_PYTHON)."""


def forward_flops(model: str, d: int, items: int, arch: ModelConfig) -> float:
    """Multiply-adds x 2 of one list's forward pass (matmuls only)."""
    spec = model_families.get_model(model)
    if not spec.attention:  # pointwise: the MLP's layers alone
        widths = [d, *arch.mlp_units, 1]
        return 2.0 * items * sum(a * b for a, b in zip(widths[:-1], widths[1:]))
    tokens = items + 1  # with [CLS]
    per_token = 4 * d * d + 2 * d * arch.ff_dim  # Q, K, V, output; feed-forward
    attention = 2 * tokens * d  # scores and weighted sum
    encoder = arch.num_layers * tokens * (per_token + attention)
    # Score head: [z_i, z_CLS] W = z_i W_i + z_CLS W_c, the second once per list.
    heads = items * (d * arch.head_hidden + arch.head_hidden) + d * arch.head_hidden
    if spec.has_list_head:  # timed with its list head (alpha > 0)
        heads += d * arch.head_hidden + arch.head_hidden * 2
    return 2.0 * (encoder + heads)


def matmul_peak(d: int, ff_dim: int, rows: int, repeats: int = 5) -> float:
    """The best GFLOP/s of one float32 ``tf.linalg.matmul`` here, over the step's
    shapes (``[rows, d] x [d, d]``, ``[rows, d] x [d, ff_dim]``,
    ``[rows, ff_dim] x [ff_dim, d]``) and a square 2048 x 2048 product; each
    shape's fastest of ``repeats`` calls after a warm-up call."""
    best = 0.0
    for m, k, n in ((rows, d, d), (rows, d, ff_dim), (rows, ff_dim, d), (2048, 2048, 2048)):
        a = tf.random.stateless_normal((m, k), seed=(0, 1))
        b = tf.random.stateless_normal((k, n), seed=(0, 2))
        tf.linalg.matmul(a, b)  # CPU ops run synchronously in eager mode
        for _ in range(repeats):
            started = time.perf_counter()
            tf.linalg.matmul(a, b)
            best = max(best, 2.0 * m * k * n / (time.perf_counter() - started) / 1e9)
    return best


def prepare(
    model: str, d: int, *, batch: int, items: int, xla: bool, precision="float32", seed: int = 0
):
    """A compiled, warmed-up training step of ``model`` on one in-memory batch,
    built in ``precision`` (see ``training.precision``).

    Returns ``(step, architecture)``; ``step()`` runs one step (forward, losses,
    backward, AdamW) and waits for it.
    """
    config = TrainConfig(model=model, data="-", model_dir="-")
    # The ranker's step is what training runs (features arrive normalised).
    with precision_policy(precision):
        _, compiled = build_compiled_model(
            config, feature_manifest(d), steps_per_epoch=100, xla=xla
        )
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, MAX_LABEL + 1, (batch, items)).astype(np.float32)
    inputs = {
        "features": tf.constant(rng.normal(size=(batch, items, d)).astype(np.float32)),
        "mask": tf.ones((batch, items), tf.bool),
    }
    targets = {"scores": tf.constant(labels)}
    if config.uses_list_head:
        targets["list_quality"] = tf.constant(labels.max(axis=1, keepdims=True))
    for _ in range(2):  # tracing and warm-up
        compiled.train_on_batch(inputs, targets)

    def step():
        compiled.train_on_batch(inputs, targets)

    return step, config.architecture


def official_setup(args) -> tuple[str, str] | None:
    """``(official_dir, python)`` when the released code can be timed, else ``None``."""
    directory = args.official_dir or os.environ.get("RANKFORMER_OFFICIAL_DIR")
    python = args.official_python or os.environ.get("RANKFORMER_OFFICIAL_PYTHON")
    if not directory or not os.path.isfile(os.path.join(directory, "model.py")) or not python:
        return None
    check = subprocess.run([python, "-c", "import torch"], capture_output=True, text=True)
    if check.returncode != 0:
        print(f"{python} cannot import torch:\n{check.stderr[-300:]}")
        return None
    return directory, python


class OfficialTimer:
    """The released model's training step in a ``reference_step_timer.py`` subprocess."""

    def __init__(self, setup: tuple[str, str], model: str, d: int, *, batch, items, threads):
        directory, python = setup
        command = [python, TIMER, "--official-dir", directory, "--model", model]
        command += ["--features", str(d), "--batch-size", str(batch), "--items", str(items)]
        command += ["--max-label", str(MAX_LABEL), "--threads", str(threads)]
        self._process = subprocess.Popen(
            command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
        )
        self.ready = self._reply()

    def _reply(self) -> dict:
        line = self._process.stdout.readline()
        if not line:
            raise RuntimeError(f"the released code's timer ended (exit {self._process.wait()})")
        return json.loads(line)

    def seconds(self, steps: int) -> list[float]:
        self._process.stdin.write(f"STEPS {steps}\n")
        self._process.stdin.flush()
        return self._reply()["seconds"]

    def close(self) -> None:
        if self._process.poll() is None:
            self._process.stdin.write("QUIT\n")
            self._process.stdin.close()
            self._process.wait(timeout=60)


def _our_seconds(step, steps: int) -> list[float]:
    durations = []
    for _ in range(steps):
        started = time.perf_counter()
        step()
        durations.append(time.perf_counter() - started)
    return durations


def our_side(precision: str, first: str) -> str:
    """The name of our side in ``precision``: ``ours`` for the first precision asked."""
    return "ours" if precision == first else f"ours, {precision}"


def _our_steps(model: str, d: int, args) -> dict:
    """``{side: step}``: ours in each ``--precision``, and if asked ours compiled whole
    with XLA and ours traced without the compiled pieces (in the first precision)."""
    kwargs = dict(batch=args.batch_size, items=args.items, xla=args.xla)
    sides = {}
    for precision in args.precision:
        side = our_side(precision, args.precision[0])
        sides[side] = prepare(model, d, **dict(kwargs, precision=precision))[0]
    kwargs["precision"] = args.precision[0]
    if args.compare_xla and not args.xla:
        sides["ours, XLA step"] = prepare(model, d, **dict(kwargs, xla=True))[0]
    if args.compare_plain:
        previous = os.environ.get(compiled_ops.ENV_SWITCH)
        os.environ[compiled_ops.ENV_SWITCH] = "0"
        try:
            sides["ours, plain ops"] = prepare(model, d, **kwargs)[0]
        finally:
            if previous is None:
                os.environ.pop(compiled_ops.ENV_SWITCH)
            else:
                os.environ[compiled_ops.ENV_SWITCH] = previous
    return sides


def _their_batch(args) -> int:
    """The released code's lists per step: ``--official-batch-size``, else ours."""
    return args.official_batch_size or args.batch_size


def compare(model: str, d: int, args, setup) -> dict:
    """Each side's lists/s per round, timed in alternation; prints every round."""
    timers = _our_steps(model, d, args)
    official = None
    if setup is not None:
        official = OfficialTimer(
            setup,
            model,
            d,
            batch=_their_batch(args),
            items=args.items,
            threads=args.official_threads,
        )
        timers["authors"] = official.seconds
    rates = {side: [] for side in timers}
    try:
        for i in range(args.rounds):
            order = list(timers) if i % 2 == 0 else list(reversed(timers))
            for side in order:
                timer = timers[side]
                if side == "authors":
                    batch = _their_batch(args)
                    durations = timer(max(1, round(args.steps * args.batch_size / batch)))
                else:
                    batch, durations = args.batch_size, _our_seconds(timer, args.steps)
                rates[side].append(batch * len(durations) / sum(durations))
            shown = ", ".join(f"{side} {rates[side][-1]:,.0f}" for side in timers)
            print(f"{model:<12} {d:>4} round {i + 1}: {shown} lists/s", flush=True)
    finally:
        if official is not None:
            official.close()
    return rates


def build_parser() -> argparse.ArgumentParser:
    """The benchmark's options."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_flag(parser, "batch_size", default=2048, help=None)
    add_flag(parser, "items")
    add_flag(parser, "features", default="46", help="comma-separated feature counts", type=None)
    add_flag(parser, "models", default=",".join(MODELS))
    add_flag(parser, "steps", help="steps per side and round")
    add_flag(
        parser,
        "precision",
        action="append",
        help="our step's compute precision (see tfr-train --precision); repeated, each "
        "is one more side of the alternating rounds, named 'ours' for the first and "
        "'ours, PRECISION' for the others. Default: float32",
    )
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--xla", action="store_true", help="compile our whole step with XLA")
    parser.add_argument(
        "--compare-plain",
        action="store_true",
        help="also time our step without the XLA-compiled pieces (compiled_ops)",
    )
    parser.add_argument(
        "--compare-xla",
        action="store_true",
        help="also time our step compiled whole with XLA (as --xla does)",
    )
    parser.add_argument(
        "--peak",
        action="store_true",
        help="also time float32 matmuls alone and print the lists/s they would allow",
    )
    add_flag(parser, "official_dir", help="checkout of github.com/maartenbuyl/rankformer")
    add_flag(parser, "official_python")
    parser.add_argument(
        "--official-batch-size",
        type=int,
        help="the released code's lists per step (default: --batch-size)",
    )
    add_flag(
        parser,
        "official_threads",
        default=os.cpu_count(),
        help="torch's intra-op threads (default: the CPUs, as TensorFlow's)",
    )
    add_flag(
        parser,
        "record",
        help="append one JSON line per model and feature count (CPU, oneDNN cap, medians, "
        "peak) to FILE; python -m pipelines.benchmarks.speed_records FILE prints them",
    )
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    args.precision = list(dict.fromkeys(args.precision or ["float32"]))
    models = [m for m in args.models.split(",") if m]
    unknown = sorted(set(models) - set(MODELS))
    if unknown:
        parser.error(f"unknown model(s) {unknown}; choose from {list(MODELS)}")
    setup = official_setup(args)
    if setup is None:
        print(SETUP)
    print(f"CPU: {cpu_extensions()}; {os.cpu_count()} CPUs")
    print(
        f"batch {args.batch_size} lists of {args.items} items"
        + (f" (theirs {args.official_batch_size})" if args.official_batch_size else "")
        + f"; TensorFlow {tf.__version__}; "
        f"{args.rounds} rounds of {args.steps} steps per side; XLA {'on' if args.xla else 'off'}; "
        f"precision {', '.join(args.precision)}"
    )
    summary = []
    for d in (int(x) for x in args.features.split(",")):
        for model in models:
            rates = compare(model, d, args, setup)
            medians = {side: statistics.median(r) for side, r in rates.items()}
            summary.append((model, d, medians))
    print_summary(summary, args)
    return 0


def print_summary(summary: list, args) -> None:
    """Each model and feature count's median round, its ratios and our matmul rate."""
    print("\nmedian round, lists/s (ratio: ours / authors; our matmul GFLOP/s)")
    for model, d, medians in summary:
        shown = ", ".join(f"{side} {rate:,.0f}" for side, rate in medians.items())
        if "authors" in medians:
            shown += f"; ratio {medians['ours'] / medians['authors']:.2f}"
        for precision in args.precision[1:]:
            side = our_side(precision, args.precision[0])
            shown += f"; {precision} / {args.precision[0]} {medians[side] / medians['ours']:.2f}"
        arch = TrainConfig(model=model, data="-", model_dir="-").architecture
        per_list = 3 * forward_flops(model, d, args.items, arch)  # forward, then 2x backward
        print(f"{model:<12} {d:>4}: {shown}; {per_list * medians['ours'] / 1e9:.1f} GFLOP/s")
        peak = print_ceiling(d, arch, per_list, medians, args) if args.peak else None
        if args.record:
            line = step_line(
                model, d, medians, args, cpu=cpu_extensions(), per_list=per_list, peak=peak
            )
            append_line(args.record, line)


def print_ceiling(d: int, arch: ModelConfig, per_list: float, medians: dict, args) -> float:
    """Prints the matmul peak measured now, our share of it, and the lists/s (and the
    ratio to the authors' code) a step doing only matmuls at that peak would reach;
    returns the peak (GFLOP/s)."""
    rows = args.batch_size * (args.items + 1)
    peak = matmul_peak(d, arch.ff_dim, rows)
    ceiling = peak * 1e9 / per_list
    line = (
        f"{'':<12} {d:>4}: float32 matmul peak {peak:.1f} GFLOP/s; ours at "
        f"{per_list * medians['ours'] / 1e9 / peak:.0%} of it; at the peak {ceiling:,.0f} lists/s"
    )
    if "authors" in medians:
        line += f", {ceiling / medians['authors']:.2f}x the authors'"
    print(line)
    return peak


if __name__ == "__main__":
    sys.exit(main())
