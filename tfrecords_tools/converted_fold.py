"""What a converted fold records beside its shards, shared by the local and Beam
converters: its ``manifest.json`` and the entries of the input files it read."""

from __future__ import annotations

import logging
import os

from tfr_rankformer.inputs.manifest import Manifest
from tfrecords_tools.sources import DataSizes

logger = logging.getLogger(__name__)

MANIFEST_VERSION = 1


def relative_paths(values, scratch: str):
    """``values`` with paths inside ``scratch`` made relative to it (generated inputs)."""
    if isinstance(values, dict):
        return {k: relative_paths(v, scratch) for k, v in values.items()}
    if isinstance(values, (list, tuple)):
        return [relative_paths(v, scratch) for v in values]
    if isinstance(values, str) and values.startswith(scratch + os.sep):
        return os.path.relpath(values, scratch)
    return values


def letor_entry(path: str, letor, counts) -> dict:
    """The manifest's entry of a LETOR file read whole; ``counts`` has its parse counts."""
    return {
        "path": path,
        "sha256": letor.sha256,
        "bytes": letor.size_bytes,
        "lines": letor.num_lines,
        "unsorted_feature_lines": counts.unsorted_lines,
        "duplicate_feature_lines": counts.duplicate_lines,
        "items_with_missing_features": counts.sparse_lines,
    }


def log_reordered_lines(path: str, unsorted: int, duplicates: int) -> None:
    """Reports lines whose features were sorted or had a repeated index resolved."""
    if unsorted:
        logger.info("%s: %d line(s) listed their features out of order; sorted", path, unsorted)
    if duplicates:
        logger.warning(
            "%s: %d line(s) repeated a feature index; one value of each was kept "
            "(--duplicate-features)",
            path,
            duplicates,
        )


def fold_manifest(config, source, fold, sizes: DataSizes, splits, normalization) -> Manifest:
    """The ``manifest.json`` of one converted fold."""
    from tfr_rankformer import __version__
    from tfr_rankformer.core.elwc_schema import FEATURES, LABEL, QID, RELEVANCE

    num_features = sizes.num_features
    names = [f"feature_{i}" for i in range(1, num_features + 1)]
    context = {QID: {"dtype": "int64", "shape": [1]}}
    if source.kind == "elwc":
        names = source.elwc.feature_names
        for name in config.elwc.context:
            dtype = source.elwc.context_types.get(name)
            context[name] = {"dtype": dtype, "copied_from_input": True}
    content = {
        "manifest_version": MANIFEST_VERSION,
        "created_by": f"tfr-convert {__version__}",
        "source": {
            "input": config.input,
            "kind": source.kind,
            "dataset": source.dataset,
            "fold": fold,
        },
        "num_features": num_features,
        "num_features_source": sizes.num_features_source,
        "feature_names": names,
        "max_relevance": sizes.max_relevance,
        "label_kind": "simulated_implicit" if config.simulate_clicks else "explicit",
        "elwc": {
            "context": context,
            "examples": {
                FEATURES: {"dtype": "float32", "shape": [num_features], "values": "raw"},
                LABEL: {"dtype": "float32", "shape": [1]},
                RELEVANCE: {"dtype": "float32", "shape": [1]},
            },
        },
        "parameters": config.to_json(),
        "seed": config.seed,
        "splits": splits,
        "normalization": normalization,
    }
    return Manifest.from_json(content)
