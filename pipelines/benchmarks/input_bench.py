"""Speed of the training input pipeline alone: lists/s in the first epoch and later ones.

Writes WEB30K-shaped lists (``--lists`` lists of ``--items`` items and
``--features`` features: heavy-tailed counts and scores, a third of them 0,
labels 0 .. 4) as ELWC with the converter's encoder, with a manifest holding
each feature's 1,000 quantiles, then iterates ``data.training_dataset`` with
the quantile normalisation and no model: the first epoch parses and
normalises the records, later ones serve what it kept. Each mode
(``--mode``: ``memory``, the lists held in memory, as ``tfr-train
--lists-in-memory on``; ``stream``, the records read every epoch; ``raw``,
held in memory without the normalisation, whose first epoch is the parsing
alone, the anchor of the others' first) builds its
pipeline afresh ``--repeats`` times, and the CPU, the core count and the load
average are printed with the speeds, as other workers may share the machine.
``--record FILE`` appends the run's figures to a JSON-lines record
(``speed_records``).

Run: ``python -m pipelines.benchmarks.input_bench --lists 50000``.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time

import numpy as np

from pipelines.benchmarks.bench_support import MAX_LABEL, cpu_extensions
from pipelines.benchmarks.run_records import append_line
from pipelines.benchmarks.speed_records import epoch_medians, input_line
from pipelines.flag_table import add_flag

MODES = ("memory", "stream", "raw")
NUM_QUANTILES = 1000


def write_lists(directory: str, *, lists: int, items: int, features: int, seed: int) -> str:
    """``lists`` random lists as one ELWC shard and its ``manifest.json`` in ``directory``."""
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
    manifest = {
        "num_features": features,
        "max_relevance": MAX_LABEL,
        "normalization": {
            "method": "quantile",
            "quantile": {"values": quantiles.tolist(), "num_quantiles": NUM_QUANTILES},
        },
        "splits": {
            "train": {
                "files": {name: lists},
                "num_lists": lists,
                "num_items": lists * items,
                "longest_list": items,
                "list_length_histogram": {str(items): lists},
            }
        },
    }
    with open(os.path.join(directory, MANIFEST_NAME), "w", encoding="utf-8") as f:
        json.dump(manifest, f)
    return directory


def epoch_rates(
    data_dir: str, scratch: str, *, mode: str, epochs: int, batch_items: int, seed: int
) -> list:
    """Lists/s of each epoch of a pipeline built afresh (the first counts the build)."""
    from tfr_rankformer.inputs import batching, data
    from tfr_rankformer.model.feature_normalization import FeatureNormalization
    from tfr_rankformer.model.table_search import pipeline_normalization

    manifest = data.load_manifest(data_dir)
    lengths = data.list_lengths(data_dir, manifest, "train")
    edges = batching.bucket_edges(manifest.split("train").longest_or(1))
    plan = batching.plan_batches(lengths, edges=edges, batch_items=batch_items, max_lists=2048)
    quantile = FeatureNormalization.from_manifest(manifest, "quantile")
    began = time.perf_counter()
    dataset = data.training_dataset(
        data_dir,
        manifest,
        plan=plan,
        list_cap=None,
        include_empty_lists=True,
        with_list_head=True,
        seed=seed,
        normalize=None if mode == "raw" else pipeline_normalization(quantile),
        cache_file=os.path.join(scratch, f"cache-{time.monotonic_ns()}"),
        lists_in_memory=mode != "stream",
    )
    rates = []
    for _ in range(epochs):
        lists = 0
        for inputs, _targets in dataset:
            lists += int(inputs["mask"].shape[0])
        rates.append(lists / (time.perf_counter() - began))
        began = time.perf_counter()
    return rates


def _load() -> str:
    try:
        with open("/proc/loadavg", encoding="ascii") as f:
            return " ".join(f.read().split()[:3])
    except OSError:
        return "unknown"


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_flag(p, "lists", default=50_000, help="lists to write. Default: 50000")
    add_flag(p, "items", help="items per list. Default: 16")
    add_flag(p, "features", default=136, help="features per item. Default: 136")
    add_flag(p, "epochs", default=3, help="epochs per pipeline. Default: 3")
    add_flag(p, "repeats", default=3, help="pipelines per mode. Default: 3")
    add_flag(p, "batch_items", default=32768, help="padded items per batch. Default: 32768")
    p.add_argument("--mode", choices=(*MODES, "all"), default="all", help="Default: all")
    add_flag(p, "seed", default=0, help="data and shuffle seed. Default: 0")
    add_flag(
        p,
        "data",
        help="a directory this benchmark (or tfr-convert) wrote before; else lists are "
        "written to a temporary one",
    )
    add_flag(p, "record")
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    modes = MODES if args.mode == "all" else (args.mode,)
    with tempfile.TemporaryDirectory(prefix="input-bench-") as scratch:
        data_dir = args.data or scratch
        if not os.path.isfile(os.path.join(data_dir, "manifest.json")):
            os.makedirs(data_dir, exist_ok=True)
            write_lists(
                data_dir, lists=args.lists, items=args.items, features=args.features, seed=args.seed
            )
        load = {"before": _load()}
        print(f"CPU: {cpu_extensions()}; {os.cpu_count()} cores; load average {load['before']}")
        # Imported before any timing, so that no mode's first epoch counts it.
        import tensorflow_ranking  # noqa: F401

        shape = _shape(data_dir)
        print(
            f"{shape['lists']:,} lists, {shape['items']:,} items (longest "
            f"{shape['longest']}) x {shape['features']} features"
        )
        rates = {mode: _mode_rates(data_dir, scratch, mode, args) for mode in modes}
        load["after"] = _load()
        print(f"load average after: {load['after']}")
    if args.record:
        line = input_line(
            rates, shape, args, cpu=cpu_extensions(), cores=os.cpu_count() or 0, load=load
        )
        append_line(args.record, line)
    return 0


def _shape(data_dir: str) -> dict:
    """The training split's list and item counts, longest list and feature count."""
    from tfr_rankformer.inputs.manifest import load_manifest

    manifest = load_manifest(data_dir)
    entry = manifest.split("train")
    return {
        "lists": entry.num_lists,
        "items": entry.num_items,
        "longest": entry.longest_list,
        "features": manifest.num_features,
    }


def _mode_rates(data_dir: str, scratch: str, mode: str, args) -> list:
    """``--repeats`` pipelines' lists/s by epoch in ``mode``, each run printed, then
    the medians."""
    runs = [
        epoch_rates(
            data_dir,
            scratch,
            mode=mode,
            epochs=args.epochs,
            batch_items=args.batch_items,
            seed=args.seed,
        )
        for _ in range(args.repeats)
    ]
    for i, rates in enumerate(runs, 1):
        print(f"{mode} run {i}: lists/s by epoch {', '.join(f'{r:,.0f}' for r in rates)}")
    first, later = epoch_medians(runs)
    shown = "—" if later is None else f"{later:,.0f}"
    print(f"{mode}: median epoch 1 {first:,.0f} lists/s, later epochs {shown}")
    return runs


if __name__ == "__main__":
    raise SystemExit(main())
