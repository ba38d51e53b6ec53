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
import logging
import sys
from dataclasses import fields

from pipelines.cli_common import make_parser
from pipelines.text_convert_options import TEXT_GROUP, check_text_flags, run_text_conversion
from pipelines.tf_log_level import Display, one_error_line, start_command
from tfr_rankformer.core.config_io import add_options, given, load_settings
from tfr_rankformer.inputs.manifest import MANIFEST_NAME
from tfrecords_tools.beam.beam_config import BeamConfig
from tfrecords_tools.click_simulation import ClickConfig
from tfrecords_tools.convert import ConvertConfig, convert
from tfrecords_tools.datasets import DatasetNotFoundError
from tfrecords_tools.elwc_input import ElwcConfig
from tfrecords_tools.synthetic import SyntheticConfig
from tfrecords_tools.text.text_sources import is_text_input
from tfrecords_tools.text.trec_config import TrecConfig

__all__ = ["build_parser", "main"]

logger = logging.getLogger("tfr-convert")


_BEAM_ORDER = ("runner", "train_files", "vali_files", "test_files", "max_bad_lines")
_BEAM_ORDER += ("bad_lines_output", "quantile_epsilon")
_LISTS = ("max_list_size", "min_list_size", "num_features", "max_relevance")
_LISTS += ("duplicate_features", "normalize", "quantile_sample_size", "num_quantiles")


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
    io = p.add_argument_group("input and output")
    add_options(io, ConvertConfig, only=("input", "output", "data_dir", "overwrite"))
    io.add_argument(
        "--config",
        help="JSON file of settings (ConvertConfig fields); flags given on the command line "
        "override it",
    )
    folds = io.add_mutually_exclusive_group()
    add_options(folds, ConvertConfig, only=("fold", "all_folds"), overrides=_ALL_FOLDS)
    add_options(io, ConvertConfig, only=("shards", "tfds_download"))
    add_options(p.add_argument_group("lists and features"), ConvertConfig, only=_LISTS)
    elwc = p.add_argument_group("ELWC input (--input elwc:...), one feature per name per item")
    add_options(elwc, ElwcConfig)
    clicks = p.add_argument_group("click simulation (RankFormer paper, Sec. 6.1 and App. C)")
    add_options(clicks, ConvertConfig, only=("simulate_clicks",))
    add_options(clicks, ClickConfig)
    add_options(clicks, ConvertConfig, only=("seed",))
    add_options(p.add_argument_group("synthetic data (--input synthetic)"), SyntheticConfig)
    add_options(p.add_argument_group(TEXT_GROUP), TrecConfig)
    add_options(p.add_argument_group("resources"), ConvertConfig, only=("workers", "chunk_bytes"))
    beam = p.add_argument_group(
        "Apache Beam (pip install .[beam]); any further options go to Beam's PipelineOptions"
    )
    add_options(beam, BeamConfig, only=_BEAM_ORDER)
    display = p.add_argument_group("display")
    shown = ("no_progress", "log_level", "verbose")
    add_options(display, Display, only=shown, overrides={"no_progress": {"help": _BARS}})
    return p


_BARS = "hide the progress bars"


def _all_folds(text: str) -> bool:
    if text != "all":
        raise argparse.ArgumentTypeError(f"invalid choice: {text!r} (choose from 'all')")
    return True


_ALL_FOLDS = {"all_folds": {"type": _all_folds, "metavar": "{all}"}}


def _settings(args: argparse.Namespace) -> ConvertConfig:
    """The ``--config`` file's settings with the flags given over them."""
    values = load_settings(args.config, ConvertConfig) if args.config else {}
    values.update(given(args, ConvertConfig))
    if args.chunk_mb is not None:
        values["chunk_bytes"] = args.chunk_mb << 20  # --chunk-mb is in MiB
    for name, cls in (
        ("clicks", ClickConfig),
        ("synthetic", SyntheticConfig),
        ("elwc", ElwcConfig),
    ):
        values[name] = {**(values.get(name) or {}), **given(args, cls)}
    synthetic = values["synthetic"]
    if "train_queries" in synthetic and "vali_queries" not in synthetic:
        synthetic["vali_queries"] = synthetic["test_queries"] = max(
            1, synthetic["train_queries"] // 3
        )
    if args.train_files and not values.get("input"):
        values["input"] = "files"
    missing = [name for name in ("input", "output") if not values.get(name)]
    if missing:
        raise ValueError(f"missing {' and '.join('--' + m for m in missing)}")
    return ConvertConfig.from_json(values)


def _convert_on_beam(args: argparse.Namespace, config: ConvertConfig, beam_args: list[str]):
    """Runs the Beam pipeline; Apache Beam is imported only here."""
    try:
        from tfrecords_tools.beam.beam_convert import convert_on_beam
    except ImportError as e:
        raise ValueError(
            f"--runner needs Apache Beam, which is not installed ({e}); "
            "install the extra: pip install .[beam]"
        ) from None
    options = given(args, BeamConfig)
    beam_config = BeamConfig(convert=config, pipeline_args=tuple(beam_args), **options)
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
    flags = {f.name: f.metadata.get("flag") or f"--{f.name}" for f in fields(BeamConfig)}
    options = given(args, BeamConfig)
    beam = [flags[name].replace("_", "-") for name in _BEAM_ORDER if name in options]
    if beam:
        parser.error(f"{', '.join(beam)} need --runner (the local converter stops at an error)")


@one_error_line("tfr-convert")
def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args, beam_args = parser.parse_known_args(argv)
    check_text_flags(parser, args, beam_args)
    text = is_text_input(args.input)
    if args.runner is None and not text:
        _check_local_only(parser, args, beam_args)
    start_command(args)
    # Input and output errors; a text input's I/O errors too, as they are.
    errors = (ValueError, OSError) if text else (DatasetNotFoundError, FileExistsError, ValueError)
    try:
        config = None if text else _settings(args)
        if text:
            manifests = [run_text_conversion(args)]
        elif args.runner is None:
            manifests = convert(config, progress=not args.no_progress)
        else:
            manifests = _convert_on_beam(args, config, beam_args)
    except errors as e:
        print(f"tfr-convert: error: {e}", file=sys.stderr)
        return 1
    for manifest in manifests:
        counts = ", ".join(
            f"{name} {s.num_lists:,} lists / {s.num_items:,} items"
            for name, s in manifest.splits.items()
        )
        label = f"Fold{manifest.fold}: " if manifest.fold and config and config.all_folds else ""
        print(f"{label}{counts}")
    filtered = text and ", ".join(
        f"{k.replace('_', ' ')} {v:,}" for k, v in manifest.filtered.items() if v
    )
    if filtered:
        print(f"filtered or cut: {filtered}")
    print(f"wrote {args.output if text else config.output} ({MANIFEST_NAME} describes it)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
