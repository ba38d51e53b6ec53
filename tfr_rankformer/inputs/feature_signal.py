"""Warnings naming features of one value on every training item (from the manifest) or
within every training list (from the lists held in memory): no signal to rank by.
"""

from __future__ import annotations

import logging

import numpy as np

from tfr_rankformer.inputs.manifest import Manifest

logger = logging.getLogger(__name__)

_SHOWN = 10  # feature names a warning lists at most
_CHUNK_VALUES = 1 << 22  # values per temporary array of a padded layout's check


def constant_features(manifest: Manifest) -> list[str]:
    """The features whose normalisation ``min`` equals its ``max``, by name.

    >>> normalization = {"min": [0.0, 1.0, 2.0], "max": [0.0, 3.0, 2.0]}
    >>> constant_features(Manifest.coerce({"normalization": normalization}))
    ['feature_1', 'feature_3']
    """
    stats = manifest.normalization or {}
    low, high = stats.get("min") or (), stats.get("max") or ()
    return [name for name, a, b in zip(_names(manifest, len(low)), low, high) if a == b]


def warn_constant_features(manifest: Manifest, *, data_dir: str) -> None:
    """A warning naming the features of one value on every training item."""
    how = "on every training item (std 0: min = max in its manifest.json's normalization)"
    _warn(constant_features(manifest), manifest, data_dir, how, "carry no signal to rank by")


def _names(manifest: Manifest, count: int) -> list[str]:
    return list(manifest.feature_names or [f"feature_{i}" for i in range(1, count + 1)])


def varies_within_lists(features: np.ndarray, starts, lengths) -> np.ndarray:
    """``[d]`` bool: whether each feature varies within some list of flat ``[items, d]`` or
    padded ``[lists, L, d]`` ``features``.

    >>> varies_within_lists(np.array([[1.0, 5.0], [1.0, 6.0], [2.0, 7.0]]), [0, 2], [2, 1])
    array([False,  True])
    """
    lengths = np.asarray(lengths)
    d = features.shape[-1]
    if features.ndim == 3:
        varies = np.zeros(d, bool)
        step = max(1, _CHUNK_VALUES // max(1, features.shape[1] * d))
        for i in range(0, features.shape[0], step):
            part = features[i : i + step]
            valid = (np.arange(part.shape[1]) < lengths[i : i + step, None])[..., None]
            high = np.where(valid, part, -np.inf).max(axis=1)
            varies |= (high > np.where(valid, part, np.inf).min(axis=1)).any(axis=0)
        return varies
    keep = lengths > 0
    if not keep.any():
        return np.zeros(d, bool)
    starts = np.asarray(starts)[keep]
    rows = features[: starts[-1] + lengths[keep][-1]]
    high = np.maximum.reduceat(rows, starts, axis=0)  # [lists, d]
    return (high > np.minimum.reduceat(rows, starts, axis=0)).any(axis=0)


def warn_fixed_within_lists(manifest: Manifest, varies: np.ndarray, *, data_dir: str) -> None:
    """A warning naming the features that vary only between lists."""
    constant = set(constant_features(manifest))
    names = _names(manifest, len(varies))
    fixed = [n for n, v in zip(names, varies) if not v and n not in constant]
    _warn(fixed, manifest, data_dir, "within every training list", "cannot order a list's items")


def _warn(names: list[str], manifest: Manifest, data_dir: str, how: str, why: str) -> None:
    if names:
        shown = ", ".join(names[:_SHOWN]) + (", ..." if len(names) > _SHOWN else "")
        count = f"{len(names)} of the {manifest.num_features or len(names)} features"
        logger.warning(f"{count} of {data_dir} hold one value {how}: {shown}; they {why}")
