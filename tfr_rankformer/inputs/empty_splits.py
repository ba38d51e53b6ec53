"""Splits a conversion left without lists, or whose items all share one label: refused for
training, left out of evaluation with a warning, refused by ``tfr-eval`` by name.

>>> entry = {"num_lists": 0, "input_lists": 3, "lists_dropped": {"min_list_size": 3}}
>>> manifest = Manifest.coerce({"parameters": {"min_list_size": 5}, "splits": {"vali": entry}})
>>> why_empty(manifest, "vali")
'--min-list-size 5 dropped all 3 of its lists: see lists_dropped in its manifest.json'
"""

from __future__ import annotations

import dataclasses
import logging
import os

from tfr_rankformer.inputs.feature_signal import warn_constant_features
from tfr_rankformer.inputs.manifest import MANIFEST_NAME, Manifest

logger = logging.getLogger(__name__)

# The reasons ``lists_dropped`` counts, by the tfr-convert option behind each.
_OPTIONS = {"min_list_size": "--min-list-size"}
_TRAIN = "train"


class EmptySplitError(ValueError):
    """A split without lists where lists are needed (training, or evaluating it)."""


def empty_splits(manifest: Manifest) -> list[str]:
    """The splits whose manifest entry records 0 lists (an unrecorded count is not 0)."""
    return [name for name, entry in manifest.splits.items() if entry.num_lists == 0]


def one_label(*histograms) -> str | None:
    """The one label of every item ``histograms`` count (``None``: several or unrecorded).

    >>> one_label({"0": 7, "1": 0}, None), one_label({"0": 7, "1": 2})
    ('0', None)
    """
    present = {value for h in histograms if h is not None for value, n in h.items() if n}
    return next(iter(present)) if len(present) == 1 else None


def nothing_to_learn(why: str) -> EmptySplitError:
    """The refusal of a training split in which no list has two different labels."""
    return EmptySplitError(
        f"{why}: there is nothing to learn; train on data whose lists hold items of "
        "different labels"
    )


def _no_ranking(split: str, data_dir: str, value: str) -> str:
    return (
        f"the {split!r} split of {data_dir} has no list with two different labels (every "
        f"item's label is {value}: label_histogram in its manifest.json)"
    )


def why_empty(manifest: Manifest, split: str, *, manifest_path: str = "its manifest.json") -> str:
    """Why ``split`` holds no lists, as its manifest records it."""
    entry = manifest.split(split)
    dropped = {reason: n for reason, n in (entry.lists_dropped or {}).items() if n}
    if not dropped:
        if entry.input_lists == 0:
            return "its input held no lists"
        return "tfr-convert wrote none of its lists"
    parameters = manifest.parameters or {}
    causes = []
    for reason, count in sorted(dropped.items()):
        option = _OPTIONS.get(reason, reason)
        value = parameters.get(reason)
        setting = option if value is None else f"{option} {value}"
        causes.append(f"{setting} dropped {_share(count, entry.input_lists)}")
    return f"{', '.join(causes)}: see lists_dropped in {manifest_path}"


def _share(count: int, total: int | None) -> str:
    if count != total:
        return f"{count:,} of its lists"
    return "its only list" if count == 1 else f"all {count:,} of its lists"


def _remedy(manifest: Manifest, split: str) -> str:
    dropped = [r for r, n in (manifest.split(split).lists_dropped or {}).items() if n]
    options = [_OPTIONS[r] for r in sorted(dropped) if r in _OPTIONS]
    if options:
        return f"convert the data again with a smaller {' and '.join(options)}"
    return f"convert data whose {split} split holds lists"


def empty_split_error(
    manifest: Manifest, split: str, *, data_dir: str, then: str | None = None
) -> EmptySplitError:
    """The error for the empty ``split``: why, and ``then`` (default: how to convert)."""
    return EmptySplitError(
        f"{_no_lists(manifest, split, data_dir)}; {then or _remedy(manifest, split)}"
    )


def _no_lists(manifest: Manifest, split: str, directory: str) -> str:
    path = os.path.join(directory, MANIFEST_NAME)
    why = why_empty(manifest, split, manifest_path=path)
    return f"the {split!r} split of {directory} holds no lists ({why})"


def without_empty_splits(manifest: Manifest, *, data_dir: str) -> Manifest:
    """``manifest`` without its empty or one-label evaluation splits (with a warning); such a
    ``train`` split raises ``EmptySplitError``."""
    empty = empty_splits(manifest)
    if _TRAIN in empty:
        raise empty_split_error(manifest, _TRAIN, data_dir=data_dir)
    for split in empty:
        left_out = "it is left out of this run's evaluation"
        logger.warning(f"{_no_lists(manifest, split, data_dir)}: {left_out}")
    train = manifest.splits.get(_TRAIN)
    if (value := one_label(train.label_histogram) if train else None) is not None:
        raise nothing_to_learn(_no_ranking(_TRAIN, data_dir, value))
    for split, entry in manifest.splits.items():
        value = one_label(entry.label_histogram, entry.relevance_histogram)
        if split not in empty and value is not None:
            left_out = "nothing to measure, it is left out of this run's evaluation"
            logger.warning(f"{_no_ranking(split, data_dir, value)}: {left_out}")
            empty.append(split)
    warn_constant_features(manifest, data_dir=data_dir)
    if not empty:
        return manifest
    splits = {name: e for name, e in manifest.splits.items() if name not in empty}
    return dataclasses.replace(manifest, splits=splits)


def log_empty_splits(manifest: Manifest, *, output_dir: str) -> None:
    """tfr-convert's warning for every split of ``output_dir`` it left without lists."""
    for split in empty_splits(manifest):
        then = (
            f"tfr-train will refuse it; {_remedy(manifest, split)}"
            if split == _TRAIN
            else "tfr-train will leave it out of its evaluation"
        )
        logger.warning(f"{_no_lists(manifest, split, output_dir)}; {then}")
