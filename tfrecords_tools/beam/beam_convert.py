"""``tfr-convert --runner``: the conversion on Apache Beam, with the local layout and the
same records for the same seed; bad lines go to a dead-letter file. Remote outputs
(``gs://``) are written in place, the manifest last, and deleted on failure."""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import os
from collections.abc import Iterator

import apache_beam as beam
import numpy as np
from apache_beam.io.filesystem import CompressionTypes
from apache_beam.io.filesystems import FileSystems
from apache_beam.options.pipeline_options import PipelineOptions

from tfr_rankformer.core.elwc_schema import SPLITS
from tfr_rankformer.inputs.empty_splits import log_empty_splits
from tfr_rankformer.inputs.manifest import Manifest, write_manifest
from tfrecords_tools.atomic_output import (
    ForeignOutputError,
    foreign_entries_of,
    foreign_output_message,
    manifest_is_ours,
    scratch_directory,
)
from tfrecords_tools.beam.beam_config import BeamConfig
from tfrecords_tools.beam.beam_pipeline import SplitJob, WriteResults, convert_split, read_results
from tfrecords_tools.convert import ConvertConfig, list_policy, normalization_fitter
from tfrecords_tools.converted_fold import fold_manifest, log_reordered_lines, relative_paths
from tfrecords_tools.datasets import DatasetNotFoundError
from tfrecords_tools.elwc_input import ELWC_PREFIX
from tfrecords_tools.normalization import rounded
from tfrecords_tools.sources import DataSizes, Source, dataset_sizes, resolve_source, select_folds

logger = logging.getLogger(__name__)

_SHOWN_BAD_LINES = 5


class BadLinesError(ValueError):
    """More invalid lines than allowed; the message counts them and shows the first."""


def _match(patterns: tuple[str, ...], split: str) -> list[str]:
    """Files matching ``patterns``, sorted within each pattern, first match kept."""
    files: list[str] = []
    for result in FileSystems.match(list(patterns)):
        for path in sorted(m.path for m in result.metadata_list):
            if path not in files:
                files.append(path)
    if not files:
        raise DatasetNotFoundError(f"--{split}-files {' '.join(patterns)}: no file matches")
    return files


def _resolve(config: BeamConfig, scratch: str) -> tuple[Source, dict]:
    """The source and ``{fold: {split: [files]}}`` to convert."""
    patterns = config.patterns()
    if patterns:
        source = Source("files", None, {None: patterns}, None, None)
        return source, {None: {split: _match(p, split) for split, p in patterns.items()}}
    c = config.convert
    if c.input.startswith(ELWC_PREFIX):
        raise ValueError("--runner reads LETOR files; convert an elwc: input without --runner")
    source = resolve_source(
        c.input, data_dir=c.data_dir, scratch=scratch, synthetic=c.synthetic, tfds_download=False
    )
    folds = select_folds(source, fold=c.fold, all_folds=c.all_folds)
    return source, {fold: {s: [path] for s, path in files.items()} for fold, files in folds.items()}


def _sizes(config: ConvertConfig, source: Source, folds: dict) -> DataSizes:
    """The feature count and highest label: given, known, or scanned from local files."""
    known = (config.num_features or source.num_features) and (
        config.max_relevance or source.max_relevance
    )
    remote = [
        p for files in folds.values() for split in files.values() for p in split if "://" in p
    ]
    if not known and remote:
        raise ValueError(
            f"pass --num-features and --max-relevance: {remote[0]} is not a local file to scan"
        )
    return dataset_sizes(
        source, folds, num_features=config.num_features, max_relevance=config.max_relevance
    )


def _jobs(config: BeamConfig, folds: dict, sizes: DataSizes, work_dir: str) -> list[SplitJob]:
    c = config.convert
    policy = list_policy(c, sizes.max_relevance)
    n, epsilon = sizes.num_features, config.epsilon
    return [
        SplitJob(
            fold, split, tuple(files[split]), _fold_dir(c, work_dir, fold), n, policy, epsilon, c
        )
        for fold, files in folds.items()
        for split in SPLITS
        if split in files
    ]


