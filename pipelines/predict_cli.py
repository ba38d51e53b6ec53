"""``tfr-predict``: score LETOR text or ELWC shards with an exported model.

Examples::

    tfr-predict --model runs/rankformer/export/1 --input MQ2008/Fold1/test.txt --output run.txt
    tfr-predict --model runs/rankformer --input data/web30k --output scores.csv --format csv
    tfr-predict --model runs/gbdt --input MQ2008/Fold1/test.txt --output gbdt_run.txt
    # re-rank a first-stage run converted by tfr-convert --input trec
    tfr-predict --model runs/listformer --input data/trec_text --split test --output rerank.txt
    # score through a running TF Serving, over REST or gRPC
    tfr-predict --server http://localhost:8501/v1/models/rankformer --input q.txt --output run.txt
    tfr-predict --server grpc://localhost:8500/rankformer --input data/web30k --output run.txt
    # a served Listformer's token-id export; its tokenizer from the run's export
    tfr-predict --server http://localhost:8501/v1/models/listformer --wait 60 \
        --tokenizer runs/listformer --input data/trec_text --split test --output rerank.txt
"""

from __future__ import annotations

import argparse
import dataclasses
import glob
import os
import sys
from typing import TYPE_CHECKING

from pipelines.cli_common import make_parser
from pipelines.tf_log_level import add_verbose_flag, one_error_line, start_command
from tfr_rankformer.core.atomic_files import atomic_write
from tfr_rankformer.core.config_io import add_options, from_args, setting
from tfrecords_tools.letor.letor_parser import DUPLICATE_POLICIES

if TYPE_CHECKING:
    from tfr_rankformer.inputs.training_density import TrainingDensity


@dataclasses.dataclass(frozen=True)
class PredictOptions:
    """``tfr-predict``'s options."""

    model: str | None = setting(
        None,
        "an export/<version> directory, a run directory (its newest export), or a GBDT "
        "directory (tfr-train --model gbdt, tfr-distill: its model.txt). This or --server",
    )
    server: str | None = setting(
        None,
        "score with the export a running TF Serving serves, instead of --model: "
        "http://host:8501/v1/models/NAME (REST) or grpc://host:8500/NAME (gRPC), optionally "
        "ending /labels/LABEL; the version the server's policy serves (the latest by "
        "default) unless --version. LETOR lists go to a feature-vector export's "
        "predict_tensors signature, ELWC records to serving_default, a text dataset's lists "
        "to a Listformer export's serving_default; --batch-size lists a request",
        metavar="URL",
    )
    version: int | None = setting(
        None, "with --server: the model version to ask for. Default: the server's choice"
    )
    wait: float = setting(
        0.0,
        "with --server: wait up to this long for the model to be AVAILABLE (a server "
        "starting up). Default: 0, no wait",
        metavar="SECONDS",
    )
    tokenizer: str | None = setting(
        None,
        "with --server and a Listformer's token-id export: the export_token_ids/<version> "
        "directory (or its run directory) whose assets.extra/ holds the client's tokenizer",
        metavar="DIR",
    )
    timeout: float = setting(
        60.0,
        "with --server: the longest wait for each request's answer. Default: 60",
        metavar="SECONDS",
    )
    input: str = setting(
        None,
        "a LETOR text file (.txt or .gz, raw features), a .tfrecord ELWC shard, or a "
        "tfr-convert output directory (the shards of --split); for a Listformer export, a "
        "text dataset directory",
        required=True,
    )
    split: str = setting("test", "the split scored from a tfr-convert directory")
    output: str = setting(None, "the file to write", required=True)
    format: str = setting("trec", "output format", choices=["trec", "csv"])
    tag: str = setting("tfr-rankformer", "the run tag of TREC output")
    batch_size: int | None = setting(
        None,
        "lists per model call at most (a SavedModel's batches also hold at most 65,536 "
        "padded items, lists grouped by length). Default: 256 (Listformer: 16, as its "
        "evaluation)",
    )
    duplicate_features: str = setting(
        "error",
        "a LETOR line that repeats a feature index: 'error', or keep the 'last' value "
        "(TF-Ranking's LibSVM reader) or the 'first'. Features in any order are accepted",
        choices=DUPLICATE_POLICIES,
    )
    no_progress: bool = setting(False, "hide the progress bar")


