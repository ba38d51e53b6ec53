"""Training speed and memory of a model family's attentions as lists grow.

Each configuration runs in a process capped at ``--memory-gb`` of added address space.
``--family features``: full self-attention against summary tokens, with a PNG plot;
``--family text``: the Listformer's blocked global-local attention against dense ones.
"""

from __future__ import annotations

import argparse
import sys

from pipelines.benchmarks import bench_support as support

# argv: model, items per list, items per batch, steps, spare GiB.
FEATURES_CHILD = """
import sys
import tensorflow as tf
from pipelines.benchmarks.bench_support import training_batch

name, length, items, steps, spare = sys.argv[1], *map(int, sys.argv[2:5]), float(sys.argv[5])
sizes = dict(batch=max(items // length, 1), items=length)
model, inputs, targets = training_batch(name, 46, **sizes, alpha=1.0)
"""

# argv: attention, lists, documents per list, tokens per document, steps, spare GiB.
TEXT_CHILD = """
import sys
import numpy as np
import tensorflow as tf
from tfr_rankformer.text.listformer import build_text_model
from tfr_rankformer.ranking.losses import get_score_loss
from tfr_rankformer.text.listformer_config import ListformerConfig

attention = sys.argv[1]
lists, docs, block, steps = map(int, sys.argv[2:6])
spare = float(sys.argv[6])
tf.keras.utils.set_random_seed(0)
config = ListformerConfig(
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
"""

FAMILIES = {"features": FEATURES_CHILD, "text": TEXT_CHILD}
MEMORY_GB = {"features": 12.0, "text": 6.0}
MODELS = {"rankformer": "full attention", "summary_token_ranker": "summary tokens"}
QUERY_TOKENS = 8
ATTENTIONS = {"blocked": "global-local", "full": "full"}
SPEED_ATTENTIONS = {"blocked": "global-local (blocked)"}
SPEED_ATTENTIONS.update(dense_masked="global-local (dense masked)", full="full")


def run_configuration(family: str, settings: list, args) -> dict:
    """The JSON result of ``family``'s child with ``settings`` in its own capped process."""
    argv = [str(value) for value in (*settings, args.steps, args.memory_gb)]
    return support.run_child(FAMILIES[family] + support.CAPPED_STEPS, argv)


def _cell(value, fmt="{:,.0f}") -> str:
    return "-" if value is None else fmt.format(value)


def _row(*cells, head: bool = False) -> None:
    print("| " + " | ".join(str(cell) for cell in cells) + " |", flush=True)
    if head:
        print("|" + "---|" * len(cells))


def _figures(result: dict) -> list[str]:
    """Peak and added MB, and ms per step or why there is none."""
    peak, ms = result["peak_rss_mb"], result["ms_per_step"]
    added = None if peak is None else peak - result["built_rss_mb"]
    why = "did not run (killed)" if peak is None else "out of memory"
    return [_cell(peak), _cell(added), why if ms is None else _cell(ms)]


def features_sweep(args) -> None:
    """Prints the ``features`` table and writes its plot."""
    lengths = [int(n) for n in args.lengths.split(",")]
    results = {model: {} for model in MODELS}
    _row("items", "attention", "lists", "peak MB", "added MB", "ms/step", head=True)
    for length in lengths:
        for model, label in MODELS.items():
            result = run_configuration("features", [model, length, args.items], args)
            results[model][length] = result
            _row(f"{length:,}", label, max(args.items // length, 1), *_figures(result))
    _plot(results, lengths, args.output)
    print(f"wrote {args.output}")


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


def sequence_tokens(docs: int, tokens: int) -> int:
    """Tokens of one list's sequence ``[CLS] q [SEP] d_1 [SEP] ... d_N [SEP]``."""
    return 1 + QUERY_TOKENS + docs + docs * tokens


def speed_table(args) -> None:
    """Prints the ``text`` speed table (the synthetic text runs' batches)."""
    lists, docs, tokens = args.speed_lists, args.speed_documents, args.speed_tokens
    per_step = lists * sequence_tokens(docs, tokens)
    print(
        f"\nSpeed: {lists} lists per step of {docs} documents of {tokens} tokens and a query "
        f"of {QUERY_TOKENS} tokens ({per_step:,} tokens per step); mean of {args.steps} steps"
    )
    _row("attention", "tokens/s", "ms/step", "CPU ms/step", "peak MB", "added MB", head=True)
    for attention, label in SPEED_ATTENTIONS.items():
        result = run_configuration("text", [attention, lists, docs, tokens], args)
        ms = result["ms_per_step"]
        rate = None if ms is None else per_step / (ms / 1000)
        peak, added, time = _figures(result)
        _row(label, _cell(rate), time, _cell(result.get("cpu_ms_per_step")), peak, added)


def memory_table(args) -> None:
    """Prints the ``text`` memory table (one long list per step)."""
    print(
        f"\nMemory: one list per step, query of {QUERY_TOKENS} tokens, documents of "
        f"{args.tokens} tokens; mean of {args.steps} steps"
    )
    columns = ("documents", "tokens in the sequence", "attention", "peak MB", "added MB")
    _row(*columns, "ms/step", head=True)
    for docs in [int(n) for n in args.documents.split(",") if n]:
        for attention, label in ATTENTIONS.items():
            result = run_configuration("text", [attention, 1, docs, args.tokens], args)
            _row(docs, f"{sequence_tokens(docs, args.tokens):,}", label, *_figures(result))


def build_parser() -> argparse.ArgumentParser:
    parser = support.parser(__doc__)
    add = parser.add_argument
    add("--family", choices=sorted(FAMILIES), required=True, help="the models compared")
    add("--steps", type=int, default=3, help="timed steps per configuration")
    add("--memory-gb", type=float, help="GiB each run may add (default: 12, text 6)")
    features = parser.add_argument_group("--family features").add_argument
    features("--lengths", default="256,1024,4096,16384", help="items per list")
    features("--items", type=int, default=16384, help="items per batch")
    features("--output", default="attention_memory.png", help="the PNG plot")
    text = parser.add_argument_group("--family text").add_argument
    text("--speed-lists", type=int, default=16, help="lists per speed step")
    text("--speed-documents", type=int, default=20, help="documents per list")
    text("--speed-tokens", type=int, default=64, help="tokens per document")
    text("--documents", default="10,50,100,200", help="documents per list of the memory table")
    text("--tokens", type=int, default=128, help="tokens per document (memory)")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    args.memory_gb = args.memory_gb or MEMORY_GB[args.family]
    if args.family == "features":
        features_sweep(args)
        return 0
    print(support.cpu_line())
    print(
        "Listformer, 2 layers, width 64, 2 heads, feed-forward 128, dropout 0.1; "
        "training steps (ApproxNDCG, AdamW)"
    )
    speed_table(args)
    memory_table(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