def _fold_dir(c: ConvertConfig, work_dir: str, fold) -> str:
    return FileSystems.join(work_dir, f"Fold{fold}") if c.all_folds and fold else work_dir


def _run_pipeline(config: BeamConfig, jobs: list[SplitJob], results_path: str, bad_path: str):
    options = PipelineOptions(list(config.pipeline_args), runner=config.runner)
    with beam.Pipeline(options=options) as pipeline:
        keyed, bad = [], []
        for job in jobs:
            job_results, job_bad = convert_split(pipeline, job)
            keyed += job_results
            bad.append(job_bad)
        bad_lines = tuple(bad) | "BadLines" >> beam.Flatten()
        _ = (
            bad_lines
            | "BadLineText" >> beam.Map(lambda line: line.to_text())
            | "DeadLetters" >> beam.io.WriteToText(bad_path, num_shards=1, shard_name_template="")
        )
        first = (
            bad_lines
            | "FirstBadLines"
            >> beam.combiners.Top.Smallest(
                _SHOWN_BAD_LINES, key=lambda line: (line.path, line.line)
            )
            | "KeyFirst" >> beam.Map(lambda lines: (("all", "all", "first_bad_lines"), lines))
        )
        _ = (
            (*keyed, first)
            | "AllResults" >> beam.Flatten()
            | "Gather" >> beam.combiners.ToList()
            | "WriteResults" >> beam.ParDo(WriteResults(results_path))
        )


def _spread(values: list[float], num_quantiles: int) -> list[float]:
    """``num_quantiles`` values: the sketch's, or nearest ranks of fewer sorted values."""
    if len(values) == num_quantiles or not values:
        return list(values)
    ranks = np.rint(np.linspace(0.0, 1.0, num_quantiles) * (len(values) - 1)).astype(int)
    return [values[r] for r in ranks]


def _normalization(config: BeamConfig, num_features: int, fits, quantiles) -> dict:
    """The manifest's normalisation section: the local fitter's, with sketched quantiles."""
    c = config.convert
    fitter = normalization_fitter(c, num_features)
    # Merged in input order, so the floating-point sums do not depend on scheduling.
    for _, part in sorted(fits, key=lambda fit: fit[0]):
        fitter.merge(part)
    result = fitter.result(c.normalize)
    values = np.zeros((num_features, c.num_quantiles))
    for j, sketch in quantiles:
        values[j] = _spread(sketch, c.num_quantiles)
    result["quantile"].update(
        sample_size=result["num_items"],
        sampling=f"every item; Beam ApproximateQuantiles, rank error below "
        f"{config.epsilon:g} * num_items",
        values=[rounded(row) for row in values],
    )
    return result


def _input_entry(source: Source, patterns, files: list, bad_lines: int, work_dir: str) -> dict:
    infos = [info for _, info in sorted(files, key=lambda f: f[0])]
    for info in infos:
        log_reordered_lines(
            info["path"], info["unsorted_feature_lines"], info["duplicate_feature_lines"]
        )
    if source.kind == "files":
        entry = {"patterns": list(patterns), "files": infos}
        entry["items_with_missing_features"] = sum(i["items_with_missing_features"] for i in infos)
    else:
        entry = dict(infos[0])
        if "://" not in entry["path"]:
            entry["path"] = relative_paths(os.path.abspath(entry["path"]), work_dir)
    entry["bad_lines"] = bad_lines
    return entry


def _manifests(config, source, folds, sizes, results, work_dir) -> list[Manifest]:
    c = config.convert
    manifests = []
    for fold, files in folds.items():
        splits, normalization = {}, None
        for split in (s for s in SPLITS if s in files):
            part = {k[2]: v for k, v in results.items() if k[:2] == (fold, split)}
            entry = part["stats"].as_dict(c.simulate_clicks)
            entry["num_features"] = sizes.num_features
            patterns = source.folds[None].get(split, ()) if source.kind == "files" else ()
            entry["input"] = _input_entry(
                source, patterns, part["files"], part["bad_lines"], work_dir
            )
            entry["files"] = dict(sorted(part["shards"]))
            splits[split] = entry
            if split == "train":
                normalization = _normalization(
                    config, sizes.num_features, part["fits"], part["quantiles"]
                )
        manifest = fold_manifest(c, source, fold, sizes, splits, normalization)
        shown = f"{c.output.rstrip('/')}/Fold{fold}" if c.all_folds and fold else c.output
        log_empty_splits(manifest, output_dir=shown)
        parameters = {**manifest.parameters, "beam": config.to_json()}
        manifests.append(dataclasses.replace(manifest, parameters=parameters))
    return manifests


