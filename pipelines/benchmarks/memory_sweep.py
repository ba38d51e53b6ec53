"""Training speed and memory of a model family's attentions as lists grow.

Each configuration runs in its own process, which reports its peak resident
memory and its resident memory after building the model (their difference is
what the steps added); a process may add at most ``--memory-gb`` of address
space (default: 12 GiB for ``features``, 6 for ``text``), so a configuration
that needs more is reported as out of memory rather than run. A training step
is the forward pass, the loss, the backward pass and AdamW.

``--family features``: the RankFormer (full self-attention over the list)
against this project's ``summary_token_ranker`` (items attend to ``[CLS]``,
learned summary tokens and themselves; the same encoder width, depth and
heads), softmax loss, for lists of 256, 1,024, 4,096 and 16,384 items
(``--lengths``) at the same number of items per batch (``--items``, 16,384:
64 lists of 256 ... 1 list of 16,384), 46 features. Prints a table and writes
a PNG plot (``--output``).

``--family text``: the Listformer, kept small so the comparison runs on a CPU
(2 layers, width 64, 2 heads, feed-forward 128, a vocabulary of 1,000 ids,
dropout 0.1), ApproxNDCG; the CPU's model and vector extensions are printed
with two tables (``--tables``):

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
* Memory: one list per step of 10, 50, 100 and 200 documents (``--documents``)
  of 128 tokens (``--tokens``), blocked global-local against full attention.

Run: ``python -m pipelines.benchmarks.memory_sweep --family features --output
attention_memory.png`` or ``nice -n 10 python -m pipelines.benchmarks.memory_sweep
--family text``
"""

from __future__ import annotations

import argparse
import sys

from pipelines.benchmarks.bench_support import CAPPED_STEPS, cpu_extensions, run_child
from pipelines.flag_table import add_flag

# argv: model, items per list, items per batch, steps, spare GiB.
FEATURES_CHILD = """
import sys
import numpy as np
import tensorflow as tf
from pipelines.benchmarks.bench_support import feature_manifest
from tfr_rankformer.training.train_config import TrainConfig
from tfr_rankformer.training.training_setup import build_compiled_model

name, length, items, steps, spare = sys.argv[1], *map(int, sys.argv[2:5]), float(sys.argv[5])
batch = max(items // length, 1)
config = TrainConfig(model=name, data="-", model_dir="-", alpha=1.0)
_, model = build_compiled_model(config, feature_manifest(46), steps_per_epoch=100, xla=False)
rng = np.random.default_rng(0)
inputs = {
    "features": tf.constant(rng.normal(size=(batch, length, 46)).astype(np.float32)),
    "mask": tf.ones((batch, length), tf.bool),
}
targets = {
    "scores": tf.constant(rng.integers(0, 3, (batch, length)).astype(np.float32)),
    "list_quality": tf.constant(rng.integers(0, 3, (batch, 1)).astype(np.float32)),
}
"""

# argv: attention, lists, documents per list, tokens per document, steps, spare GiB.
TEXT_CHILD = """
import sys
import numpy as np
import tensorflow as tf
from tfr_rankformer.text.listformer import build_text_model
from tfr_rankformer.ranking.losses import get_score_loss
from tfr_rankformer.model.models import ModelConfig

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
"""

FAMILIES = {"features": FEATURES_CHILD, "text": TEXT_CHILD}
MEMORY_GB = {"features": 12.0, "text": 6.0}
MODELS = {"rankformer": "full attention", "summary_token_ranker": "summary tokens"}
QUERY_TOKENS = 8
ATTENTIONS = {"blocked": "global-local", "full": "full"}
SPEED_ATTENTIONS = {
    "blocked": "global-local (blocked)",
    "dense_masked": "global-local (dense masked)",
    "full": "full",
}


def run_configuration(family: str, settings: list, args) -> dict:
    """One configuration of ``family`` in its own capped process: its JSON result.

    ``settings`` are the family's child arguments before the steps and the spare
    GiB: ``[model, items per list, items per batch]`` for ``features``,
    ``[attention, lists, documents, tokens]`` for ``text``.
    """
    argv = [str(value) for value in (*settings, args.steps, args.memory_gb)]
    return run_child(FAMILIES[family] + CAPPED_STEPS, argv)


def _cell(value, fmt="{:,.0f}") -> str:
    return "-" if value is None else fmt.format(value)


def _added(result: dict):
    peak = result["peak_rss_mb"]
    return None if peak is None else peak - result["built_rss_mb"]


def _table_head(*columns: str) -> None:
    print("| " + " | ".join(columns) + " |")
    print("|" + "---|" * len(columns))


def _table_row(*cells) -> None:
    print("| " + " | ".join(str(cell) for cell in cells) + " |", flush=True)


def _time_cell(result: dict, value) -> str:
    if value is not None:
        return _cell(value)
    return "did not run (killed)" if result["peak_rss_mb"] is None else "out of memory"


