"""``tfr-convert``'s text inputs: ``trec``, ``trec:DIR`` (files found by their usual names)
and ``synthetic-text``."""

from __future__ import annotations

import dataclasses
import os

from tfr_rankformer.inputs.manifest import Manifest
from tfrecords_tools.text.synthetic_text import SyntheticTextConfig, generate_trec_layout
from tfrecords_tools.text.text_dataset import write_atomically
from tfrecords_tools.text.trec_config import TrecConfig
from tfrecords_tools.text.trec_convert import write_text_dataset

SYNTHETIC_TEXT = "synthetic-text"
TREC_PREFIX = "trec"

_NAMES = {
    "queries": ("queries.tsv",),
    "train_queries": ("queries.train.tsv",),
    "vali_queries": ("queries.vali.tsv", "queries.dev.tsv"),
    "test_queries": ("queries.test.tsv",),
    "collection": ("collection.tsv",),
    "qrels": ("qrels.txt", "qrels.tsv"),
    "run": ("run.txt", "run.tsv"),
}


def is_text_input(name: str | None) -> bool:
    """Whether ``--input`` names a text input."""
    if not name:
        return False
    return name == SYNTHETIC_TEXT or name == TREC_PREFIX or name.startswith(TREC_PREFIX + ":")


def find_trec_files(directory: str) -> dict[str, tuple]:
    """``{TrecConfig field: (path,)}`` of the files in ``directory`` with conventional names."""
    if not os.path.isdir(directory):
        raise FileNotFoundError(f"trec:{directory}: not a directory")
    found = {}
    for field, names in _NAMES.items():
        for name in names:
            for candidate in (name, name + ".gz"):
                path = os.path.join(directory, candidate)
                if os.path.isfile(path) and field not in found:
                    found[field] = (path,)
    if "queries" in found and any(k.endswith("_queries") for k in found):
        del found["queries"]  # per-split files win over one file split by hash
    return found


def convert_synthetic_text(
    synthetic: SyntheticTextConfig,
    *,
    output: str,
    overwrite: bool = False,
    progress: bool = True,
    **options,
) -> Manifest:
    """Generates synthetic text data under ``output/source/`` and converts it into
    ``output``; ``options`` are further ``TrecConfig`` fields (``shards``, ...)."""

    def build(scratch: str) -> Manifest:
        paths = generate_trec_layout(os.path.join(scratch, "source"), synthetic)
        config = TrecConfig(output=output, overwrite=overwrite, **paths, **options)
        source = {"kind": SYNTHETIC_TEXT, "synthetic": dataclasses.asdict(synthetic)}
        # The generated run is a random order, no first stage: no first_stage_score.
        return write_text_dataset(
            config, scratch, progress=progress, source=source, first_stage=False
        )

    return write_atomically(output, overwrite=overwrite, build=build)
