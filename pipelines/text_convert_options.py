"""``tfr-convert``'s text inputs (``--input trec``, ``trec:DIR``, ``synthetic-text``); no
TensorFlow: the text ELWC is written by hand-encoded protos."""

from __future__ import annotations

import argparse

from tfr_rankformer.core.config_io import from_dict, given, load_settings
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

__all__ = ["TEXT_GROUP", "check_text_flags", "run_text_conversion"]

TEXT_FLAGS = (*FILE_FIELDS, "split_fractions", "max_query_tokens", "max_document_tokens")
# tfr-convert's options that text inputs take too (their ``TrecConfig`` fields).
_SHARED = ("output", "overwrite", "shards", "max_list_size", "min_list_size", "seed")
_ALSO = {"input", "config", "synthetic_lists", "synthetic_list_size", "no_progress"}
_ALSO |= {"log_level", "verbose"}
TEXT_GROUP = (
    "text ranking data (--input trec, trec:DIR or synthetic-text) to the text ELWC "
    "(query_tokens, document_tokens, relevance; file options are repeatable, .gz accepted); "
    "also uses --output, --overwrite, --shards, --seed, --max-list-size (the run's top N per "
    "query), --min-list-size, --synthetic-lists, --synthetic-list-size"
)


def check_text_flags(parser: argparse.ArgumentParser, args, extra: list[str]) -> None:
    """Refuses options that do not apply to the kind of ``--input`` given."""
    given_flags = {k for k, v in vars(args).items() if v is not None and v is not False}
    if is_text_input(args.input):
        if extra:
            parser.error(f"unrecognized arguments: {' '.join(extra)}")
        wrong = sorted(given_flags - _ALSO - set(_SHARED) - set(TEXT_FLAGS))
        what = f"--input {args.input}"
    else:
        wrong = sorted(given_flags & set(TEXT_FLAGS))
        what = "LETOR, tfds: and elwc: inputs"
    if args.input != SYNTHETIC_TEXT and is_text_input(args.input):
        wrong += sorted(given_flags & {"synthetic_lists", "synthetic_list_size"})
    if wrong:
        flags = ", ".join("--" + name.replace("_", "-") for name in wrong)
        parser.error(f"{flags} {'does' if len(wrong) == 1 else 'do'} not apply to {what}")


def _fractions(text: str) -> tuple:
    try:
        return tuple(float(v) for v in text.split(","))
    except ValueError:
        raise ValueError(
            f"--split-fractions {text!r}: expected three numbers like 0.8,0.1,0.1"
        ) from None


def run_text_conversion(args) -> Manifest:
    """Converts a text input as the parsed ``args`` ask; returns the manifest."""
    values = load_settings(args.config, TrecConfig, extra=("synthetic",)) if args.config else {}
    synthetic = dict(values.pop("synthetic", None) or {})
    values.update({k: getattr(args, k) for k in _SHARED if getattr(args, k) is not None})
    values.update(given(args, TrecConfig))
    if args.split_fractions:
        values["split_fractions"] = _fractions(args.split_fractions)
    if not values.get("output"):
        raise ValueError("missing --output")
    progress = not args.no_progress
    if args.input != SYNTHETIC_TEXT:
        if args.input.startswith(TREC_PREFIX + ":"):
            found = find_trec_files(args.input[len(TREC_PREFIX) + 1 :])
            given_queries = any(values.get(k) for k in FILE_FIELDS[:4])
            for field, paths in found.items():
                if not values.get(field) and not (field in FILE_FIELDS[:4] and given_queries):
                    values[field] = paths
        return convert_trec(TrecConfig.from_json(values), progress=progress)
    if args.synthetic_lists is not None:
        synthetic["train_queries"] = args.synthetic_lists
        synthetic.setdefault("vali_queries", max(1, args.synthetic_lists // 3))
        synthetic.setdefault("test_queries", max(1, args.synthetic_lists // 3))
    if args.synthetic_list_size is not None:
        synthetic["mean_list_size"] = args.synthetic_list_size
    synthetic.setdefault("seed", values.get("seed", 0))
    generated = from_dict(SyntheticTextConfig, synthetic, what="synthetic settings")
    files = [name for name in FILE_FIELDS if values.get(name)]
    if files:
        flags = ", ".join("--" + name.replace("_", "-") for name in files)
        raise ValueError(f"--input {SYNTHETIC_TEXT} generates its files; drop {flags}")
    output, overwrite = values.pop("output"), bool(values.pop("overwrite", False))
    unknown = set(values) - set(TrecConfig.__dataclass_fields__)
    if unknown:
        raise ValueError(f"Unknown text conversion settings {sorted(unknown)}")
    return convert_synthetic_text(
        generated, output=output, overwrite=overwrite, progress=progress, **values
    )
