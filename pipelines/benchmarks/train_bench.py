"""Training speed of our models against the RankFormer authors' released code, in one run.

Full training steps on one in-memory batch, ours in rounds alternating with the released
code's (``reference_runner.py --time-steps``) so that load hits both alike.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from unittest import mock

import tensorflow as tf

from pipelines.benchmarks import bench_support as support
from pipelines.benchmarks.reference import parity_sources
from pipelines.benchmarks.reference.parity_sources import official_setup
from tfr_rankformer.model import compiled_ops
from tfr_rankformer.model.model_config import ModelConfig
from tfr_rankformer.training.train_config import TrainConfig

MODELS = ("rankformer", "transformer", "mlp")


def forward_flops(model: str, d: int, items: int, arch: ModelConfig) -> float:
    """Multiply-adds x 2 of one list's forward pass (matmuls only)."""
    if model == "mlp":  # pointwise: the MLP's layers alone
        widths = [d, *arch.mlp_units, 1]
        return 2.0 * items * sum(a * b for a, b in zip(widths[:-1], widths[1:]))
    tokens = items + 1  # with [CLS]
    per_token = 4 * d * d + 2 * d * arch.ff_dim  # Q, K, V, output; feed-forward
    attention = 2 * tokens * d  # scores and weighted sum
    encoder = arch.num_layers * tokens * (per_token + attention)
    # Score head: [z_i, z_CLS] W = z_i W_i + z_CLS W_c, the second once per list.
    heads = items * (d * arch.head_hidden + arch.head_hidden) + d * arch.head_hidden
    if model == "rankformer":  # timed with its list head (alpha > 0)
        heads += d * arch.head_hidden + arch.head_hidden * 2
    return 2.0 * (encoder + heads)


def matmul_peak(d: int, ff_dim: int, rows: int, repeats: int = 5) -> float:
    """The best GFLOP/s of a float32 matmul of the step's shapes or 2048 x 2048 here."""
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


def prepare(model: str, d: int, *, batch: int, items: int, xla: bool, precision="float32"):
    """``seconds(n)``: the durations of ``n`` warmed-up training steps on one in-memory batch."""
    sizes = dict(batch=batch, items=items, xla=xla, precision=precision)
    compiled, inputs, targets = support.training_batch(model, d, **sizes)
    for _ in range(2):  # tracing and warm-up
        compiled.train_on_batch(inputs, targets)

    def seconds(steps: int) -> list[float]:
        durations = []
        for _ in range(steps):
            started = time.perf_counter()
            compiled.train_on_batch(inputs, targets)
            durations.append(time.perf_counter() - started)
        return durations

    return seconds


class OfficialTimer:
    """The released model's training step in a ``reference_runner.py --time-steps`` process."""

    def __init__(self, setup: tuple[str, str], model: str, d: int, *, batch, items, threads):
        directory, python = setup
        command = [python, parity_sources.RUNNER, "--official-dir", directory, "--time-steps"]
        command += ["--models", model, "--features", str(d), "--batch-size", str(batch)]
        command += ["--items", str(items)]
        command += ["--max-label", str(support.MAX_LABEL), "--threads", str(threads)]
        self._process = subprocess.Popen(
            command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
        )
        self._reply()  # ready

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


def our_steps(model: str, d: int, args) -> dict:
    """``{side: seconds}``: ours in each ``--precision``, and if asked without compiled_ops."""
    kwargs = dict(batch=args.batch_size, items=args.items, xla=args.xla)
    first = args.precision[0]
    names = {p: "ours" if p == first else f"ours, {p}" for p in args.precision}
    sides = {names[p]: prepare(model, d, **kwargs, precision=p) for p in args.precision}
    if args.compare_plain:
        with mock.patch.dict(os.environ, {compiled_ops.ENV_SWITCH: "0"}):
            sides["ours, plain ops"] = prepare(model, d, **kwargs, precision=first)
    return sides


def compare(model: str, d: int, args, setup) -> dict:
    """Each side's lists/s per round, the order swapping every round; prints every round."""
    timers, official = our_steps(model, d, args), None
    batches = dict.fromkeys(timers, args.batch_size)
    if setup is not None:
        batches["authors"] = batch = args.official_batch_size or args.batch_size
        sizes = dict(batch=batch, items=args.items, threads=args.official_threads)
        official = OfficialTimer(setup, model, d, **sizes)
        timers["authors"] = official.seconds
    rates = {side: [] for side in timers}
    try:
        for i in range(args.rounds):
            for side in list(timers) if i % 2 == 0 else list(reversed(timers)):
                # The released code runs as many of its steps as make our lists.
                steps = max(1, round(args.steps * args.batch_size / batches[side]))
                durations = timers[side](steps)
                rates[side].append(batches[side] * len(durations) / sum(durations))
            shown = ", ".join(f"{side} {rates[side][-1]:,.0f}" for side in timers)
            print(f"{model:<12} {d:>4} round {i + 1}: {shown} lists/s", flush=True)
    finally:
        if official is not None:
            official.close()
    return rates


