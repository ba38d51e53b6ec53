"""``tfr-convert``'s text inputs (``--input trec``, ``trec:DIR``, ``synthetic-text``).

Imports no TensorFlow: the text ELWC is written by hand-encoded protos.
"""

from __future__ import annotations

import argparse
import dataclasses
import json

from pipelines.flag_table import add_flag
from tfr_rankformer.core.config_io import from_dict
from tfr_rankformer.inputs.manifest import Manifest
from tfrecords_tools.text.synthetic_text import SyntheticTextConfig
from tfrecords_tools.text.text_sources import (
    SYNTHETIC_TEXT,
    TREC_PREFIX,
    convert_synthetic_text,
    find_trec_files,
    is_text_input,
)
from tfrecords_tools.text.trec_config import FILE_FIELDS
from tfrecords_tools.text.trec_convert import TrecConfig, convert_trec

__all__ = [
    "add_text_arguments",
    "check_text_flags",
    "run_text_conversion",
    "text_main",
    "TEXT_FLAGS",
]

TEXT_FLAGS = (*FILE_FIELDS, "split_fractions", "max_query_tokens", "max_document_tokens")
# tfr-convert's options that text inputs use too.
_SHARED_FLAGS = {
    "input",
    "output",
    "overwrite",
    "config",
    "shards",
    "max_list_size",
    "min_list_size",
    "seed",
    "synthetic_lists",
    "synthetic_list_size",
    "no_progress",
    "log_level",
    "verbose",
}


def add_text_arguments(parser: argparse.ArgumentParser) -> None:
    """Adds the options of the text inputs (``trec``, ``trec:DIR``, ``synthetic-text``)."""
    text = parser.add_argument_group(
        "text ranking data (--input trec, trec:DIR or synthetic-text) to the text ELWC "
        "(query_tokens, document_tokens, relevance); also uses --output, --overwrite, "
        "--shards, --seed, --max-list-size (the run's top N per query), --min-list-size, "
        "--synthetic-lists, --synthetic-list-size"
    )
    for flag, help_text in (
        (
            "queries",
            "queries 'qid<TAB>text', split into train/vali/test by a seeded hash of "
            "the qid (--split-fractions)",
        ),
        ("train-queries", "queries of the train split (instead of --queries)"),
        ("vali-queries", "queries of the vali split"),
        ("test-queries", "queries of the test split"),
        (
            "train-qids",
            "qids of the train split, one a line (the first column; a queries TSV "
            "serves too), splitting --queries instead of the hash; queries in no list are "
            "dropped and counted",
        ),
        ("vali-qids", "qids of the vali split, likewise"),
        ("test-qids", "qids of the test split, likewise"),
        (
            "collection",
            "documents 'docid<TAB>text' (further tab-separated columns, e.g. a "
            "title, are joined to the text); streamed, only the run's documents are kept",
        ),
        (
            "qrels",
            "judgements 'qid iteration docid relevance' (TREC qrels); unjudged run "
            "documents get label 0",
        ),
        (
            "run",
            "the first-stage ranking to re-rank: TREC run 'qid Q0 docid rank score tag' "
            "or MS MARCO 'qid<TAB>docid<TAB>rank' (tfr-bm25 run writes one)",
        ),
    ):
        text.add_argument(
            f"--{flag}",
            action="append",
            metavar="FILE",
            help=help_text + "; repeatable, .gz accepted",
        )
    text.add_argument(
        "--split-fractions",
        metavar="TRAIN,VALI,TEST",
        help="shares of the hash split of --queries. Default: 0.8,0.1,0.1",
    )
    add_flag(text, "max_query_tokens", help="cut longer queries (counted). Default: no limit")
    add_flag(text, "max_document_tokens", help="cut longer documents (counted). Default: no limit")


def check_text_flags(parser: argparse.ArgumentParser, args, extra: list[str]) -> None:
    """Refuses options that do not apply to the kind of ``--input`` given."""
    given = {k for k, v in vars(args).items() if v is not None and v is not False}
    if is_text_input(args.input):
        if extra:
            parser.error(f"unrecognized arguments: {' '.join(extra)}")
        wrong = sorted(given - _SHARED_FLAGS - set(TEXT_FLAGS) - {"log_level"})
        what = f"--input {args.input}"
    else:
        wrong = sorted(given & set(TEXT_FLAGS))
        what = "LETOR, tfds: and elwc: inputs"
    if args.input != SYNTHETIC_TEXT and is_text_input(args.input):
        wrong += sorted(given & {"synthetic_lists", "synthetic_list_size"})
    if wrong:
        flags = ", ".join("--" + name.replace("_", "-") for name in wrong)
        verb = "does" if len(wrong) == 1 else "do"
        parser.error(f"{flags} {verb} not apply to {what}")


