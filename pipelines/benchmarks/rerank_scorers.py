"""Scorers of a re-ranking benchmark's text lists: a TREC run's scores, the zero-shot cosine
of sentence embeddings, and the Listformer's before and after ``tfr-train``."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Sequence

import numpy as np

from pipelines.benchmarks.bench_support import run_stage
from tfr_rankformer.core.config_io import write_json
from tfr_rankformer.core.run_layout import read_json
from tfrecords_tools.text.text_elwc import TextList

Scorer = Callable[[Sequence[TextList]], list]
# Listformer variant -> its first_stage setting (None: tfr-train's default).
VARIANTS = {"listformer": None, "listformer_no_fs": False}


def list_metrics(lists: Sequence[TextList], scores: list, ks=(1, 5, 10)) -> dict:
    """``evaluate_rankings`` of one score array per list on the lists' labels."""
    from tfr_rankformer.ranking.ranking_metrics import evaluate_rankings

    size = max(len(t.relevance) for t in lists)
    padded = np.zeros([3, len(lists), size])  # scores, labels, mask
    for row, (t, values) in enumerate(zip(lists, scores)):
        n = len(values)
        padded[0, row, :n], padded[1, row, :n], padded[2, row, :n] = values, t.relevance, 1
    labels = padded[1]
    return evaluate_rankings(padded[0], labels, labels, padded[2].astype(bool), ks=ks)


def read_run_scores(path: str) -> dict[tuple[str, str], float]:
    """``(qid, docid) -> score`` of a TREC run."""
    from tfrecords_tools.text.trec_files import read_run

    return {(qid, docid): score for _, qid, docid, _, score, _ in read_run(path)}


def bm25_scorer(run_scores: dict[tuple[str, str], float]) -> Scorer:
    """The run's own scores of each list's documents."""
    return lambda lists: [
        np.array([run_scores[t.query_id, d] for d in t.document_ids]) for t in lists
    ]


class CosineScorer:
    """The zero-shot cosine of each list's query and documents, each text encoded once."""

    def __init__(self, encoder, *, max_query_tokens: int, max_document_tokens: int, batch_size):
        self.encoder, self.batch_size = encoder, batch_size
        self.caps = {"query": max_query_tokens, "document": max_document_tokens}
        self.cache: dict[str, dict[str, np.ndarray]] = {"query": {}, "document": {}}

    def _embeddings(self, kind: str, texts: list[str]) -> np.ndarray:
        cache = self.cache[kind]
        missing = sorted({t for t in texts if t not in cache})
        if missing:
            vectors = self.encoder.encode(
                missing, max_tokens=self.caps[kind], batch_size=self.batch_size, progress=True
            )
            cache.update(zip(missing, vectors))
        return np.stack([cache[t] for t in texts]) if texts else np.zeros([0, 0], np.float32)

    def __call__(self, lists: Sequence[TextList]) -> list:
        queries = self._embeddings("query", [" ".join(t.query_tokens) for t in lists])
        documents = self._embeddings(
            "document", [" ".join(tokens) for t in lists for tokens in t.document_tokens]
        )
        scores, start = [], 0
        for query, t in zip(queries, lists):
            end = start + len(t.document_ids)
            scores.append(documents[start:end] @ query)  # [n, D] @ [D] -> [n]
            start = end
        return scores


class ModelScorer:
    """A text model's scores of each list, one list a call (a list of 100 is 12,800 tokens)."""

    def __init__(self, model, tokenizer):
        self.model, self.tokenizer = model, tokenizer

    def __call__(self, lists: Sequence[TextList]) -> list:
        import tensorflow as tf

        from tfr_rankformer.text import text_data
        from tfr_rankformer.text.text_runs import takes_first_stage, text_model_inputs

        first_stage = takes_first_stage(self.model)
        scores = []
        for t in lists:
            batch = {
                text_data.QUERY: tf.constant([" ".join(t.query_tokens)]),
                text_data.DOCUMENTS: tf.constant([[" ".join(d) for d in t.document_tokens]]),
                text_data.MASK: tf.ones([1, len(t.document_ids)], tf.bool),
            }
            if first_stage:
                batch[text_data.FIRST_STAGE] = tf.constant([t.first_stage_scores], tf.float32)
            inputs = text_model_inputs(self.tokenizer, batch, first_stage=first_stage)
            scores.append(self.model(inputs, training=False)["scores"].numpy()[0])
        return scores


