"""``tfr-convert``: LETOR folds (or TFDS, or synthetic data) to ELWC TFRecords.

Examples::

    tfr-convert --input MSLR-WEB30K --output data/web30k --simulate-clicks
    tfr-convert --input ../data/MQ2008 --output data/mq2008 --folds all
    tfr-convert --input tfds:mslr_web/30k_fold1 --output data/web30k_tfds
    tfr-convert --input synthetic --output data/synthetic --simulate-clicks
    tfr-convert --input tfr_libsvm_dir --output data/libsvm --duplicate-features last

    # TF-Ranking-style ELWC (files named train*/vali*/test* in a directory, a glob,
    # or train=GLOB,vali=GLOB,test=GLOB):
    tfr-convert --input elwc:tfr_data --elwc-features 'custom_features_{1..136}' \\
        --elwc-label relevance --output data/from_elwc

    # Text ranking data to the text ELWC (query_tokens, document_tokens, relevance):
    tfr-convert --input synthetic-text --synthetic-lists 3000 --output data/text
    tfr-convert --input trec --queries queries.tsv --collection collection.tsv \\
        --qrels qrels.txt --run run.txt --max-list-size 100 --output data/trec_text
    tfr-convert --input trec:DIR --output data/trec_text

    # On Apache Beam (pip install .[beam]); Beam pipeline options follow:
    tfr-convert --runner DirectRunner --input ../data/MQ2008 --output data/mq2008
    tfr-convert --runner DataflowRunner --train-files 'gs://b/web30k/train-*.txt.gz' \\
        --vali-files 'gs://b/web30k/vali-*.txt.gz' --test-files 'gs://b/web30k/test-*.txt.gz' \\
        --num-features 136 --max-relevance 4 --output gs://b/elwc/web30k --max-bad-lines 100 \\
        --project P --region europe-west1 --temp_location gs://b/tmp --setup_file ./setup.py
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import sys

from pipelines.cli_common import make_parser
from pipelines.convert_option_groups import (
    BEAM_FLAGS,
    add_beam_arguments,
    add_click_arguments,
    add_elwc_arguments,
    add_synthetic_arguments,
)
from pipelines.flag_table import add_flag
from pipelines.text_convert_options import add_text_arguments, check_text_flags, text_main
from pipelines.tf_log_level import add_verbose_flag, start_command
from tfr_rankformer.inputs.manifest import MANIFEST_NAME
from tfrecords_tools.click_simulation import ClickConfig
from tfrecords_tools.convert import ConvertConfig, convert
from tfrecords_tools.datasets import DATASETS, DatasetNotFoundError
from tfrecords_tools.letor.letor_parser import LetorFormatError
from tfrecords_tools.normalization import NORMALIZATIONS
from tfrecords_tools.text.text_sources import is_text_input
from tfrecords_tools.tfrecord_reader import TFRecordFormatError

__all__ = ["build_parser", "main"]

logger = logging.getLogger("tfr-convert")

# Flags whose values go into ClickConfig / SyntheticConfig rather than ConvertConfig.
_CLICK_FLAGS = {f.name for f in dataclasses.fields(ClickConfig)}
_ELWC_FLAGS = {
    "elwc_features": "features",
    "elwc_label": "label",
    "elwc_context": "context",
    "elwc_qid": "qid",
    "elwc_missing_value": "missing_value",
}
_SYNTHETIC_FLAGS = {
    "synthetic_lists": "train_queries",
    "synthetic_list_size": "mean_list_size",
    "synthetic_length_spread": "length_spread",
}


def build_parser() -> argparse.ArgumentParser:
    """``tfr-convert``'s parser: its option groups in ``--help``'s order."""
    p = make_parser(
        "tfr-convert",
        "Convert learning-to-rank data in LETOR/SVMlight format to ELWC TFRecord "
        "shards plus manifest.json (counts, label histograms, checksums, parameters and "
        "normalisation statistics), optionally simulating implicit clicks as the RankFormer "
        "paper does.",
        __doc__,
    )
    _add_io_arguments(p)
    _add_list_arguments(p)
    add_elwc_arguments(p)
    add_click_arguments(p)
    add_synthetic_arguments(p)
    add_text_arguments(p)
    _add_resource_arguments(p)
    add_beam_arguments(p)
    _add_display_arguments(p)
    return p


_INPUT_HELP = (
    "a directory in LETOR layout (Fold1..N/{train,vali,test}.txt or one such set; "
    ".gz accepted), a dataset name looked up under --data-dir, $TFR_DATA_DIR and the "
    f"working directory ({', '.join(DATASETS)}), tfds:NAME read through "
    "tensorflow-datasets (e.g. tfds:mslr_web/30k_fold1), or 'synthetic' (generated "
    "WEB30K-shaped data with list-context effects), or elwc:DIR, elwc:GLOB or "
    "elwc:train=GLOB,vali=GLOB,test=GLOB for TF-Ranking-style ELWC TFRecords (files are "
    "placed in splits by their names' prefix train, vali/valid/eval, test; see --elwc-*); "
    "text ranking data to the text ELWC: 'trec' (files given by --queries, --collection, "
    "--qrels, --run), trec:DIR (those files found in DIR by their usual names) or "
    "'synthetic-text' (generated lists whose relevance depends on the list)"
)


def _add_io_arguments(p: argparse.ArgumentParser) -> None:
    """The ``input and output`` group: what is read, where it goes, which folds."""
    io = p.add_argument_group("input and output")
    add_flag(io, "input", help=_INPUT_HELP)
    add_flag(
        io,
        "output",
        help="output directory (must not exist, or be empty, unless --overwrite; a "
        "failure leaves it as it was)",
    )
    add_flag(io, "data_dir", help="where dataset names and TFDS data are looked up first")
    add_flag(
        io,
        "overwrite",
        default=None,
        help="replace an existing output directory, but only one tfr-convert wrote "
        "(its manifest.json, shards, source/, FoldN/): anything else in it is "
        "refused, never deleted",
    )
    add_flag(
        io,
        "config",
        help="JSON file of settings (ConvertConfig fields); flags "
        "given on the command line override it",
    )
    _add_fold_arguments(io)


def _add_fold_arguments(io: argparse._ArgumentGroup) -> None:
    """``--fold`` or ``--folds``, ``--shards`` and ``--tfds-download`` (in ``io``)."""
    folds = io.add_mutually_exclusive_group()
    add_flag(folds, "fold", help="fold to convert (default: 1)")
    add_flag(
        folds,
        "folds",
        choices=["all"],
        help="'all': convert every fold, each into OUTPUT/FoldN",
        default=None,
    )
    io.add_argument("--shards", type=int, help="TFRecord files per split (default: 1)")
    io.add_argument(
        "--tfds-download",
        action="store_true",
        default=None,
        help="let tensorflow-datasets download and prepare a missing tfds: dataset",
    )


def _add_list_arguments(p: argparse.ArgumentParser) -> None:
    """The ``lists and features`` group: list sizes, feature count, labels, normalisation."""
    lists = p.add_argument_group("lists and features")
    lists.add_argument(
        "--max-list-size",
        type=int,
        help="subsample longer lists to this many items (seeded; counted in the "
        "manifest); for text inputs, keep the run's first N documents. Default: keep every item",
    )
    lists.add_argument(
        "--min-list-size",
        type=int,
        help="drop lists with fewer items (counted in the manifest). Default: 1",
    )
    lists.add_argument(
        "--num-features",
        type=int,
        help="feature count d (lines beyond it are errors). Default: the dataset's, else the "
        "largest index in the files, which may be at most 4 x the largest index left after "
        "setting aside the widest line of every 100 (or 100): one far wider line is an error",
    )
    lists.add_argument(
        "--max-relevance",
        type=int,
        help="highest explicit label. Default: the dataset's, else the largest label in the files",
    )
    add_flag(
        lists,
        "duplicate_features",
        help="a LETOR line that repeats a feature index: 'error', or keep the value "
        "that comes 'last' (what TF-Ranking's LibSVM reader does) or 'first'; "
        "such lines are counted in the manifest. Features listed out of order "
        "are always accepted (sorted and counted). Default: error",
    )
    _add_normalization_arguments(lists)


def _add_normalization_arguments(lists: argparse._ArgumentGroup) -> None:
    """``--normalize`` and its quantiles (in the ``lists and features`` group)."""
    lists.add_argument(
        "--normalize",
        choices=NORMALIZATIONS,
        help="normalisation the models apply in-graph (all are fitted on train "
        "and stored). Default: quantile, the paper's",
    )
    lists.add_argument(
        "--quantile-sample-size",
        type=int,
        help="train items sampled (reservoir) for the quantiles. Default: 100000",
    )
    lists.add_argument("--num-quantiles", type=int, help="quantiles per feature. Default: 1000")


def _add_resource_arguments(p: argparse.ArgumentParser) -> None:
    """The ``resources`` group: parallel workers and block size."""
    run = p.add_argument_group("resources")
    add_flag(
        run,
        "workers",
        help="processes that parse and encode LETOR blocks in parallel (1: all in "
        "this process). Default: one per core, at most 4",
    )
    run.add_argument(
        "--chunk-mb",
        type=int,
        help="size of the blocks read at once, in MiB; bounds memory. Default: 8",
    )


def _add_display_arguments(p: argparse.ArgumentParser) -> None:
    """The ``display`` group: progress bars and logging."""
    out = p.add_argument_group("display")
    add_flag(out, "no_progress", help="hide the progress bars")
    add_flag(out, "log_level", help="logging level")
    add_verbose_flag(out)


def _settings(args: argparse.Namespace) -> ConvertConfig:
    values: dict = {}
    if args.config:
        with open(args.config, encoding="utf-8") as f:
            values = json.load(f)
    flags = {k: v for k, v in vars(args).items() if v is not None}
    clicks = dict(values.get("clicks") or {})
    synthetic = dict(values.get("synthetic") or {})
    elwc = dict(values.get("elwc") or {})
    for flag, field in _ELWC_FLAGS.items():
        if flag in flags:
            elwc[field] = flags.pop(flag)
    for name in _CLICK_FLAGS & flags.keys():
        clicks[name] = flags.pop(name)
    for flag, field in _SYNTHETIC_FLAGS.items():
        if flag in flags:
            synthetic[field] = flags.pop(flag)
    if "train_queries" in synthetic and "vali_queries" not in synthetic:
        synthetic["vali_queries"] = synthetic["test_queries"] = max(
            1, synthetic["train_queries"] // 3
        )
    if "chunk_mb" in flags:
        flags["chunk_bytes"] = flags.pop("chunk_mb") << 20
    if flags.pop("folds", None) == "all":
        values["all_folds"] = True
    for name in ("config", "no_progress", "log_level", "verbose", *BEAM_FLAGS):
        flags.pop(name, None)
    if args.train_files and not values.get("input") and "input" not in flags:
        flags["input"] = "files"
    values.update(flags)
    values["clicks"] = clicks
    values["synthetic"] = synthetic
    values["elwc"] = elwc
    missing = [name for name in ("input", "output") if not values.get(name)]
    if missing:
        raise ValueError(f"missing {' and '.join('--' + m for m in missing)}")
    return ConvertConfig.from_json(values)


def _convert_on_beam(args: argparse.Namespace, config: ConvertConfig, beam_args: list[str]):
    """Runs the Beam pipeline; Apache Beam is imported only here."""
    try:
        from tfrecords_tools.beam.beam_convert import BeamConfig, convert_on_beam
    except ImportError as e:
        raise ValueError(
            f"--runner needs Apache Beam, which is not installed ({e}); "
            "install the extra: pip install .[beam]"
        ) from None
    beam_config = BeamConfig(
        convert=config,
        runner=args.runner,
        pipeline_args=tuple(beam_args),
        max_bad_lines=args.max_bad_lines or 0,
        bad_lines_output=args.bad_lines,
        train_files=tuple(args.train_files or ()),
        vali_files=tuple(args.vali_files or ()),
        test_files=tuple(args.test_files or ()),
        quantile_epsilon=args.quantile_epsilon,
    )
    manifests = convert_on_beam(beam_config)
    bad = sum(s.input["bad_lines"] for m in manifests for s in m.splits.values())
    if bad:
        where = args.bad_lines or f"{config.output.rstrip('/')}.bad_lines.txt"
        print(f"set aside {bad:,} invalid line(s), listed in {where}")
    return manifests


def _check_local_only(parser: argparse.ArgumentParser, args, beam_args: list[str]) -> None:
    """Without --runner, Beam's options and flags are errors."""
    if beam_args:
        parser.error(f"unrecognized arguments: {' '.join(beam_args)}")
    given = [f"--{n.replace('_', '-')}" for n in BEAM_FLAGS[1:] if getattr(args, n) is not None]
    if given:
        parser.error(f"{', '.join(given)} need --runner (the local converter stops at an error)")


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args, beam_args = parser.parse_known_args(argv)
    check_text_flags(parser, args, beam_args)
    if is_text_input(args.input):
        start_command(args)
        return text_main(args)
    if args.runner is None:
        _check_local_only(parser, args, beam_args)
    start_command(args)
    try:
        config = _settings(args)
        if args.runner is None:
            manifests = convert(config, progress=not args.no_progress)
        else:
            manifests = _convert_on_beam(args, config, beam_args)
    except (
        LetorFormatError,
        TFRecordFormatError,
        DatasetNotFoundError,
        FileExistsError,
        ValueError,
        OSError,
    ) as e:
        print(f"tfr-convert: error: {e}", file=sys.stderr)
        return 1
    for manifest in manifests:
        counts = ", ".join(
            f"{name} {s.num_lists:,} lists / {s.num_items:,} items"
            for name, s in manifest.splits.items()
        )
        label = f"Fold{manifest.fold}: " if manifest.fold and config.all_folds else ""
        print(f"{label}{counts}")
    print(f"wrote {config.output} ({MANIFEST_NAME} describes it)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
