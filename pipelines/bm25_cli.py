"""``tfr-bm25``: BM25 as a first stage (a TREC run) and as a baseline on text ELWC lists.

Examples::

    # a first-stage run for tfr-convert --input trec
    tfr-bm25 run --queries queries.tsv --collection collection.tsv --top-k 100 \\
        --output run.bm25.txt

    # BM25's NDCG on the test lists of a text dataset
    tfr-convert --input synthetic-text --synthetic-lists 3000 --output data/text
    tfr-bm25 eval --data data/text --split test
"""

from __future__ import annotations

import argparse
import logging
import sys

from pipelines.cli_common import make_parser
from pipelines.flag_table import add_flag
from pipelines.tf_log_level import add_verbose_flag, start_command

__all__ = ["build_parser", "main"]

logger = logging.getLogger("tfr-bm25")

_METHODS = ("lucene", "robertson", "atire", "bm25l", "bm25+")


def _add_bm25_options(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("BM25 (bm25s)")
    group.add_argument("--k1", type=float, default=0.9, help="k1. Default: 0.9 (Anserini's)")
    group.add_argument("--b", type=float, default=0.4, help="b. Default: 0.4 (Anserini's)")
    group.add_argument(
        "--method", choices=_METHODS, default="lucene", help="BM25 variant. Default: lucene"
    )
    add_flag(group, "no_progress", help="hide the progress bars")
    add_verbose_flag(group)


def build_parser() -> argparse.ArgumentParser:
    p = make_parser(
        "tfr-bm25",
        "BM25 over the text ELWC's tokens (lower-cased runs of letters and digits): "
        "'run' writes a TREC run of each query's top documents from a collection, 'eval' "
        "reports BM25's NDCG@1,5,10 on the lists of a text dataset.",
        __doc__,
    )
    commands = p.add_subparsers(dest="command", metavar="{run,eval}")
    run = commands.add_parser(
        "run",
        help="write a TREC run of each query's top-k BM25 documents",
        description="Index a collection with BM25 and write each query's top-k documents as "
        "a TREC run 'qid Q0 docid rank score tag' (documents sharing no term with the query "
        "are left out).",
    )
    run.add_argument(
        "--queries", action="append", metavar="FILE", help="'qid<TAB>text' (repeatable)"
    )
    run.add_argument(
        "--collection",
        action="append",
        metavar="FILE",
        help="'docid<TAB>text' (further columns joined to the text; repeatable)",
    )
    add_flag(run, "output", help="the run file to write")
    add_flag(run, "top_k")
    add_flag(run, "tag", default="bm25", help="the run's tag column. Default: bm25")
    _add_bm25_options(run)
    evaluate = commands.add_parser(
        "eval",
        help="BM25's NDCG@1,5,10 on a text dataset's lists",
        description="Score the lists of a text ELWC dataset (tfr-convert --input trec or "
        "synthetic-text) with BM25 and report NDCG@1,5,10 x 100 (lists whose labels are all "
        "equal left out). BM25's index statistics come from the documents of the dataset's "
        "lists, every split, each document once.",
    )
    add_flag(evaluate, "data", help="the dataset directory (its manifest.json at the top)")
    add_flag(evaluate, "split", help="the split to score. Default: test")
    add_flag(evaluate, "output", help="also write the metrics to this JSON file")
    _add_bm25_options(evaluate)
    return p


def _run(args) -> None:
    from tfrecords_tools.text.bm25_run import Bm25Config, write_bm25_run

    missing = [f for f in ("queries", "collection", "output") if not getattr(args, f)]
    if missing:
        raise ValueError(f"missing {' and '.join('--' + m for m in missing)}")
    config = Bm25Config(k1=args.k1, b=args.b, method=args.method)
    counts = write_bm25_run(
        args.queries,
        args.collection,
        args.output,
        top_k=args.top_k,
        config=config,
        tag=args.tag,
        progress=not args.no_progress,
    )
    print(
        f"wrote {args.output}: {counts['run_lines']:,} lines for {counts['queries']:,} queries "
        f"over {counts['documents']:,} documents"
    )
    if counts["queries_short_of_top_k"]:
        print(
            f"{counts['queries_short_of_top_k']:,} queries matched fewer than {args.top_k} "
            f"documents ({counts['queries_without_match']:,} none)"
        )


def _eval(args) -> None:
    from tfrecords_tools.text.bm25_run import Bm25Config, evaluate_bm25

    if not args.data:
        raise ValueError("missing --data")
    config = Bm25Config(k1=args.k1, b=args.b, method=args.method)
    metrics = evaluate_bm25(args.data, split=args.split, config=config)
    ndcg = "  ".join(f"{k.upper()} {v:.2f}" for k, v in metrics.items() if k.startswith("ndcg@"))
    print(
        f"BM25 on {args.data} [{args.split}]: {ndcg}  ({metrics['num_lists_counted']:,} of "
        f"{metrics['num_lists']:,} lists counted; index of {metrics['index_documents']:,} "
        "documents)"
    )
    if args.output:
        from tfr_rankformer.core.config_io import write_json

        write_json(args.output, metrics)
        print(f"wrote {args.output}")


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.error("choose a command: run or eval")
    start_command(args, log_level="INFO")
    from tfrecords_tools.text.trec_files import TrecFormatError

    try:
        _run(args) if args.command == "run" else _eval(args)
    except (TrecFormatError, FileExistsError, ValueError, OSError) as e:
        print(f"tfr-bm25: error: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