def _check_bad_lines(config: BeamConfig, results: dict, bad_path: str) -> None:
    count = sum(v for k, v in results.items() if k[2] == "bad_lines")
    if count == 0:
        if FileSystems.exists(bad_path):
            FileSystems.delete([bad_path])
        return
    if count > config.max_bad_lines:
        first = results[("all", "all", "first_bad_lines")]
        shown = "\n".join(f"  {b.path}:{b.line}: {b.message}" for b in first)
        raise BadLinesError(
            f"{count} invalid line(s), more than --max-bad-lines {config.max_bad_lines}; "
            f"nothing was written. All of them are listed in {bad_path}; the first:\n{shown}"
        )
    logger.warning("set aside %d invalid line(s), listed in %s", count, bad_path)


def convert_on_beam(config: BeamConfig) -> list[Manifest]:
    """Converts on Apache Beam; returns one manifest per fold, leaving no output on error."""
    c = config.convert
    remote = "://" in c.output
    if remote and c.input.lower() == "synthetic":
        raise ValueError("--input synthetic is generated locally; give a local --output")
    final = c.output if remote else os.path.abspath(c.output)
    bad_path = config.bad_lines_output or f"{final.rstrip('/')}.bad_lines.txt"
    output = _remote_output if remote else scratch_directory
    with output(c.output, overwrite=c.overwrite) as work_dir:
        source, folds = _resolve(config, work_dir)
        sizes = _sizes(c, source, folds)
        jobs = _jobs(config, folds, sizes, work_dir)
        results_path = FileSystems.join(work_dir, ".beam-results.pickle")
        _run_pipeline(config, jobs, results_path, bad_path)
        results = read_results(results_path)
        _check_bad_lines(config, results, bad_path)
        manifests = _manifests(config, source, folds, sizes, results, work_dir)
        for manifest in manifests:
            write_manifest(_fold_dir(c, work_dir, manifest.fold), manifest, write_text=_write_text)
    return manifests


@contextlib.contextmanager
def _remote_output(output: str, *, overwrite: bool) -> Iterator[str]:
    """A remote ``output`` written in place (:func:`prepare_remote`), deleted on an error."""
    work_dir = prepare_remote(output, overwrite=overwrite)
    try:
        yield work_dir
    except BaseException:
        try:
            FileSystems.delete([work_dir])
        except Exception as error:  # noqa: BLE001 - the original error matters more
            logger.warning("could not delete %s: %s", work_dir, error)
        raise


def prepare_remote(output: str, *, overwrite: bool) -> str:
    """Checks a remote ``output`` and empties it when it may be replaced (object stores
    cannot rename the old one aside); returns it without a trailing ``/``."""
    root = output.rstrip("/")

    def is_ours(name: str) -> bool:
        path = FileSystems.join(root, name)
        with FileSystems.open(path, compression_type=CompressionTypes.UNCOMPRESSED) as stream:
            return manifest_is_ours(stream.read())

    existing = [m.path for m in FileSystems.match([root + "/**"])[0].metadata_list]
    if existing:
        relative = [path[len(root) + 1 :] for path in existing]
        foreign = foreign_entries_of(relative, is_ours)
        if foreign:
            raise ForeignOutputError(foreign_output_message(output, foreign))
        if not overwrite:
            raise FileExistsError(f"{output} already holds files; pass --overwrite to replace them")
        FileSystems.delete(existing)
    return root


def _write_text(path: str, text: str) -> None:
    with FileSystems.create(path) as stream:
        stream.write(text.encode("utf-8"))
