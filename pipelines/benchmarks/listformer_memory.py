"""The Listformer's global-local encoder against dense attention: speed and memory.

The model is kept small so the comparison runs on a CPU: 2 layers, width 64,
2 heads, feed-forward 128, a vocabulary of 1,000 ids, dropout 0.1; a training
step is the forward pass, ApproxNDCG, the backward pass and AdamW. Each
configuration runs in its own process, which reports its peak resident memory
and its resident memory after building the model (their difference is what
the steps added); a process may add at most ``--memory-gb`` of address space,
so a configuration that needs more is reported as out of memory rather than
run. The CPU's model and vector extensions are printed with the tables.

* Speed: steps of several lists each (``--speed-lists`` lists of
  ``--speed-documents`` documents of ``--speed-tokens`` tokens and a query of 8
  tokens: the batches of the synthetic text runs, 16 lists of about 20
  documents cut at 64 tokens), the same sequences for every attention: the
  Listformer's blocked global-local attention (``--attention blocked``), the
  same attention through the full masked score matrix (``dense_masked``) and
  plain full attention over the same tokens (``full``). Tokens per second
  count every token of the sequences, ``[CLS]``, query and ``[SEP]`` tokens
  included; CPU ms is the process's CPU time per step (all its threads),
  steadier than wall time on a shared machine.
* Memory: one list per step of 10, 50, 100 and 200 documents of 128 tokens,
  blocked global-local against full attention.

Run: ``nice -n 10 python -m pipelines.benchmarks.listformer_memory``
"""

from __future__ import annotations

import argparse
import sys

from pipelines.benchmarks.capped_child import run_child
from pipelines.benchmarks.reference.parity_sources import cpu_extensions
from pipelines.flag_table import add_flag

_CHILD = """
import json, resource, sys, time
import numpy as np
import tensorflow as tf
from tfr_rankformer.text.listformer import build_text_model
from tfr_rankformer.losses import get_score_loss
from tfr_rankformer.models import ModelConfig

attention = sys.argv[1]
lists, docs, block, steps = map(int, sys.argv[2:6])
spare = float(sys.argv[6])
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
    "query_ids": tf.constant(rng.integers(0, 1000, (lists, 8)), tf.int32),
    "document_ids": tf.constant(rng.integers(0, 1000, (lists, docs, block)), tf.int32),
    "mask": tf.ones((lists, docs), tf.bool),
}
targets = {"scores": tf.constant(rng.integers(0, 3, (lists, docs)).astype(np.float32))}
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

QUERY_TOKENS = 8
ATTENTIONS = {"blocked": "global-local", "full": "full"}
SPEED_ATTENTIONS = {
    "blocked": "global-local (blocked)",
    "dense_masked": "global-local (dense masked)",
    "full": "full",
}


def sequence_tokens(docs: int, tokens: int) -> int:
    """Tokens of one list's sequence ``[CLS] q [SEP] d_1 [SEP] ... d_N [SEP]``."""
    return 1 + QUERY_TOKENS + docs + docs * tokens


def _run(attention: str, lists: int, docs: int, tokens: int, args) -> dict:
    argv = [attention, str(lists), str(docs), str(tokens), str(args.steps), str(args.memory_gb)]
    return run_child(_CHILD, argv)


def _cell(value, fmt="{:,.0f}") -> str:
    return "-" if value is None else fmt.format(value)


def _added(result: dict):
    peak = result["peak_rss_mb"]
    return None if peak is None else peak - result["built_rss_mb"]


def _time_cell(result: dict, value) -> str:
    if value is not None:
        return _cell(value)
    return "did not run (killed)" if result["peak_rss_mb"] is None else "out of memory"


def speed_table(args) -> list[dict]:
    """Prints the speed table; its rows (for callers and tests)."""
    lists, docs, tokens = args.speed_lists, args.speed_documents, args.speed_tokens
    per_step = lists * sequence_tokens(docs, tokens)
    print(
        f"\nSpeed: {lists} lists per step of {docs} documents of {tokens} tokens and a query "
        f"of {QUERY_TOKENS} tokens ({per_step:,} tokens per step); mean of {args.steps} steps"
    )
    print("| attention | tokens/s | ms/step | CPU ms/step | peak MB | added MB |")
    print("|---|---|---|---|---|---|")
    rows = []
    for attention, label in SPEED_ATTENTIONS.items():
        result = _run(attention, lists, docs, tokens, args)
        ms = result["ms_per_step"]
        rate = None if ms is None else per_step / (ms / 1000)
        print(
            f"| {label} | {_cell(rate)} | {_time_cell(result, ms)} "
            f"| {_cell(result.get('cpu_ms_per_step'))} | {_cell(result['peak_rss_mb'])} "
            f"| {_cell(_added(result))} |",
            flush=True,
        )
        rows.append(dict(result, attention=attention, tokens_per_second=rate))
    return rows


def memory_table(args) -> list[dict]:
    """Prints the memory table (one list per step, long lists); its rows."""
    print(
        f"\nMemory: one list per step, query of {QUERY_TOKENS} tokens, documents of "
        f"{args.tokens} tokens; mean of {args.steps} steps"
    )
    print("| documents | tokens in the sequence | attention | peak MB | added MB | ms/step |")
    print("|---|---|---|---|---|---|")
    rows = []
    for docs in [int(n) for n in args.documents.split(",") if n]:
        for attention, label in ATTENTIONS.items():
            result = _run(attention, 1, docs, args.tokens, args)
            print(
                f"| {docs} | {sequence_tokens(docs, args.tokens):,} | {label} "
                f"| {_cell(result['peak_rss_mb'])} | {_cell(_added(result))} "
                f"| {_time_cell(result, result['ms_per_step'])} |",
                flush=True,
            )
            rows.append(dict(result, attention=attention, documents=docs))
    return rows


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--speed-lists", type=int, default=16, help="lists per speed step")
    parser.add_argument("--speed-documents", type=int, default=20, help="documents per list")
    parser.add_argument("--speed-tokens", type=int, default=64, help="tokens per document")
    parser.add_argument(
        "--documents", default="10,50,100,200", help="documents per list of the memory table"
    )
    parser.add_argument("--tokens", type=int, default=128, help="tokens per document (memory)")
    add_flag(parser, "steps")
    add_flag(parser, "memory_gb", default=6.0)
    parser.add_argument(
        "--tables", default="speed,memory", help="the tables to print: speed, memory or both"
    )
    return parser


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    tables = set(args.tables.split(","))
    if not tables or tables - {"speed", "memory"}:
        raise SystemExit(f"--tables: speed and/or memory, got {args.tables!r}")
    print(f"CPU: {cpu_extensions()}")
    print(
        "Listformer, 2 layers, width 64, 2 heads, feed-forward 128, dropout 0.1; "
        "training steps (ApproxNDCG, AdamW)"
    )
    if "speed" in tables:
        speed_table(args)
    if "memory" in tables:
        memory_table(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
