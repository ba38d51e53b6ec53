"""Training speed of the paper's configurations: lists/s, ms/step and FLOP/s.

For the RankFormer (alpha > 0, 3 layers, 1 head, feed-forward 512, heads of
128), the transformer and the MLP, on lists of 16 items with 46 features
(MQ2008-sized) and 136 (WEB30K-sized), batch 2048, it times full training
steps (forward, both losses, backward, AdamW) on in-memory batches, so the
input pipeline (which also normalises the features, once per list) is left
out. It also prints the FLOP/s those steps achieve (forward FLOPs counted
analytically, training as three times the forward) as a
fraction of the machine's measured peak (a large float32 matmul).

Goal on 2 CPU cores: at least 3,800 lists/s for the RankFormer at 46 features.
Run: ``python -m pipelines.benchmarks.train_bench [--device GPU]``. With
``--compare-fused`` it times the step with and without the fused feed-forward
CPU kernel (``tfr_rankformer.fused_ops``) in alternating rounds instead.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np
import tensorflow as tf

from tfr_rankformer import fused_ops
from tfr_rankformer.models import ModelConfig
from tfr_rankformer.training import TrainConfig, build_compiled_model


def _manifest(d: int) -> dict:
    zeros, ones = [0.0] * d, [1.0] * d
    return {
        "num_features": d,
        "max_relevance": 2,
        "label_kind": "simulated_implicit",
        "parameters": {"clicks": {"purchase_label": 2}},
        "normalization": {
            "method": "standard",
            "standard": {"mean": zeros, "std": ones},
            "log1p": {"mean": zeros, "std": ones},
            "quantile": {"values": [[0.0, 1.0]] * d},
            "min": zeros,
            "max": ones,
        },
    }


def forward_flops(model: str, d: int, items: int, arch: ModelConfig) -> float:
    """Multiply-adds x 2 of one list's forward pass (matmuls only)."""
    if model == "mlp":
        widths = [d, *arch.mlp_units, 1]
        return 2.0 * items * sum(a * b for a, b in zip(widths[:-1], widths[1:]))
    tokens = items + 1  # with [CLS]
    per_token = 4 * d * d + 2 * d * arch.ff_dim  # Q, K, V, output; feed-forward
    attention = 2 * tokens * d  # scores and weighted sum
    encoder = arch.num_layers * tokens * (per_token + attention)
    # Score head: [z_i, z_CLS] W = z_i W_i + z_CLS W_c, the second once per list.
    heads = items * (d * arch.head_hidden + arch.head_hidden) + d * arch.head_hidden
    if model == "rankformer":
        heads += d * arch.head_hidden + arch.head_hidden * 2
    return 2.0 * (encoder + heads)


def peak_flops(device: str) -> float:
    """FLOP/s of a 4096 x 4096 float32 matmul, the best this device does in practice."""
    with tf.device(device):
        a = tf.random.normal([4096, 4096])
        matmul = tf.function(lambda x: tf.matmul(x, x))
        matmul(a).numpy()
        started = time.perf_counter()
        for _ in range(5):
            result = matmul(a)
        result.numpy()
        return 5 * 2 * 4096**3 / (time.perf_counter() - started)


def prepare(model: str, d: int, *, batch: int, items: int, xla: bool, device: str):
    """A compiled, warmed-up training step of ``model`` on one in-memory batch.

    Returns ``(step, architecture)``; ``step()`` runs one step (forward, losses,
    backward, AdamW).
    """
    config = TrainConfig(model=model, data="-", model_dir="-")
    with tf.device(device):
        # The ranker's step is what training runs (features arrive normalised).
        _, compiled = build_compiled_model(config, _manifest(d), steps_per_epoch=100, xla=xla)
        rng = np.random.default_rng(0)
        inputs = {
            "features": tf.constant(rng.normal(size=(batch, items, d)).astype(np.float32)),
            "mask": tf.ones((batch, items), tf.bool),
        }
        targets = {"scores": tf.constant(rng.integers(0, 3, (batch, items)).astype(np.float32))}
        if model == "rankformer":
            targets["list_quality"] = tf.constant(rng.integers(0, 3, (batch, 1)).astype(np.float32))
        for _ in range(2):  # tracing and warm-up
            compiled.train_on_batch(inputs, targets)

    def step():
        with tf.device(device):
            compiled.train_on_batch(inputs, targets)

    return step, config.architecture


def seconds_per_step(step, steps: int) -> float:
    started = time.perf_counter()
    for _ in range(steps):
        step()
    return (time.perf_counter() - started) / steps