def build_parser() -> argparse.ArgumentParser:
    parser = support.parser(__doc__)
    add = parser.add_argument
    add("--batch-size", type=int, default=2048, help="our lists per step")
    add("--items", type=int, default=16, help="items per list")
    add("--features", default="46", help="comma-separated feature counts")
    add("--models", type=support.names_of(MODELS), default=",".join(MODELS), help="comma-separated")
    add("--steps", type=int, default=3, help="steps per side and round")
    precisions = "our step's precision (tfr-train's), repeated for more sides (default: float32)"
    add("--precision", action="append", choices=("float32", "bf16", "float16"), help=precisions)
    add("--rounds", type=int, default=4, help="alternating rounds")
    add("--xla", action="store_true", help="compile our whole step with XLA")
    add("--compare-plain", action="store_true", help="also time our step without compiled_ops")
    add("--peak", action="store_true", help="also time float32 matmuls alone: the lists/s cap")
    parity_sources.add_source_arguments(parser, folds=False)
    theirs = "the released code's lists per step (default: ours)"
    add("--official-batch-size", type=int, help=theirs)
    add("--official-threads", type=int, default=os.cpu_count(), help="torch's intra-op threads")
    record = "append a JSON line per model and feature count to FILE (speed_records prints it)"
    add("--record", metavar="FILE", help=record)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    args.precision = list(dict.fromkeys(args.precision or ["float32"]))
    setup = official_setup(args)
    print(support.cpu_line())
    theirs = f" (theirs {args.official_batch_size})" if args.official_batch_size else ""
    print(
        f"batch {args.batch_size} lists of {args.items} items{theirs}; TensorFlow "
        f"{tf.__version__}; {args.rounds} rounds of {args.steps} steps per side; "
        f"XLA {'on' if args.xla else 'off'}; precision {', '.join(args.precision)}"
    )
    summary = []
    for d in [int(x) for x in args.features.split(",")]:
        for model in args.models:
            rates = compare(model, d, args, setup)
            summary.append((model, d, {side: statistics.median(r) for side, r in rates.items()}))
    print("\nmedian round, lists/s (ratio: ours / authors; our matmul GFLOP/s)")
    for model, d, medians in summary:
        summarize(model, d, medians, args)
    return 0


def summarize(model: str, d: int, medians: dict, args) -> None:
    """Prints a model's median rounds, ratios and matmul rate (and ceiling); records them."""
    shown = ", ".join(f"{side} {rate:,.0f}" for side, rate in medians.items())
    if "authors" in medians:
        shown += f"; ratio {medians['ours'] / medians['authors']:.2f}"
    for precision in args.precision[1:]:
        shown += f"; {precision} / {args.precision[0]} "
        shown += f"{medians[f'ours, {precision}'] / medians['ours']:.2f}"
    arch = TrainConfig(model=model, data="-", model_dir="-").architecture
    per_list = 3 * forward_flops(model, d, args.items, arch)  # forward, then 2x backward
    print(f"{model:<12} {d:>4}: {shown}; {per_list * medians['ours'] / 1e9:.1f} GFLOP/s")
    peak = None
    if args.peak:
        peak = matmul_peak(d, arch.ff_dim, args.batch_size * (args.items + 1))
        ceiling = peak * 1e9 / per_list
        line = (
            f"{'':<12} {d:>4}: float32 matmul peak {peak:.1f} GFLOP/s; ours at "
            f"{per_list * medians['ours'] / 1e9 / peak:.0%} of it; at the peak "
            f"{ceiling:,.0f} lists/s"
        )
        if "authors" in medians:
            line += f", {ceiling / medians['authors']:.2f}x the authors'"
        print(line)
    if args.record:
        support.append_record(
            args.record,
            "train_step",
            onednn_max_cpu_isa=os.environ.get("ONEDNN_MAX_CPU_ISA", "none"),
            model=model,
            features=d,
            **{k: getattr(args, k) for k in ("batch_size", "items", "rounds", "steps")},
            official_batch_size=args.official_batch_size or args.batch_size,
            precision=args.precision,
            median_lists_per_second={side: round(r, 1) for side, r in medians.items()},
            matmul_flops_per_list=per_list,
            peak_gflops=None if peak is None else round(peak, 1),
        )


if __name__ == "__main__":
    sys.exit(main())
