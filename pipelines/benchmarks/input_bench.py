"""Speed of the training input pipeline alone: lists/s in the first epoch and later ones.

Random WEB30K-shaped lists, ``--repeats`` fresh pipelines per mode: ``memory`` (lists held, as
``--lists-in-memory on``), ``stream`` (records read every epoch) and ``raw`` (held, not
normalised: its first epoch is the parsing alone).
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time

import numpy as np

from pipelines.benchmarks import bench_support as support
from pipelines.benchmarks.bench_support import MAX_LABEL, parser
from pipelines.benchmarks.speed_records import epoch_medians
from tfr_rankformer.core.config_io import write_json

MODES = ("memory", "stream", "raw")
NUM_QUANTILES = 1000


def write_lists(directory: str, *, lists: int, items: int, features: int, seed: int) -> None:
    """``lists`` random lists (heavy-tailed, a third 0) as an ELWC shard and its manifest."""
    import tensorflow as tf

    from tfr_rankformer.inputs.manifest import MANIFEST_NAME
    from tfrecords_tools.elwc_writer import ElwcEncoder

    rng = np.random.default_rng(seed)
    encoder = ElwcEncoder(features)
    name = "train-00000-of-00001.tfrecord"
    sample = []
    with tf.io.TFRecordWriter(os.path.join(directory, name)) as writer:
        for start in range(0, lists, 1000):
            m = min(1000, lists - start)
            x = rng.lognormal(0.0, 2.0, size=(m, items, features)).astype(np.float32)
            x[:, :, ::2] = np.floor(x[:, :, ::2])  # counts
            x[rng.random(x.shape) < 0.33] = 0.0
            labels = rng.integers(0, MAX_LABEL + 1, size=(m, items)).astype(np.float32)
            for record in encoder.encode_lists(start, x, labels, labels):
                writer.write(record)
            sample.append(x[: max(1, 20_000 // items)].reshape(-1, features))
    levels = np.linspace(0.0, 1.0, NUM_QUANTILES)
    quantiles = np.quantile(np.concatenate(sample), levels, axis=0).T  # [d, Q]
    train = dict(files={name: lists}, num_lists=lists, num_items=lists * items, longest_list=items)
    train["list_length_histogram"] = {str(items): lists}
    quantile = {"values": quantiles.tolist(), "num_quantiles": NUM_QUANTILES}
    manifest = dict(num_features=features, max_relevance=MAX_LABEL, splits={"train": train})
    manifest["normalization"] = {"method": "quantile", "quantile": quantile}
    write_json(os.path.join(directory, MANIFEST_NAME), manifest)


def mode_rates(data_dir: str, manifest, scratch: str, mode: str, args) -> list[list[float]]:
    """Lists/s by epoch of ``--repeats`` fresh pipelines in ``mode`` (epoch 1 counts the build)."""
    from tfr_rankformer.inputs import batching, data
    from tfr_rankformer.model.feature_normalization import FeatureNormalization
    from tfr_rankformer.model.table_search import pipeline_normalization

    lengths = data.list_lengths(data_dir, manifest, "train")
    edges = batching.bucket_edges(manifest.split("train").longest_or(1))
    plan = batching.plan_batches(lengths, edges=edges, batch_items=args.batch_items, max_lists=2048)
    quantile = pipeline_normalization(FeatureNormalization.from_manifest(manifest, "quantile"))
    runs = []
    for i in range(args.repeats):
        began = time.perf_counter()
        dataset = data.training_dataset(
            data_dir,
            manifest,
            plan=plan,
            list_cap=None,
            include_empty_lists=True,
            with_list_head=True,
            seed=args.seed,
            normalize=None if mode == "raw" else quantile,
            cache_file=os.path.join(scratch, f"cache-{time.monotonic_ns()}"),
            lists_in_memory=mode != "stream",
        )
        runs.append([])
        for _ in range(args.epochs):
            lists = sum(int(inputs["mask"].shape[0]) for inputs, _ in dataset)
            runs[-1].append(lists / (time.perf_counter() - began))
            began = time.perf_counter()
        print(f"{mode} run {i + 1}: lists/s by epoch {', '.join(f'{r:,.0f}' for r in runs[-1])}")
    first, later = epoch_medians(runs)
    shown = "—" if later is None else f"{later:,.0f}"
    print(f"{mode}: median epoch 1 {first:,.0f} lists/s, later epochs {shown}")
    return runs


def _load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def build_parser() -> argparse.ArgumentParser:
    p = parser(__doc__)
    add = p.add_argument
    add("--lists", type=int, default=50_000, help="lists to write")
    add("--items", type=int, default=16, help="items per list")
    add("--features", type=int, default=136, help="features per item")
    add("--epochs", type=int, default=3, help="epochs per pipeline")
    add("--repeats", type=int, default=3, help="pipelines per mode")
    add("--batch-items", type=int, default=32768, help="padded items per batch")
    add("--seed", type=int, default=0, help="data and shuffle seed")
    add("--data", help="a directory this benchmark or tfr-convert wrote (default: write lists)")
    add("--record", metavar="FILE", help="append the figures as a JSON line to FILE")
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="input-bench-") as scratch:
        data_dir = args.data or scratch
        if not os.path.isfile(os.path.join(data_dir, "manifest.json")):
            os.makedirs(data_dir, exist_ok=True)
            sizes = dict(lists=args.lists, items=args.items, features=args.features)
            write_lists(data_dir, **sizes, seed=args.seed)
        load = {"before": _load()}
        print(f"{support.cpu_line()}; load average {load['before']}")
        # Imported before any timing, so that no mode's first epoch counts it.
        import tensorflow_ranking  # noqa: F401

        from tfr_rankformer.inputs.manifest import load_manifest

        manifest = load_manifest(data_dir)
        train = manifest.split("train")
        shape = dict(lists=train.num_lists, items=train.num_items, longest=train.longest_list)
        shape["features"] = manifest.num_features
        print(
            f"{shape['lists']:,} lists, {shape['items']:,} items (longest "
            f"{shape['longest']}) x {shape['features']} features"
        )
        rates = {mode: mode_rates(data_dir, manifest, scratch, mode, args) for mode in MODES}
        load["after"] = _load()
        print(f"load average after: {load['after']}")
    if args.record:
        by_epoch = {mode: [[round(r) for r in run] for run in runs] for mode, runs in rates.items()}
        fields = dict(load_average=load, **shape, batch_items=args.batch_items)
        fields.update(cores=os.cpu_count() or 0, lists_per_second_by_epoch=by_epoch)
        support.append_record(args.record, "input_pipeline", **fields)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
