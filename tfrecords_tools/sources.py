"""Resolving ``--input`` into files (or TFDS splits) per fold, and the dataset's sizes."""

from __future__ import annotations

import dataclasses
import logging
import os

from tfr_rankformer.core.elwc_schema import SPLITS
from tfrecords_tools.datasets import (
    DATASETS,
    DatasetNotFoundError,
    find_dataset_dir,
    find_folds,
    get_dataset,
)
from tfrecords_tools.elwc_input import ELWC_PREFIX, ElwcConfig
from tfrecords_tools.letor.feature_count import inferred_num_features, scan_letor_file
from tfrecords_tools.synthetic import MAX_RELEVANCE, NUM_FEATURES, SyntheticConfig, generate_letor

logger = logging.getLogger(__name__)


@dataclasses.dataclass
class Source:
    """A resolved input: its kind, ``{fold: {split: file}}``, known sizes and its reader."""

    kind: str
    dataset: str | None
    folds: dict
    num_features: int | None
    max_relevance: int | None
    tfds: object = None
    elwc: object = None


def resolve_source(
    name: str,
    *,
    data_dir: str | None,
    scratch: str,
    synthetic: SyntheticConfig,
    tfds_download: bool,
    elwc: ElwcConfig | None = None,
    max_relevance: int | None = None,
) -> Source:
    """Finds the input named by ``--input``; ``synthetic`` is generated under ``scratch``."""
    if name.lower() == "synthetic":
        directory = os.path.join(scratch, "source")
        generate_letor(directory, synthetic)
        return Source("synthetic", "synthetic", find_folds(directory), NUM_FEATURES, MAX_RELEVANCE)
    if name.startswith("tfds:"):
        from tfrecords_tools.tfds_source import TfdsSource

        tfds = TfdsSource(name[5:], data_dir=data_dir, download=tfds_download)
        folds = {None: {s: s for s in SPLITS if s in tfds.splits}}
        return Source("tfds", name, folds, tfds.num_features, tfds.max_relevance, tfds)
    if name.startswith(ELWC_PREFIX):
        from tfrecords_tools.elwc_source import ElwcSource

        source = ElwcSource(name, elwc or ElwcConfig(), max_relevance=max_relevance)
        folds = {None: {split: split for split in source.splits}}
        return Source("elwc", name, folds, source.num_features, source.max_relevance, elwc=source)
    if os.path.isdir(name):
        return Source("directory", None, find_folds(name), None, None)
    info = get_dataset(name)
    if info is None:
        raise DatasetNotFoundError(
            f"--input {name!r} is not a directory, a known dataset "
            f"({', '.join(sorted(DATASETS))}), tfds:NAME, elwc:FILES or synthetic"
        )
    roots = [r for r in (data_dir, os.environ.get("TFR_DATA_DIR"), os.getcwd()) if r]
    directory = find_dataset_dir(info, roots)
    folds = find_folds(directory, prefix=info.file_prefix)
    return Source("dataset", info.name, folds, info.num_features, info.max_relevance)


def select_folds(source: Source, *, fold: int | None, all_folds: bool) -> dict:
    """The folds to convert: all, the one asked for, or fold 1."""
    if all_folds:
        return source.folds
    if None in source.folds:
        if fold not in (None, 1):
            raise DatasetNotFoundError(
                f"--fold {fold}: the input has a single train/vali/test set, not folds"
            )
        return source.folds
    fold = fold or 1
    if fold not in source.folds:
        raise DatasetNotFoundError(f"--fold {fold}: the input has folds {sorted(source.folds)}")
    return {fold: source.folds[fold]}


@dataclasses.dataclass(frozen=True)
class DataSizes:
    """The sizes every output of one conversion shares, and where the feature count came from."""

    num_features: int
    max_relevance: int
    num_features_source: str


def dataset_sizes(
    source: Source, folds: dict, *, num_features: int | None, max_relevance: int | None
) -> DataSizes:
    """The feature count and highest label: given, known, or scanned from the files."""
    if source.kind == "elwc" and num_features not in (None, source.num_features):
        raise ValueError(
            f"--num-features {num_features} disagrees with the {source.num_features} item "
            "features --elwc-features names"
        )
    given = "given" if num_features else "dataset"
    num_features = num_features or source.num_features
    max_relevance = max_relevance or source.max_relevance
    if num_features and max_relevance:
        return DataSizes(num_features, max_relevance, given)
    if source.kind == "tfds":
        raise ValueError("pass --max-relevance: this TFDS dataset's highest label is unknown")
    # Scanned in split order, so the first line to reach the count is found in train.
    scans = [
        scan_letor_file(path)
        for files in folds.values()
        for split in SPLITS
        if split in files
        for path in ([files[split]] if isinstance(files[split], str) else files[split])
    ]
    scanned_label = max((scan.max_label for scan in scans), default=0)
    logger.info(
        "scanned the files: largest feature index %d, largest label %d",
        max((scan.max_index for scan in scans), default=0),
        scanned_label,
    )
    if not num_features:
        num_features, given = inferred_num_features(scans)
    return DataSizes(num_features, max_relevance or max(scanned_label, 1), given)
