"""What an ``elwc:`` input names: its files per split (by name prefix or ``split=GLOB``)
and the item features to read (names, globs or ``{1..136}`` ranges)."""

from __future__ import annotations

import dataclasses
import fnmatch
import glob
import logging
import os
import re

from tfr_rankformer.core.config_io import setting
from tfr_rankformer.core.elwc_schema import SPLITS
from tfrecords_tools.datasets import DatasetNotFoundError

logger = logging.getLogger(__name__)

ELWC_PREFIX = "elwc:"
# The file-name prefixes that place a file in a split.
_SPLIT_PREFIX = re.compile(r"train|vali|eval|test")
NO_FEATURES_MESSAGE = (
    "an elwc: input needs --elwc-features: the item features to read, e.g. "
    "'custom_features_*' or 'custom_features_{1..136}'"
)
_RANGE = re.compile(r"(.*)\{(\d+)\.\.(\d+)\}(.*)")
_GLOB_CHARS = re.compile(r"[*?\[]")


@dataclasses.dataclass(frozen=True)
class ElwcConfig:
    """How to read TF-Ranking-style ELWC (one feature per name per item)."""

    features: tuple[str, ...] = setting(
        (),
        "the item features to read, in order, comma-separated: names, globs "
        "('custom_features_*', ordered by number) or ranges ('custom_features_{1..136}')",
        flag="--elwc-features",
        metavar="LIST",
    )
    label: str = setting(
        "relevance",
        "item feature holding the graded label (float or int64)",
        flag="--elwc-label",
        metavar="NAME",
    )
    context: tuple[str, ...] = setting(
        (),
        "context features to copy into each output list's context, comma-separated (lists "
        "that lack one are counted in the manifest)",
        flag="--elwc-context",
        metavar="LIST",
    )
    qid: str | None = setting(
        None,
        "int64 context feature holding the query id. Default: lists are numbered 1, 2, ... "
        "per split in file order",
        flag="--elwc-qid",
        metavar="NAME",
    )
    missing_value: float = setting(
        0.0,
        "value of an item feature a record lacks (counted in the manifest). Default: 0",
        flag="--elwc-missing-value",
        metavar="X",
    )

    def __post_init__(self):
        for name in ("features", "context"):
            value = getattr(self, name)
            if isinstance(value, str):
                value = tuple(v.strip() for v in value.split(",") if v.strip())
            object.__setattr__(self, name, tuple(value))
        if not self.label:
            raise ValueError("`label` must name the item feature holding the label")
        if "qid" in self.context:
            raise ValueError("`context` cannot carry 'qid': the output's qid is written from `qid`")
        if self.label in self.features:
            raise ValueError(f"`label` {self.label!r} is also listed among `features`")


def _natural_key(name: str):
    """``custom_features_2`` before ``custom_features_10``."""
    return [int(part) if part.isdigit() else part for part in re.split(r"(\d+)", name)]


def resolve_feature_names(patterns: tuple[str, ...], available: set[str]) -> list[str]:
    """Expands ranges and globs (matched against ``available``) into ordered feature names."""
    if not patterns:
        raise ValueError(NO_FEATURES_MESSAGE)
    names: list[str] = []
    for pattern in patterns:
        ranged = _RANGE.fullmatch(pattern)
        if ranged:
            head, first, last, tail = ranged.groups()
            step = 1 if int(last) >= int(first) else -1
            names += [f"{head}{i}{tail}" for i in range(int(first), int(last) + step, step)]
        elif _GLOB_CHARS.search(pattern):
            matched = sorted(fnmatch.filter(available, pattern), key=_natural_key)
            if not matched:
                shown = ", ".join(sorted(available, key=_natural_key)[:20]) or "none"
                raise ValueError(
                    f"--elwc-features {pattern!r} matches no item feature; the records' item "
                    f"features are: {shown}"
                )
            names += matched
        else:
            names.append(pattern)
    seen: set[str] = set()
    for name in names:
        if name in seen:
            raise ValueError(f"--elwc-features names the item feature {name!r} twice")
        seen.add(name)
    return names


def _split_of(path: str) -> str | None:
    found = _SPLIT_PREFIX.match(os.path.basename(path).lower())
    return None if found is None else {"eval": "vali"}.get(found[0], found[0])


def _matches(pattern: str, what: str) -> list[str]:
    files = sorted(p for p in glob.glob(pattern) if os.path.isfile(p))
    if not files:
        raise DatasetNotFoundError(f"{what} {pattern!r}: no file matches")
    return files


def elwc_split_files(spec: str) -> dict[str, list[str]]:
    """The files of each split named by an ``elwc:`` input (see the module docstring)."""
    body = spec[len(ELWC_PREFIX) :] if spec.startswith(ELWC_PREFIX) else spec
    if re.match(r"(train|vali|test)=", body):
        files: dict[str, list[str]] = {}
        for part in re.split(r",(?=(?:train|vali|test)=)", body):
            split, _, pattern = part.partition("=")
            if split in files:
                raise DatasetNotFoundError(f"--input {spec!r} names the {split} split twice")
            files[split] = _matches(pattern, f"--input {split}=")
    elif os.path.isdir(body):
        files = {}
        for path in sorted(os.path.join(body, n) for n in os.listdir(body)):
            if not os.path.isfile(path) or os.path.basename(path).startswith("."):
                continue
            split = _split_of(path)
            if split is None:
                logger.warning("%s: left out (its name starts with no split name)", path)
                continue
            files.setdefault(split, []).append(path)
    else:
        files = {}
        for path in _matches(body, "--input elwc:"):
            split = _split_of(path)
            if split is None:
                raise DatasetNotFoundError(
                    f"{path} matches --input {spec!r} but its name starts with none of train, "
                    "vali, valid, eval, test; name the splits: elwc:train=GLOB,vali=GLOB,test=GLOB"
                )
            files.setdefault(split, []).append(path)
    if "train" not in files:
        raise DatasetNotFoundError(f"--input {spec!r}: no train files (found {sorted(files)})")
    return {split: files[split] for split in SPLITS if split in files}