def build_parser() -> argparse.ArgumentParser:
    p = make_parser(
        "tfr-predict",
        "Score query lists with an exported model (or the one a running TF Serving serves: "
        "--server) and write a TREC run "
        "('qid Q0 docid rank score tag'; docid from the LETOR '#docid = ...' comment, else "
        "the line number; for ELWC input the item's position) or CSV with each query's "
        "list-quality prediction. A Listformer export re-ranks the lists of a text dataset "
        "(tfr-convert --input trec or synthetic-text), with their own query and document ids.",
        __doc__,
    )
    add_options(p.add_mutually_exclusive_group(required=True), PredictOptions, only=_WHERE)
    add_options(p, PredictOptions, skip=_WHERE)
    add_verbose_flag(p)
    return p


_WHERE = ("model", "server")


@dataclasses.dataclass
class _Filled:
    """Items read with 0s for features their input omitted, for the summary."""

    items: int = 0  # LETOR items whose lines omitted some of the model's features
    num_features: int = 0
    density: TrainingDensity | None = None  # what the model's training data records
    converted: int = 0  # items of a converted split whose input lacked features


def _elwc_files(args, filled: _Filled, served) -> list[str] | None:
    """The ELWC shards ``--input`` names, or ``None`` for a LETOR text file."""
    from tfr_rankformer.inputs.manifest import MANIFEST_NAME, load_manifest
    from tfr_rankformer.inputs.record_checks import check_tfrecord_file
    from tfr_rankformer.serving.prediction import check_list_limit

    if os.path.isdir(args.input):
        counts = {}
        if os.path.isfile(os.path.join(args.input, MANIFEST_NAME)):
            manifest = load_manifest(args.input)
            files = manifest.split_files(args.input, args.split)
            entry = manifest.splits[args.split]
            counts = entry.files
            filled.converted = entry.items_with_missing_features or 0
            where = f"the {args.split!r} split of --input {args.input}"
            check_list_limit(served, entry.longest_or(0), where=where)
        else:
            files = sorted(glob.glob(os.path.join(args.input, "*.tfrecord")))
        if not files:
            raise FileNotFoundError(f"{args.input} holds no *.tfrecord shards")
        # A shard cut short is named before anything is scored.
        for path in files:
            check_tfrecord_file(path, expected_records=counts.get(os.path.basename(path)))
        return files
    if args.input.endswith(".tfrecord"):
        check_tfrecord_file(args.input)
        return [args.input]
    if not os.path.isfile(args.input):
        raise FileNotFoundError(f"{args.input}: no such file")
    return None


def _text_lists(args):
    """``(qid, docids, query, documents, first-stage scores or None)`` of ``--input``."""
    from tfrecords_tools.text.text_elwc import read_text_split

    for text_list in read_text_split(args.input, args.split):
        # The words joined with spaces: the text the model was trained on.
        documents = [" ".join(tokens) for tokens in text_list.document_tokens]
        query = " ".join(text_list.query_tokens)
        scores = text_list.first_stage_scores
        scores = None if scores is None else list(scores)
        yield text_list.query_id, list(text_list.document_ids), query, documents, scores


def _letor_lists(args, served, filled: _Filled):
    """The lists of the LETOR file ``--input``; a line short of the model's last feature is
    refused when every training line gave every feature."""
    from tfr_rankformer.inputs.training_density import TrainingDensity, training_density
    from tfr_rankformer.serving.prediction import check_list_limit
    from tfrecords_tools.letor.letor_lists import check_complete_lines, load_letor_lists

    num_features = served.num_features
    letor = load_letor_lists(args.input, num_features, duplicates=args.duplicate_features)
    if args.server:
        density = TrainingDensity(None, f"{args.server} gives no record of its training data")
    else:
        density = training_density(args.model)
    if density.dense:
        check_complete_lines(letor, why="its training data gave every feature on every line")
    longest = max((len(items) for _, _, items in letor.lists), default=0)
    check_list_limit(served, longest, where=f"--input {args.input}")
    filled.items, filled.num_features, filled.density = letor.filled_items, num_features, density
    return letor.lists