def initial_scorer(args, fold_dir: str, variant: str) -> Scorer:
    """The untrained Listformer's scorer: what training starts from."""
    from tfr_rankformer.core.model_families import family_of
    from tfr_rankformer.core.multi_worker import WorkerRole
    from tfr_rankformer.training.train_config import TrainConfig

    settings = dict(model="listformer", data=fold_dir, model_dir="unused", init_from=args.init_from)
    settings.update(first_stage=VARIANTS[variant], max_query_tokens=args.max_query_tokens)
    settings["max_document_tokens"] = args.max_document_tokens
    family = family_of("listformer").load()
    run = family.prepare(TrainConfig.from_flat(settings), worker=WorkerRole())
    model, _ = family.build(run, steps_per_epoch=1, xla=False)
    return ModelScorer(model, run.extra.tokenizer)


def train_variant(args, fold_dir: str, number: int, variant: str) -> dict:
    """Trains ``variant`` on the fold in a child ``tfr-train`` (``--reuse-runs``: unless done);
    its run's figures, or a ``RuntimeError`` naming the log."""
    model_dir = os.path.join(args.output, "runs", f"Fold{number}", variant)
    flags = ["--model", "listformer", "--data", fold_dir, "--model-dir", model_dir]
    flags += ["--init-from", args.init_from, "--no-export", "--overwrite"]
    flags += ["--first-stage", "off"] if VARIANTS[variant] is False else []
    flags += ["--evaluate-splits", "none"]  # the benchmark scores the test lists itself
    flags += ["--max-query-tokens", str(args.max_query_tokens)]
    flags += ["--max-document-tokens", str(args.max_document_tokens)]
    if args.epochs:
        flags += ["--epochs", str(args.epochs)]
    log = os.path.join(args.output, "logs", f"train_Fold{number}_{variant}.log")
    peak_file = model_dir + ".peak_rss.json"  # beside the run: tfr-train owns its directory
    if args.reuse_runs and os.path.isfile(os.path.join(model_dir, "metrics.json")):
        return run_figures(model_dir, peak=read_json(peak_file).get("peak_rss_bytes"))
    stage = run_stage([sys.executable, "-m", "pipelines.train_cli", *flags], log)
    if stage["returncode"] != 0:
        raise RuntimeError(f"tfr-train failed on fold {number} ({variant}); see {log}")
    write_json(peak_file, {"peak_rss_bytes": stage["peak_rss_bytes"]})
    return run_figures(model_dir, peak=stage["peak_rss_bytes"])


def run_figures(model_dir: str, *, peak: int | None) -> dict:
    """A trained run's epochs, seconds per epoch and estimated peak, and ``peak`` RSS."""
    training = read_json(os.path.join(model_dir, "metrics.json"))["training"]
    return {
        "model_dir": model_dir,
        "epochs": training["epochs_completed"],
        "seconds_per_epoch": round(training["seconds"] / max(1, training["epochs_this_run"]), 1),
        "peak_rss_bytes": peak,
        "estimated_peak_bytes": training["estimated_peak_bytes"],
    }


def trained_scorer(model_dir: str, precision: str = "float32") -> Scorer:
    """The trained run's scorer, with its best weights, computing in ``precision``."""
    from tfr_rankformer.text.text_runs import load_text_run

    _, tokenizer, model, _ = load_text_run(model_dir, precision=precision)
    return ModelScorer(model, tokenizer)
