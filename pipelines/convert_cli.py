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
from pipelines.tf_log_level import Display, one_error_line, start_command
from tfr_rankformer.core.config_io import add_options, from_dict, given, load_settings
from tfr_rankformer.inputs.manifest import MANIFEST_NAME, Manifest
from tfrecords_tools.beam.beam_config import BeamConfig
from tfrecords_tools.click_simulation import ClickConfig
from tfrecords_tools.convert import ConvertConfig, convert
from tfrecords_tools.datasets import DatasetNotFoundError
from tfrecords_tools.elwc_input import ElwcConfig
from tfrecords_tools.synthetic import SyntheticConfig
from tfrecords_tools.text.synthetic_text import SyntheticTextConfig
from tfrecords_tools.text.text_sources import (
    SYNTHETIC_TEXT,
    TREC_PREFIX,
    convert_synthetic_text,
    find_trec_files,
    is_text_input,
)
from tfrecords_tools.text.trec_config import FILE_FIELDS, TrecConfig
from tfrecords_tools.text.trec_convert import convert_trec

__all__ = ["build_parser", "main"]

logger = logging.getLogger("tfr-convert")


_BEAM_ORDER = ("runner", "train_files", "vali_files", "test_files", "max_bad_lines")
_BEAM_ORDER += ("bad_lines_output", "quantile_epsilon")
_LISTS = ("max_list_size", "min_list_size", "num_features", "max_relevance")
_LISTS += ("duplicate_features", "normalize", "quantile_sample_size", "num_quantiles")
_TEXT_FLAGS = (*FILE_FIELDS, "split_fractions", "max_query_tokens", "max_document_tokens")
# tfr-convert's options that text inputs take too (their ``TrecConfig`` fields).
_SHARED = ("output", "overwrite", "shards", "max_list_size", "min_list_size", "seed")
_ALSO = {"input", "config", "synthetic_lists", "synthetic_list_size", "no_progress"}
_ALSO |= {"log_level", "verbose"}
_TEXT_GROUP = (
    "text ranking data (--input trec, trec:DIR or synthetic-text) to the text ELWC "
    "(query_tokens, document_tokens, relevance; file options are repeatable, .gz accepted); "
    "also uses --output, --overwrite, --shards, --seed, --max-list-size (the run's top N per "
    "query), --min-list-size, --synthetic-lists, --synthetic-list-size"
)


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
    add_options(p.add_argument_group(_TEXT_GROUP), TrecConfig)
    add_options(p.add_argument_group("resources"), ConvertConfig, only=("workers", "chunk_bytes"))
    beam = p.add_argument_group(
        "Apache Beam (pip install .[beam]); any further options go to Beam's PipelineOptions"
    )
    add_options(beam, BeamConfig, only=_BEAM_ORDER)
    display = p.add_argument_group("display")
    shown = ("no_progress", "log_level", "verbose")
    bars = {"no_progress": {"help": "hide the progress bars"}}
    add_options(display, Display, only=shown, overrides=bars)
    return p


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
    for name, cls in (("clicks", ClickConfig), ("elwc", ElwcConfig)):
        values[name] = {**(values.get(name) or {}), **given(args, cls)}
    values["synthetic"] = _synthetic(values.get("synthetic"), args)
    if args.train_files and not values.get("input"):
        values["input"] = "files"
    missing = [name for name in ("input", "output") if not values.get(name)]
    if missing:
        raise ValueError(f"missing {' and '.join('--' + m for m in missing)}")
    return ConvertConfig.from_json(values)