def measure(model: str, d: int, *, batch: int, items: int, steps: int, xla: bool, device: str):
    step, arch = prepare(model, d, batch=batch, items=items, xla=xla, device=device)
    seconds = seconds_per_step(step, steps)
    return batch / seconds, seconds * 1000, arch


def compare_fused(model: str, d: int, *, batch: int, steps: int, rounds: int, **kwargs) -> None:
    """Prints lists/s of the plain and the fused-kernel training step, timed in alternation.

    The two steps are traced with ``TFR_RANKFORMER_FUSED_OPS`` off and on; each
    round times ``steps`` steps of both, so load from other processes hits both
    alike. Besides each round's rate, the fastest single step of each is
    reported: the least disturbed by such load.
    """
    previous = os.environ.get(fused_ops.ENV_SWITCH)
    steps_by_mode = {}
    try:
        for mode, switch in (("plain", "0"), ("fused", "1")):
            os.environ[fused_ops.ENV_SWITCH] = switch
            if mode == "fused":
                started = time.perf_counter()
                if not fused_ops.available():
                    raise SystemExit("the fused ops are unavailable; see the logged warning")
                print(f"fused op library ready in {time.perf_counter() - started:.1f} s")
            steps_by_mode[mode], _ = prepare(model, d, batch=batch, **kwargs)
    finally:
        if previous is None:
            os.environ.pop(fused_ops.ENV_SWITCH, None)
        else:
            os.environ[fused_ops.ENV_SWITCH] = previous
    rates = {mode: [] for mode in steps_by_mode}
    fastest = {mode: float("inf") for mode in steps_by_mode}
    for i in range(rounds):
        for mode, step in steps_by_mode.items():
            durations = [seconds_per_step(step, 1) for _ in range(steps)]
            rates[mode].append(batch * steps / sum(durations))
            fastest[mode] = min(fastest[mode], *durations)
        plain, fused = rates["plain"][-1], rates["fused"][-1]
        print(
            f"{model:<12} {d:>4} round {i + 1}: plain {plain:>7,.0f} lists/s, "
            f"fused {fused:>7,.0f} lists/s, ratio {fused / plain:.2f}"
        )
    plain, fused = np.median(rates["plain"]), np.median(rates["fused"])
    print(
        f"{model:<12} {d:>4} median round: plain {plain:,.0f} lists/s, "
        f"fused {fused:,.0f} lists/s, ratio {fused / plain:.2f}"
    )
    plain, fused = batch / fastest["plain"], batch / fastest["fused"]
    print(
        f"{model:<12} {d:>4} fastest step: plain {plain:,.0f} lists/s, "
        f"fused {fused:,.0f} lists/s, ratio {fused / plain:.2f}"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default="CPU", help="CPU or GPU")
    parser.add_argument("--batch-size", type=int, default=2048)
    parser.add_argument("--items", type=int, default=16)
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--features", default="46,136")
    parser.add_argument("--models", default="rankformer,transformer,mlp")
    parser.add_argument("--xla", action="store_true", help="compile the steps with XLA")
    parser.add_argument(
        "--compare-fused",
        action="store_true",
        help="time the plain and the fused feed-forward kernel in alternating rounds",
    )
    parser.add_argument("--rounds", type=int, default=5, help="rounds of --compare-fused")
    args = parser.parse_args(argv)

    if args.compare_fused:
        for d in (int(x) for x in args.features.split(",")):
            for model in args.models.split(","):
                compare_fused(
                    model,
                    d,
                    batch=args.batch_size,
                    steps=args.steps,
                    rounds=args.rounds,
                    items=args.items,
                    xla=args.xla,
                    device=f"/{args.device}:0",
                )
        return 0

    device = f"/{args.device}:0"
    peak = peak_flops(device)
    print(
        f"device {args.device}: measured matmul peak {peak / 1e9:,.0f} GFLOP/s; batch "
        f"{args.batch_size} lists of {args.items} items; XLA {'on' if args.xla else 'off'}"
    )
    print(f"{'model':<12} {'d':>4} {'lists/s':>10} {'ms/step':>9} {'GFLOP/s':>9} {'of peak':>8}")
    for d in (int(x) for x in args.features.split(",")):
        for model in args.models.split(","):
            rate, ms, arch = measure(
                model,
                d,
                batch=args.batch_size,
                items=args.items,
                steps=args.steps,
                xla=args.xla,
                device=device,
            )
            flops = 3 * forward_flops(model, d, args.items, arch) * rate
            print(
                f"{model:<12} {d:>4} {rate:>10,.0f} {ms:>9,.0f} {flops / 1e9:>9,.1f} "
                f"{flops / peak:>8.1%}"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