def features_sweep(args) -> dict:
    """Prints the ``features`` table and writes its plot; model -> length -> result."""
    lengths = [int(n) for n in args.lengths.split(",")]
    results = {model: {} for model in MODELS}
    print(f"{'items':>7} {'attention':<15} {'lists':>6} {'peak MB':>9} {'ms/step':>10}")
    for length in lengths:
        for model, label in MODELS.items():
            result = run_configuration("features", [model, length, args.items], args)
            results[model][length] = result
            ms = result["ms_per_step"]
            print(
                f"{length:>7,} {label:<15} {max(args.items // length, 1):>6} "
                f"{_cell(result['peak_rss_mb']):>9} "
                f"{'out of memory' if ms is None else f'{ms:,.0f}':>10}",
                flush=True,
            )
    _plot(results, lengths, args.output)
    print(f"wrote {args.output}")
    return results


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


def speed_table(args) -> list[dict]:
    """Prints the ``text`` speed table; its rows (for callers and tests)."""
    lists, docs, tokens = args.speed_lists, args.speed_documents, args.speed_tokens
    per_step = lists * sequence_tokens(docs, tokens)
    print(
        f"\nSpeed: {lists} lists per step of {docs} documents of {tokens} tokens and a query "
        f"of {QUERY_TOKENS} tokens ({per_step:,} tokens per step); mean of {args.steps} steps"
    )
    _table_head("attention", "tokens/s", "ms/step", "CPU ms/step", "peak MB", "added MB")
    rows = []
    for attention, label in SPEED_ATTENTIONS.items():
        result = run_configuration("text", [attention, lists, docs, tokens], args)
        ms = result["ms_per_step"]
        rate = None if ms is None else per_step / (ms / 1000)
        cpu_ms = result.get("cpu_ms_per_step")
        peak = result["peak_rss_mb"]
        cells = [_cell(rate), _time_cell(result, ms), _cell(cpu_ms), _cell(peak)]
        _table_row(label, *cells, _cell(_added(result)))
        rows.append(dict(result, attention=attention, tokens_per_second=rate))
    return rows


def memory_table(args) -> list[dict]:
    """Prints the ``text`` memory table (one list per step, long lists); its rows."""
    print(
        f"\nMemory: one list per step, query of {QUERY_TOKENS} tokens, documents of "
        f"{args.tokens} tokens; mean of {args.steps} steps"
    )
    _table_head(
        "documents", "tokens in the sequence", "attention", "peak MB", "added MB", "ms/step"
    )
    rows = []
    for docs in [int(n) for n in args.documents.split(",") if n]:
        for attention, label in ATTENTIONS.items():
            result = run_configuration("text", [attention, 1, docs, args.tokens], args)
            memory = [_cell(result["peak_rss_mb"]), _cell(_added(result))]
            tokens = f"{sequence_tokens(docs, args.tokens):,}"
            _table_row(docs, tokens, label, *memory, _time_cell(result, result["ms_per_step"]))
            rows.append(dict(result, attention=attention, documents=docs))
    return rows


def text_sweep(args, tables: set[str]) -> None:
    """The ``text`` family's header and ``tables``."""
    print(f"CPU: {cpu_extensions()}")
    print(
        "Listformer, 2 layers, width 64, 2 heads, feed-forward 128, dropout 0.1; "
        "training steps (ApproxNDCG, AdamW)"
    )
    if "speed" in tables:
        speed_table(args)
    if "memory" in tables:
        memory_table(args)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--family", choices=sorted(FAMILIES), required=True, help="the models compared"
    )
    add_flag(parser, "steps")
    add_flag(
        parser,
        "memory_gb",
        help="address space each run may add, GiB. Default: 12 (features), 6 (text)",
    )
    features = parser.add_argument_group("--family features")
    features.add_argument("--lengths", default="256,1024,4096,16384")
    add_flag(features, "items", default=16384, help="items per batch")
    add_flag(features, "output", default="attention_memory.png", help="the PNG plot")
    text = parser.add_argument_group("--family text")
    text.add_argument("--speed-lists", type=int, default=16, help="lists per speed step")
    text.add_argument("--speed-documents", type=int, default=20, help="documents per list")
    text.add_argument("--speed-tokens", type=int, default=64, help="tokens per document")
    text.add_argument(
        "--documents", default="10,50,100,200", help="documents per list of the memory table"
    )
    text.add_argument("--tokens", type=int, default=128, help="tokens per document (memory)")
    text.add_argument(
        "--tables", default="speed,memory", help="the tables to print: speed, memory or both"
    )
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.memory_gb is None:
        args.memory_gb = MEMORY_GB[args.family]
    if args.family == "features":
        features_sweep(args)
        return 0
    tables = set(args.tables.split(","))
    if not tables or tables - {"speed", "memory"}:
        raise SystemExit(f"--tables: speed and/or memory, got {args.tables!r}")
    text_sweep(args, tables)
    return 0


if __name__ == "__main__":
    sys.exit(main())
