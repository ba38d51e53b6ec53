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
import dataclasses
import logging
import sys

from pipelines.cli_common import make_parser
from pipelines.tf_log_level import Display, one_error_line, start_command
from tfr_rankformer.core.config_io import add_options, from_args, setting, write_json
from tfr_rankformer.text.bm25 import Bm25Config

__all__ = ["build_parser", "main"]

logger = logging.getLogger("tfr-bm25")


@dataclasses.dataclass(frozen=True)
class RunOptions:
    """``tfr-bm25 run``'s options."""

    queries: list | None = setting(
        None, "'qid<TAB>text' (repeatable)", action="append", metavar="FILE"
    )
    collection: list | None = setting(
        None,
        "'docid<TAB>text' (further columns joined to the text; repeatable)",
        action="append",
        metavar="FILE",
    )
    output: str | None = setting(None, "the run file to write")
    top_k: int = setting(100, "documents per query")
    tag: str = setting("bm25", "the run's tag column")


@dataclasses.dataclass(frozen=True)
class EvalOptions:
    """``tfr-bm25 eval``'s options."""

    data: str | None = setting(None, "the dataset directory (its manifest.json at the top)")
    split: str = setting("test", "the split to score")
    output: str | None = setting(None, "also write the metrics to this JSON file")


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
    evaluate = commands.add_parser(
        "eval",
        help="BM25's NDCG@1,5,10 on a text dataset's lists",
        description="Score the lists of a text ELWC dataset (tfr-convert --input trec or "
        "synthetic-text) with BM25 and report NDCG@1,5,10 x 100 (lists whose labels are all "
        "equal left out). BM25's index statistics come from the documents of the dataset's "
        "lists, every split, each document once.",
    )
    for parser, options in ((run, RunOptions), (evaluate, EvalOptions)):
        add_options(parser, options)
        group = parser.add_argument_group("BM25 (bm25s)")
        add_options(group, Bm25Config)
        bars = {"no_progress": {"help": "hide the progress bars"}}
        add_options(group, Display, overrides=bars, only=("no_progress", "verbose"))
    return p


def _run(parsed) -> None:
    from tfrecords_tools.text.bm25_run import write_bm25_run

    args = from_args(parsed, RunOptions)
    missing = [f for f in ("queries", "collection", "output") if not getattr(args, f)]
    if missing:
        raise ValueError(f"missing {' and '.join('--' + m for m in missing)}")
    config = from_args(parsed, Bm25Config)
    counts = write_bm25_run(
        args.queries,
        args.collection,
        args.output,
        top_k=args.top_k,
        config=config,
        tag=args.tag,
        progress=not parsed.no_progress,
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


def _eval(parsed) -> None:
    from tfrecords_tools.text.bm25_run import evaluate_bm25_splits

    args = from_args(parsed, EvalOptions)
    if not args.data:
        raise ValueError("missing --data")
    config = from_args(parsed, Bm25Config)
    metrics = evaluate_bm25_splits(args.data, (args.split,), config=config)[args.split]
    ndcg = "  ".join(f"{k.upper()} {v:.2f}" for k, v in metrics.items() if k.startswith("ndcg@"))
    print(
        f"BM25 on {args.data} [{args.split}]: {ndcg}  ({metrics['num_lists_counted']:,} of "
        f"{metrics['num_lists']:,} lists counted; index of {metrics['index_documents']:,} "
        "documents)"
    )
    if args.output:
        write_json(args.output, metrics)
        print(f"wrote {args.output}")


@one_error_line("tfr-bm25")
def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.error("choose a command: run or eval")
    start_command(args, log_level="INFO")
    _run(args) if args.command == "run" else _eval(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
