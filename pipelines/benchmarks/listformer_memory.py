"""The Listformer's global-local encoder against full attention over the same sequence.

For lists of 10, 50, 100 and 200 documents of 128 tokens each (a query of 8
tokens, one list per batch) it times training steps (forward, ApproxNDCG,
backward, AdamW) of the Listformer with its blocked global-local attention
(``--attention blocked``) and of the same model with plain full attention
over the same ``1 + 8 + N + 128 N`` tokens (``--attention full``). The model
is kept small so the comparison runs on a CPU: 2 layers, width 64, 2 heads,
feed-forward 128, a vocabulary of 1,000 ids. Each configuration runs in its
own process, which reports its peak resident memory and its resident memory
after building the model (their difference is what the steps added); a
process may add at most ``--memory-gb`` of address space, so a configuration
that needs more is reported as out of memory rather than run. The CPU's
vector extensions are printed with the table.

Run: ``nice -n 10 python -m pipelines.benchmarks.listformer_memory``
"""

from __future__ import annotations

import argparse
import sys

from pipelines.benchmarks.capped_child import run_child
from pipelines.benchmarks.reference.reference_parity import cpu_extensions

_CHILD = """
import json, resource, sys, time
import numpy as np
import tensorflow as tf
from tfr_rankformer.text.listformer import build_text_model
from tfr_rankformer.losses import get_score_loss
from tfr_rankformer.models import ModelConfig

attention, docs, block, steps, spare = sys.argv[1], *map(int, sys.argv[2:5]), float(sys.argv[5])
tf.keras.utils.set_random_seed(0)
config = ModelConfig(
    width=64, num_layers=2, num_heads=2, ff_dim=128, dropout=0.1, attention=attention,
    attention_window=256,
)
model = build_text_model("listformer", 1000, config, None)
model.compile(
    optimizer=tf.keras.optimizers.AdamW(1e-3, weight_decay=0.01),
    loss={"scores": get_score_loss("approx_ndcg").build(2)},
)
rng = np.random.default_rng(0)
inputs = {
    "query_ids": tf.constant(rng.integers(0, 1000, (1, 8)), tf.int32),
    "document_ids": tf.constant(rng.integers(0, 1000, (1, docs, block)), tf.int32),
    "mask": tf.ones((1, docs), tf.bool),
}
targets = {"scores": tf.constant(rng.integers(0, 3, (1, docs)).astype(np.float32))}
statm = open("/proc/self/statm").read().split()
built_mb = int(statm[1]) * resource.getpagesize() / 2**20
limit = int(statm[0]) * resource.getpagesize() + int(spare * 2**30)
resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
try:
    model.train_on_batch(inputs, targets)  # tracing and warm-up
    started = time.perf_counter()
    for _ in range(steps):
        model.train_on_batch(inputs, targets)
    result = {"ms_per_step": 1000 * (time.perf_counter() - started) / steps}
except (tf.errors.ResourceExhaustedError, MemoryError):
    result = {"ms_per_step": None}
result["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
result["built_rss_mb"] = built_mb
print(json.dumps(result))
"""

ATTENTIONS = {"blocked": "global-local", "full": "full"}


def _run(attention: str, docs: int, args) -> dict:
    return run_child(
        _CHILD, [attention, str(docs), str(args.tokens), str(args.steps), str(args.memory_gb)]
    )


def _cell(value, fmt="{:,.0f}") -> str:
    return "-" if value is None else fmt.format(value)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--documents", default="10,50,100,200", help="documents per list")
    parser.add_argument("--tokens", type=int, default=128, help="tokens per document")
    parser.add_argument("--steps", type=int, default=3, help="timed steps per configuration")
    parser.add_argument(
        "--memory-gb", type=float, default=6.0, help="address space each run may add, GiB"
    )
    args = parser.parse_args(argv)
    print(f"CPU: {cpu_extensions()}")
    print(
        "Listformer, 2 layers, width 64, 2 heads, feed-forward 128; one list per step, "
        f"query of 8 tokens, documents of {args.tokens} tokens; ApproxNDCG, AdamW"
    )
    header = "| documents | tokens in the sequence | attention | peak MB | added MB | ms/step |"
    print(header)
    print("|---|---|---|---|---|---|")
    for docs in [int(n) for n in args.documents.split(",")]:
        for attention, label in ATTENTIONS.items():
            result = _run(attention, docs, args)
            peak, ms = result["peak_rss_mb"], result["ms_per_step"]
            added = None if peak is None else peak - result["built_rss_mb"]
            time_cell = _cell(ms) if ms is not None else "out of memory"
            if ms is None and peak is None:
                time_cell = "did not run (killed)"
            print(
                f"| {docs} | {1 + 8 + docs + docs * args.tokens:,} | {label} | {_cell(peak)} "
                f"| {_cell(added)} | {time_cell} |",
                flush=True,
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