def _synthetic(values: dict | None, args: argparse.Namespace) -> dict:
    """Synthetic settings under the ``--synthetic-*`` flags; vali and test default to a third."""
    values = {**(values or {}), **given(args, SyntheticConfig)}
    if "train_queries" in values:
        for split in ("vali_queries", "test_queries"):
            values.setdefault(split, max(1, values["train_queries"] // 3))
    return values


def _fractions(text: str) -> tuple:
    try:
        return tuple(float(v) for v in text.split(","))
    except ValueError:
        raise ValueError(
            f"--split-fractions {text!r}: expected three numbers like 0.8,0.1,0.1"
        ) from None


def _convert_text(args: argparse.Namespace) -> tuple[str, list[Manifest]]:
    """Converts a text input as ``args`` ask; returns the output directory and its manifests."""
    values = load_settings(args.config, TrecConfig, extra=("synthetic",)) if args.config else {}
    synthetic = _synthetic(values.pop("synthetic", None), args)
    values.update({k: getattr(args, k) for k in _SHARED if getattr(args, k) is not None})
    values.update(given(args, TrecConfig))
    if args.split_fractions:
        values["split_fractions"] = _fractions(args.split_fractions)
    if not values.get("output"):
        raise ValueError("missing --output")
    output, progress = values["output"], not args.no_progress
    if args.input != SYNTHETIC_TEXT:
        if args.input.startswith(TREC_PREFIX + ":"):
            found = find_trec_files(args.input[len(TREC_PREFIX) + 1 :])
            given_queries = any(values.get(k) for k in FILE_FIELDS[:4])
            for field, paths in found.items():
                if not values.get(field) and not (field in FILE_FIELDS[:4] and given_queries):
                    values[field] = paths
        return output, [convert_trec(TrecConfig.from_json(values), progress=progress)]
    synthetic.setdefault("seed", values.get("seed", 0))
    generated = from_dict(SyntheticTextConfig, synthetic, what="synthetic settings")
    files = [name for name in FILE_FIELDS if values.get(name)]
    if files:
        flags = ", ".join("--" + name.replace("_", "-") for name in files)
        raise ValueError(f"--input {SYNTHETIC_TEXT} generates its files; drop {flags}")
    return output, [convert_synthetic_text(generated, progress=progress, **values)]


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


def _check_flags(parser: argparse.ArgumentParser, args, extra: list[str]) -> None:
    """Refuses options that do not apply to the kind of ``--input``, Beam's without --runner."""
    given_flags = {k for k, v in vars(args).items() if v is not None and v is not False}
    text = is_text_input(args.input)
    if text:
        wrong = sorted(given_flags - _ALSO - set(_SHARED) - set(_TEXT_FLAGS))
        if args.input != SYNTHETIC_TEXT:
            wrong += sorted(given_flags & {"synthetic_lists", "synthetic_list_size"})
        what = f"--input {args.input}"
    else:
        wrong = sorted(given_flags & set(_TEXT_FLAGS))
        what = "LETOR, tfds: and elwc: inputs"
    if extra and (text or (args.runner is None and not wrong)):
        parser.error(f"unrecognized arguments: {' '.join(extra)}")
    if wrong:
        flags = ", ".join("--" + name.replace("_", "-") for name in wrong)
        parser.error(f"{flags} {'does' if len(wrong) == 1 else 'do'} not apply to {what}")
    if args.runner is None and not text:
        names = {f.name: f.metadata.get("flag") or f"--{f.name}" for f in fields(BeamConfig)}
        options = given(args, BeamConfig)
        beam = [names[name].replace("_", "-") for name in _BEAM_ORDER if name in options]
        if beam:
            parser.error(f"{', '.join(beam)} need --runner (the local converter stops at an error)")


@one_error_line("tfr-convert")
def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args, beam_args = parser.parse_known_args(argv)
    _check_flags(parser, args, beam_args)
    text = is_text_input(args.input)
    start_command(args)
    # Input and output errors; a text input's I/O errors too, as they are.
    errors = (ValueError, OSError) if text else (DatasetNotFoundError, FileExistsError, ValueError)
    all_folds = False
    try:
        if text:
            output, manifests = _convert_text(args)
        else:
            config = _settings(args)
            output, all_folds = config.output, config.all_folds
            if args.runner is None:
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
        print(f"{f'Fold{manifest.fold}: ' if manifest.fold and all_folds else ''}{counts}")
    filtered = text and ", ".join(
        f"{k.replace('_', ' ')} {v:,}" for k, v in manifest.filtered.items() if v
    )
    if filtered:
        print(f"filtered or cut: {filtered}")
    print(f"wrote {output} ({MANIFEST_NAME} describes it)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
