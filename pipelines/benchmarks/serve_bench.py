"""Serving latency of an exported RankFormer beside a 1,000-tree LightGBM model, on CPU.

p50 / p99 of the SavedModel's ELWC and tensor signatures on one list of 16 and of 128 items,
and lists/s at batch 64, beside LightGBM predicting the same items (untrained weights: latency
does not depend on them).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time

import numpy as np
import tensorflow as tf

from pipelines.benchmarks import bench_support as support
from tfr_rankformer.model.model_config import ModelConfig
from tfr_rankformer.model.models import build_model
from tfr_rankformer.serving.export import SIGNATURE_ELWC, SIGNATURE_TENSORS, save_servable
from tfrecords_tools.elwc_writer import ElwcEncoder


def percentiles(call, repeats: int) -> tuple[float, float]:
    """p50 and p99 ms of ``repeats`` calls after 10 of warm-up."""
    for _ in range(10):
        call()
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        call()
        times.append(time.perf_counter() - started)
    return float(np.percentile(times, 50)) * 1e3, float(np.percentile(times, 99)) * 1e3


def throughput(call, lists: int, repeats: int = 30) -> float:
    call()
    started = time.perf_counter()
    for _ in range(repeats):
        call()
    return lists * repeats / (time.perf_counter() - started)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        formatter_class=support.HelpFormatter,
    )
    add = parser.add_argument
    add("--features", type=int, default=136, help="features per item")
    add("--repeats", type=int, default=300, help="timed calls per latency")
    add("--trees", type=int, default=1000, help="the LightGBM model's trees")
    add(
        "--normalization",
        choices=("quantile", "standard"),
        default="quantile",
        help="what the saved model applies to raw features: quantile (tfr-convert's "
        "default, 1,000 quantiles per feature) or standard",
    )
    for pool, what in (("intra", "within an op"), ("inter", "running ops side by side")):
        add(
            f"--{pool}-op-threads",
            type=int,
            default=0,
            help=f"TensorFlow's threads {what}, as TF Serving's "
            f"--tensorflow_{pool}_op_parallelism sets them (0: one per CPU)",
        )
    add(
        "--record",
        metavar="FILE",
        help="append the run's figures as a JSON line to FILE; python -m "
        "pipelines.benchmarks.speed_records FILE prints them",
    )
    return parser


def measure(args) -> tuple[list[tuple], dict]:
    """``(call, p50 ms, p99 ms)`` of each call at 16 and 128 items, and lists/s at batch 64."""
    d = args.features
    manifest = support.feature_manifest(d, args.normalization)
    model = build_model("rankformer", manifest, ModelConfig(), levels=2)
    encoder, rng = ElwcEncoder(d), np.random.default_rng(1)

    def elwc(n):
        return encoder.encode(
            1, rng.normal(size=(n, d)).astype(np.float32), np.zeros(n), np.zeros(n)
        )

    import lightgbm as lgb

    params = {"objective": "lambdarank", "num_leaves": 31, "verbose": -1, "num_threads": 2}
    data = np.random.default_rng(0)
    x, y = data.normal(size=(20_000, d)), data.integers(0, 5, size=20_000)
    booster = lgb.train(params, lgb.Dataset(x, y, group=[20] * 1000), num_boost_round=args.trees)
    rows = []
    with tempfile.TemporaryDirectory() as scratch:
        path = os.path.join(scratch, "1")
        save_servable(model, path, num_features=d, list_head=True, warmup=[elwc(16)])
        signatures = tf.saved_model.load(path).signatures
        by_proto, by_tensor = signatures[SIGNATURE_ELWC], signatures[SIGNATURE_TENSORS]
        for n in (16, 128):
            proto = tf.constant([elwc(n)])
            features = tf.constant(rng.normal(size=(1, n, d)).astype(np.float32))
            mask, items = tf.ones((1, n), tf.bool), features.numpy()[0]
            calls = {
                f"rankformer ELWC, 1 list of {n}": lambda p=proto: by_proto(examples=p),
                f"rankformer tensors, 1 list of {n}": lambda f=features, m=mask: by_tensor(
                    features=f, mask=m
                ),
                f"lightgbm {args.trees} trees, {n} items": lambda x=items: booster.predict(x),
            }
            rows += [(name, *percentiles(call, args.repeats)) for name, call in calls.items()]
        batch = tf.constant([elwc(16) for _ in range(64)])
        batch_items = rng.normal(size=(64 * 16, d))
        rates = {
            "rankformer_elwc": throughput(lambda: by_proto(examples=batch), 64),
            "lightgbm": throughput(lambda: booster.predict(batch_items), 64),
        }
    return rows, rates


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    # Before TensorFlow starts its runtime (the first op), as a server's flags do.
    if args.intra_op_threads:
        tf.config.threading.set_intra_op_parallelism_threads(args.intra_op_threads)
    if args.inter_op_threads:
        tf.config.threading.set_inter_op_parallelism_threads(args.inter_op_threads)
    rows, rates = measure(args)
    print(f"CPU: {support.cpu_extensions()}; {os.cpu_count()} CPUs")
    print(
        f"{args.features} features, {args.normalization} normalisation, {args.repeats} calls "
        f"each; TensorFlow threads: intra-op {args.intra_op_threads or 'default'}, "
        f"inter-op {args.inter_op_threads or 'default'}"
    )
    print(f"{'call':<36} {'p50 ms':>8} {'p99 ms':>8}")
    for name, p50, p99 in rows:
        print(f"{name:<36} {p50:>8.2f} {p99:>8.2f}")
    for elwc, tree in zip(rows[::3], rows[2::3]):  # each length: ELWC, tensors, LightGBM
        print(f"{elwc[0]}: p50 {elwc[1] / tree[1]:.2f}x LightGBM's")
    print(
        f"throughput, batch 64 lists of 16: rankformer ELWC {rates['rankformer_elwc']:,.0f} "
        f"lists/s, lightgbm {rates['lightgbm']:,.0f} lists/s"
    )
    if args.record:
        line = {"kind": "serving", "cpu": support.cpu_extensions(), "features": args.features}
        line.update({k: getattr(args, k) for k in ("normalization", "trees", "repeats")})
        line["threads"] = {"intra_op": args.intra_op_threads, "inter_op": args.inter_op_threads}
        line["calls"] = [
            {"call": c, "p50_ms": round(p50, 3), "p99_ms": round(p99, 3)} for c, p50, p99 in rows
        ]
        line["batch_64_lists_per_second"] = {k: round(v) for k, v in rates.items()}
        support.append_line(args.record, line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