def _fractions(text: str) -> tuple:
    try:
        values = tuple(float(v) for v in text.split(","))
    except ValueError:
        raise ValueError(
            f"--split-fractions {text!r}: expected three numbers like 0.8,0.1,0.1"
        ) from None
    return values


def _trec_config(args, values: dict) -> TrecConfig:
    if args.input.startswith(TREC_PREFIX + ":"):
        found = find_trec_files(args.input[len(TREC_PREFIX) + 1 :])
        given_queries = any(values.get(k) or getattr(args, k) for k in FILE_FIELDS[:4])
        for field, paths in found.items():
            is_query_file = field in FILE_FIELDS[:4]
            if not values.get(field) and not (is_query_file and given_queries):
                values[field] = paths
    for name in FILE_FIELDS:
        if getattr(args, name):
            values[name] = tuple(getattr(args, name))
    return TrecConfig.from_json(values)


def run_text_conversion(args) -> Manifest:
    """Converts a text input as the parsed ``args`` ask; returns the manifest.

    Raises:
      TrecFormatError, ValueError, FileExistsError, OSError: with a message for the user.
    """
    values: dict = {}
    if args.config:
        with open(args.config, encoding="utf-8") as f:
            values = json.load(f)
    synthetic_values = dict(values.pop("synthetic", None) or {})
    for flag, field in (
        ("output", "output"),
        ("overwrite", "overwrite"),
        ("shards", "shards"),
        ("max_list_size", "max_list_size"),
        ("min_list_size", "min_list_size"),
        ("seed", "seed"),
        ("max_query_tokens", "max_query_tokens"),
        ("max_document_tokens", "max_document_tokens"),
    ):
        if getattr(args, flag) is not None:
            values[field] = getattr(args, flag)
    if args.split_fractions:
        values["split_fractions"] = _fractions(args.split_fractions)
    if not values.get("output"):
        raise ValueError("missing --output")
    progress = not args.no_progress
    if args.input == SYNTHETIC_TEXT:
        if args.synthetic_lists is not None:
            synthetic_values["train_queries"] = args.synthetic_lists
            synthetic_values.setdefault("vali_queries", max(1, args.synthetic_lists // 3))
            synthetic_values.setdefault("test_queries", max(1, args.synthetic_lists // 3))
        if args.synthetic_list_size is not None:
            synthetic_values["mean_list_size"] = args.synthetic_list_size
        synthetic_values.setdefault("seed", values.get("seed", 0))
        synthetic = from_dict(SyntheticTextConfig, synthetic_values, what="synthetic settings")
        given = [name for name in FILE_FIELDS if values.get(name) or getattr(args, name)]
        if given:
            flags = ", ".join("--" + name.replace("_", "-") for name in given)
            raise ValueError(f"--input {SYNTHETIC_TEXT} generates its files; drop {flags}")
        options = {k: v for k, v in values.items() if k not in ("output", "overwrite")}
        unknown = set(options) - {f.name for f in dataclasses.fields(TrecConfig)}
        if unknown:
            raise ValueError(f"Unknown text conversion settings {sorted(unknown)}")
        return convert_synthetic_text(
            synthetic,
            output=values["output"],
            overwrite=bool(values.get("overwrite")),
            progress=progress,
            **options,
        )
    return convert_trec(_trec_config(args, values), progress=progress)


def text_main(args) -> int:
    """``tfr-convert``'s run for a text input: converts, prints the counts; the exit code."""
    import sys

    from tfrecords_tools.text.trec_files import TrecFormatError

    try:
        manifest = run_text_conversion(args)
    except (TrecFormatError, FileExistsError, ValueError, OSError) as e:
        print(f"tfr-convert: error: {e}", file=sys.stderr)
        return 1
    counts = ", ".join(
        f"{name} {s.num_lists:,} lists / {s.num_items:,} items"
        for name, s in manifest.splits.items()
    )
    print(counts)
    filtered = ", ".join(f"{k.replace('_', ' ')} {v:,}" for k, v in manifest.filtered.items() if v)
    if filtered:
        print(f"filtered or cut: {filtered}")
    print(f"wrote {args.output} (manifest.json describes it)")
    return 0
