"""Serving latency of an exported RankFormer beside a 1,000-tree LightGBM model, on CPU.

Saves the paper's RankFormer (3 layers, 1 head, feed-forward 512; untrained
weights, since latency does not depend on them) at 136 features with the
serving signatures and the converter's default normalisation (the quantile
transform over 1,000 quantiles per feature, which the SavedModel applies to
the raw features it is sent; ``--normalization standard`` times the cheaper
standardisation instead), loads it back as TF Serving would, and times in
one run:

* p50 / p99 latency of ``serving_default`` (serialized ELWC in, parsing
  included) and of ``predict_tensors`` for one list of 16 and of 128 items;
* throughput at batch 64 lists of 16 items;
* the same for a LightGBM lambdarank model of 1,000 trees (31 leaves) trained
  on random data, predicting the same items.

It prints the CPU's model and vector extensions, and the RankFormer's p50
as a ratio to LightGBM's at each list length, both measured in this run.
``--intra-op-threads`` and ``--inter-op-threads`` size TensorFlow's thread
pools as TF Serving's flags of those names do; ``--record FILE`` appends the
run's figures to a JSON-lines record (``speed_records``).
Run: ``python -m pipelines.benchmarks.serve_bench``.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time

import numpy as np
import tensorflow as tf

from pipelines.benchmarks.bench_support import cpu_extensions, feature_manifest
from pipelines.benchmarks.run_records import append_line
from pipelines.benchmarks.speed_records import serving_line
from pipelines.flag_table import add_flag
from tfr_rankformer.model.models import ModelConfig, build_model
from tfr_rankformer.serving.export import SIGNATURE_ELWC, SIGNATURE_TENSORS, save_servable
from tfrecords_tools.elwc_writer import ElwcEncoder


def _percentiles(call, repeats: int) -> tuple[float, float]:
    for _ in range(10):
        call()
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        call()
        times.append(time.perf_counter() - started)
    return float(np.percentile(times, 50)) * 1e3, float(np.percentile(times, 99)) * 1e3


def _throughput(call, lists: int, repeats: int) -> float:
    call()
    started = time.perf_counter()
    for _ in range(repeats):
        call()
    return lists * repeats / (time.perf_counter() - started)


def _lightgbm(d: int, trees: int):
    import lightgbm as lgb

    rng = np.random.default_rng(0)
    x = rng.normal(size=(20_000, d))
    y = rng.integers(0, 5, size=20_000)
    params = {"objective": "lambdarank", "num_leaves": 31, "verbose": -1, "num_threads": 2}
    return lgb.train(params, lgb.Dataset(x, y, group=[20] * 1000), num_boost_round=trees)


def build_parser() -> argparse.ArgumentParser:
    """The benchmark's options: features per item, calls per timing, the GBDT's trees."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_flag(parser, "features", default=136)
    add_flag(parser, "repeats", default=300)
    add_flag(parser, "trees", default=1000, help=None)
    parser.add_argument(
        "--normalization",
        choices=("quantile", "standard"),
        default="quantile",
        help="the normalisation the saved model applies to raw features: quantile "
        "(the default of tfr-convert, 1,000 quantiles per feature) or standard. "
        "Default: quantile",
    )
    parser.add_argument(
        "--intra-op-threads",
        type=int,
        default=0,
        help="TensorFlow's threads within an op, as TF Serving's "
        "--tensorflow_intra_op_parallelism sets them (0: one per CPU). Default: 0",
    )
    parser.add_argument(
        "--inter-op-threads",
        type=int,
        default=0,
        help="TensorFlow's threads running ops side by side, as TF Serving's "
        "--tensorflow_inter_op_parallelism sets them (0: one per CPU). Default: 0",
    )
    add_flag(parser, "record")
    return parser


def _latency_rows(
    signatures, booster, elwc, rng, *, d: int, repeats: int, trees: int
) -> list[tuple]:
    """``(call, p50 ms, p99 ms)`` of the ELWC and the tensors signature (``signatures``,
    in that order) and of the ``trees``-tree booster, on one list of 16 and of 128 items."""
    by_proto, by_tensor = signatures
    rows = []
    for n in (16, 128):
        proto = tf.constant([elwc(n)])
        features = tf.constant(rng.normal(size=(1, n, d)).astype(np.float32))
        mask = tf.ones((1, n), tf.bool)
        items = features.numpy()[0]
        rows.append(
            (
                f"rankformer ELWC, 1 list of {n}",
                *_percentiles(lambda p=proto: by_proto(examples=p), repeats),
            )
        )
        rows.append(
            (
                f"rankformer tensors, 1 list of {n}",
                *_percentiles(lambda f=features, m=mask: by_tensor(features=f, mask=m), repeats),
            )
        )
        rows.append(
            (
                f"lightgbm {trees} trees, {n} items",
                *_percentiles(lambda x=items: booster.predict(x), repeats),
            )
        )
    return rows


def _print_report(rows: list[tuple], proto_rate: float, tree_rate: float, *, args) -> None:
    """The latency table, the ratios to LightGBM and the throughput line."""
    print(f"CPU: {cpu_extensions()}; {os.cpu_count()} CPUs")
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
        f"throughput, batch 64 lists of 16: rankformer ELWC {proto_rate:,.0f} lists/s, "
        f"lightgbm {tree_rate:,.0f} lists/s"
    )


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    # Before TensorFlow starts its runtime (the first op), as a server's flags do.
    if args.intra_op_threads:
        tf.config.threading.set_intra_op_parallelism_threads(args.intra_op_threads)
    if args.inter_op_threads:
        tf.config.threading.set_inter_op_parallelism_threads(args.inter_op_threads)
    d = args.features
    manifest = feature_manifest(d, args.normalization)
    model = build_model("rankformer", manifest, ModelConfig(), levels=2)
    encoder = ElwcEncoder(d)
    rng = np.random.default_rng(1)

    def elwc(n):
        return encoder.encode(
            1, rng.normal(size=(n, d)).astype(np.float32), np.zeros(n), np.zeros(n)
        )

    with tempfile.TemporaryDirectory() as scratch:
        path = os.path.join(scratch, "1")
        save_servable(model, path, num_features=d, list_head=True, warmup=[elwc(16)])
        loaded = tf.saved_model.load(path)
        signatures = loaded.signatures[SIGNATURE_ELWC], loaded.signatures[SIGNATURE_TENSORS]
        booster = _lightgbm(d, args.trees)
        rows = _latency_rows(
            signatures, booster, elwc, rng, d=d, repeats=args.repeats, trees=args.trees
        )
        batch = tf.constant([elwc(16) for _ in range(64)])
        proto_rate = _throughput(lambda: signatures[0](examples=batch), 64, 30)
        batch_items = rng.normal(size=(64 * 16, d))
        tree_rate = _throughput(lambda: booster.predict(batch_items), 64, 30)
    _print_report(rows, proto_rate, tree_rate, args=args)
    if args.record:
        threads = {"intra_op": args.intra_op_threads, "inter_op": args.inter_op_threads}
        rates = {"rankformer_elwc": proto_rate, "lightgbm": tree_rate}
        line = serving_line(rows, rates, args, cpu=cpu_extensions(), threads=threads)
        append_line(args.record, line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
