"""Whether a model's training data gave every feature on every item: ``tfr-predict``
refuses short input lines for a model that never saw a filled-in feature.
"""

from __future__ import annotations

import dataclasses
import os

from tfr_rankformer.core.run_layout import CONFIG_NAME, read_json
from tfr_rankformer.inputs.manifest import MISSING_FEATURES, Manifest, load_manifest


@dataclasses.dataclass(frozen=True)
class TrainingDensity:
    """Whether no training item lacked a feature (``None``: unknown, ``reason`` says why)."""

    dense: bool | None
    reason: str = ""


def manifest_density(manifest: Manifest) -> TrainingDensity:
    """The density a manifest records over all its splits.

    >>> manifest_density(Manifest.coerce({"splits": {"train": {"input": {MISSING_FEATURES: 0}}}}))
    TrainingDensity(dense=True, reason='')
    >>> train = {"input": {"path": "train.txt"}}
    >>> manifest_density(Manifest.coerce({"splits": {"train": train}})).dense is None
    True
    """
    counts = [entry.items_with_missing_features for entry in manifest.splits.values()]
    if any(count is not None and count > 0 for count in counts):
        return TrainingDensity(False)
    if counts and all(count is not None for count in counts):
        return TrainingDensity(True)
    return TrainingDensity(None, f"its manifest does not record {MISSING_FEATURES}")


def _run_directory(model: str) -> str | None:
    """The run that holds ``model``: the directory itself or an export's run."""
    if os.path.isfile(os.path.join(model, CONFIG_NAME)):
        return model
    parent = os.path.dirname(os.path.abspath(model))
    run = os.path.dirname(parent)
    if os.path.basename(parent) == "export" and os.path.isfile(os.path.join(run, CONFIG_NAME)):
        return run
    return None


def training_density(model: str) -> TrainingDensity:
    """The density of the data ``model`` (a run or an export) was trained on; unknown, never
    an error, when unreadable."""
    run = _run_directory(model)
    if run is None:
        return TrainingDensity(None, f"{model} is not inside the run that trained it")
    data_dir = read_json(os.path.join(run, CONFIG_NAME)).get("data")
    if not isinstance(data_dir, str) or not data_dir:
        return TrainingDensity(None, f"{run}/{CONFIG_NAME} names no training data")
    try:
        manifest = load_manifest(data_dir)
    except (OSError, ValueError):
        return TrainingDensity(None, f"the training data's manifest ({data_dir}) cannot be read")
    density = manifest_density(manifest)
    if density.dense is None:
        return TrainingDensity(None, f"the manifest of {data_dir} predates {MISSING_FEATURES}")
    return density
