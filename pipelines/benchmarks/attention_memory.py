"""Full attention against the summary-token ranker's attention as lists grow.

For lists of 256, 1,024, 4,096 and 16,384 items it times training steps
(forward, softmax loss, backward, AdamW) of the RankFormer (full self-attention
over the list) and of this project's ``summary_token_ranker`` (items attend
to ``[CLS]``, learned summary tokens and themselves; the same encoder width,
depth and heads), at the same number of items per batch
(16,384: 64 lists of 256 ... 1 list of 16,384), 46 features. Each
configuration runs in its own process, whose peak resident memory is
reported; a process may use at most ``--memory-gb`` of address space beyond
what it holds after building the model, so a configuration that needs more
is reported as out of memory. Prints a table and writes a PNG plot.

Run: ``python -m pipelines.benchmarks.attention_memory --output attention_memory.png``
"""

from __future__ import annotations

import argparse
import sys

from pipelines.benchmarks.capped_child import run_child
from pipelines.flag_table import add_flag

_CHILD = """
import json, resource, sys, time
import numpy as np
import tensorflow as tf
from pipelines.benchmarks.train_bench import _manifest
from tfr_rankformer.training import TrainConfig, build_compiled_model

model, length, items, steps, spare = sys.argv[1], *map(int, sys.argv[2:5]), float(sys.argv[5])
batch = max(items // length, 1)
config = TrainConfig(model=model, data="-", model_dir="-", alpha=1.0)
_, ranker = build_compiled_model(config, _manifest(46), steps_per_epoch=100, xla=False)
rng = np.random.default_rng(0)
inputs = {
    "features": tf.constant(rng.normal(size=(batch, length, 46)).astype(np.float32)),
    "mask": tf.ones((batch, length), tf.bool),
}
targets = {
    "scores": tf.constant(rng.integers(0, 3, (batch, length)).astype(np.float32)),
    "list_quality": tf.constant(rng.integers(0, 3, (batch, 1)).astype(np.float32)),
}
pages = int(open("/proc/self/statm").read().split()[0])
limit = pages * resource.getpagesize() + int(spare * 2**30)
resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
try:
    ranker.train_on_batch(inputs, targets)  # tracing and warm-up
    started = time.perf_counter()
    for _ in range(steps):
        ranker.train_on_batch(inputs, targets)
    ms = 1000 * (time.perf_counter() - started) / steps
    result = {"ms_per_step": ms}
except (tf.errors.ResourceExhaustedError, MemoryError):
    result = {"ms_per_step": None}
result["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
print(json.dumps(result))
"""

MODELS = {"rankformer": "full attention", "summary_token_ranker": "summary tokens"}


def _run(model: str, length: int, args) -> dict:
    return run_child(
        _CHILD, [model, str(length), str(args.items), str(args.steps), str(args.memory_gb)]
    )


def _plot(results: dict, lengths: list[int], path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(1, 2, figsize=(10, 4))
    for model, label in MODELS.items():
        for ax, key in zip(axes, ("peak_rss_mb", "ms_per_step")):
            points = [(n, results[model][n][key]) for n in lengths]
            points = [(n, v) for n, v in points if v is not None]
            if points:
                ax.plot(*zip(*points), marker="o", label=label)
    for ax, title in zip(axes, ("peak memory (MB)", "ms per training step")):
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("items per list")
        ax.set_title(title)
        ax.legend()
    figure.suptitle("RankFormer encoder, same items per batch: full vs summary-token attention")
    figure.tight_layout()
    figure.savefig(path, dpi=100)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--lengths", default="256,1024,4096,16384")
    add_flag(parser, "items", default=16384, help="items per batch")
    add_flag(parser, "steps")
    add_flag(parser, "memory_gb", default=12.0)
    add_flag(parser, "output", default="attention_memory.png", help="the PNG plot")
    args = parser.parse_args(argv)
    lengths = [int(n) for n in args.lengths.split(",")]
    results = {model: {} for model in MODELS}
    print(f"{'items':>7} {'attention':<15} {'lists':>6} {'peak MB':>9} {'ms/step':>10}")
    for length in lengths:
        for model, label in MODELS.items():
            result = _run(model, length, args)
            results[model][length] = result
            ms = result["ms_per_step"]
            peak = result["peak_rss_mb"]
            print(
                f"{length:>7,} {label:<15} {max(args.items // length, 1):>6} "
                f"{'-' if peak is None else f'{peak:,.0f}':>9} "
                f"{'out of memory' if ms is None else f'{ms:,.0f}':>10}",
                flush=True,
            )
    _plot(results, lengths, args.output)
    print(f"wrote {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