def _lists(args, filled: _Filled) -> tuple:
    """The model and an iterator over the scored lists."""
    from tfr_rankformer.runner import load_remote, load_served, predict
    from tfrecords_tools.text.text_dataset import is_text_dataset

    if args.server:
        url = args.server if args.version is None else f"{args.server}/versions/{args.version}"
        served = load_remote(url, timeout=args.timeout, wait=args.wait, tokenizer=args.tokenizer)
    else:
        served = load_served(args.model)
    text_input = is_text_dataset(args.input)
    if served.is_text:
        if not text_input:
            raise ValueError(
                f"{served.path} is a Listformer export: --input must be a text dataset "
                f"directory (tfr-convert --input trec or synthetic-text), not {args.input}"
            )
        return served, predict(served, _text_lists(args), batch_size=args.batch_size)
    if text_input:
        raise ValueError(
            f"{args.input} holds text lists: score it with a Listformer export, not {served.path}"
        )
    files = _elwc_files(args, filled, served)
    lists = _letor_lists(args, served, filled) if files is None else None
    return served, predict(served, lists, files=files, batch_size=args.batch_size)


def _counting_invalid(scored, total: list[int]):
    for item in scored:
        total[0] += item.num_invalid
        yield item


def _filled_notes(filled: _Filled, split: str) -> list[str]:
    notes = []
    if filled.items:  # read with the training data's density
        density = filled.density
        if density.dense:
            tail = "each line still gave the last feature, as every training line did"
        elif density.dense is False:
            tail = "the training data omitted features too (tfr-convert read them as 0)"
        else:
            tail = f"whether the training data gave every feature is not known ({density.reason})"
        notes.append(
            f"{filled.items} items were scored with 0 for features their lines omitted (of "
            f"the model's {filled.num_features}); {tail}"
        )
    if filled.converted:
        notes.append(
            f"{filled.converted} items of the {split} split lacked features in tfr-convert's "
            "input and hold its missing value (items_with_missing_features in its manifest)"
        )
    return notes


def _check_output(output: str) -> None:
    if os.path.isdir(output):
        raise IsADirectoryError(f"--output {output} is a directory; give a file name")
    directory = os.path.dirname(output)
    if directory and not os.path.isdir(directory):
        what = "is not a directory" if os.path.lexists(directory) else "does not exist"
        raise FileNotFoundError(f"--output {output}: the directory {directory} {what}")


@one_error_line("tfr-predict")
def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    parsed = parser.parse_args(argv)
    args = from_args(parsed, PredictOptions)
    if not args.timeout > 0:
        parser.error(f"--timeout must be a positive number of seconds, got {args.timeout:g}")
    if not args.wait >= 0:
        parser.error(f"--wait must be a number of seconds >= 0, got {args.wait:g}")
    if args.version is not None and "/versions/" in (args.server or "/versions/"):
        parser.error("--version goes with a --server URL that names no version")
    start_command(parsed)
    server_errors = ()
    if args.server:  # the client imports TensorFlow: only when it is used
        from tfr_rankformer.serving.serving_client import ServingError

        server_errors = (ServingError,)
    try:
        _check_output(args.output)
        from tqdm.auto import tqdm

        from tfr_rankformer.serving.prediction import write_results

        filled = _Filled()
        served, scored = _lists(args, filled)
        invalid = [0]
        lists = tqdm(
            _counting_invalid(scored, invalid),
            unit=" lists",
            disable=True if args.no_progress else None,
        )
        with atomic_write(args.output, newline="") as out:
            count = write_results(lists, out, fmt=args.format, tag=args.tag)
    except server_errors as e:  # the rest: one_error_line
        print(f"tfr-predict: error: {e}", file=sys.stderr)
        return 1
    print(f"scored {count} lists with {served.path}; wrote {args.output}")
    if invalid[0] and served.is_text:
        print(
            f"{invalid[0]} documents have no text: they cannot be told from padding and were "
            "ranked last with the padding score"
        )
    elif invalid[0]:
        print(
            f"{invalid[0]} items could not be scored (features missing, of the wrong length, "
            "or NaN/inf) and were ranked last with the padding score (the model was exported "
            "with --invalid-items score-last)"
        )
    for note in _filled_notes(filled, args.split):
        print(note)
    return 0


if __name__ == "__main__":
    sys.exit(main())
