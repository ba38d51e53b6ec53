"""The manifest ``tfr-convert`` writes beside its shards, typed (other keys are kept, so
``Manifest.from_json(d).to_json() == d``); ``None`` is unrecorded.

>>> m = Manifest.coerce({"num_features": 3, "max_relevance": 2, "splits": {
...     "train": {"files": {"train-00000-of-00001.tfrecord": 4}, "longest_list": 7}}})
>>> m.num_features, m.label_levels, m.longest_list, m.is_text
(3, 2, 7, False)
"""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Callable, Mapping
from typing import Any

from tfr_rankformer.core.atomic_files import atomic_write
from tfr_rankformer.inputs.manifest_fields import EMPTY, JsonRecord, Origin, dumps, is_int, typed

MANIFEST_NAME = "manifest.json"
# ``kind`` of a text dataset's manifest (feature-vector manifests have none).
TEXT_KIND = "text"
_SIMULATED = "simulated_implicit"
# The per-split count of items whose input lacked a feature (under ``input``).
MISSING_FEATURES = "items_with_missing_features"


@dataclasses.dataclass(frozen=True)
class SplitEntry(JsonRecord):
    """One split of a manifest: its shards (file name -> lists), counts and histograms."""

    num_lists: int | None = typed("int")
    num_items: int | None = typed("int")
    longest_list: int | None = typed("int")
    input_lists: int | None = typed("int")
    input_items: int | None = typed("int")
    label_histogram: Mapping[str, int] | None = typed("counts")
    relevance_histogram: Mapping[str, int] | None = typed("counts")
    list_label_histogram: Mapping[str, int] | None = typed("counts")
    list_length_histogram: Mapping[str, int] | None = typed("counts")
    empty_list_length_histogram: Mapping[str, int] | None = typed("counts")
    intent_histogram: Mapping[str, int] | None = typed("counts")
    items_dropped: Mapping[str, int] | None = typed("counts")
    lists_dropped: Mapping[str, int] | None = typed("counts")
    num_features: int | None = typed("int")
    input: Mapping[str, Any] | None = typed("object")
    files: Mapping[str, int] | None = typed("counts")
    extra: Mapping[str, Any] = dataclasses.field(default_factory=lambda: EMPTY, repr=False)
    key_order: tuple[str, ...] = dataclasses.field(default=(), compare=False, repr=False)

    def __post_init__(self):
        self.freeze()

    @classmethod
    def from_json(cls, data: Mapping, *, origin: Origin | None = None, name: str = "split"):
        """The entry of the JSON object ``data`` (``name``: its place, for errors)."""
        origin = origin or Origin()
        if not isinstance(data, Mapping):
            raise origin.error(f"the manifest's {name!r} is not a JSON object")
        return cls(**cls.fields_of(data, origin, prefix=f"{name}."))

    def longest_or(self, default: int) -> int:
        """``longest_list``, or ``default`` when it is not recorded."""
        return default if self.longest_list is None else self.longest_list

    @property
    def empty_lists(self) -> int:
        """Lists whose list label is 0 (none when the histogram is not recorded)."""
        return int((self.list_label_histogram or {}).get("0", 0))

    @property
    def items_with_missing_features(self) -> int | None:
        """Items whose input lacked a feature (``None``: not recorded)."""
        count = (self.input or {}).get(MISSING_FEATURES)
        return count if is_int(count) else None

    def list_lengths(self, *, include_empty_lists: bool = True) -> dict[int, int] | None:
        """``{items: lists}`` from the length histograms (``None``: not recorded)."""
        if self.list_length_histogram is None:
            return None
        lengths = {int(k): int(v) for k, v in self.list_length_histogram.items()}
        if not include_empty_lists:
            for k, v in (self.empty_list_length_histogram or {}).items():
                lengths[int(k)] -= int(v)
        return {k: v for k, v in lengths.items() if v}


def _read_splits(value, origin: Origin, name: str) -> dict[str, SplitEntry]:
    if not isinstance(value, Mapping):
        raise origin.error(f"the manifest's {name!r} is not a JSON object")
    return {
        split: SplitEntry.from_json(entry, origin=origin, name=f"{name}.{split}")
        for split, entry in value.items()
    }


@dataclasses.dataclass(frozen=True)
class Manifest(JsonRecord):
    """A converted dataset's ``manifest.json`` (``docs/tfr-convert.md``)."""

    manifest_version: int | None = typed("int")
    created_by: str | None = typed("str")
    kind: str | None = typed("str")
    source: Mapping[str, Any] | None = typed("object")
    num_features: int | None = typed("int")
    num_features_source: str | None = typed("str")
    feature_names: tuple[str, ...] | None = typed("strings", repr=False)
    max_relevance: int | None = typed("int")
    label_kind: str | None = typed("str")
    query_feature: str | None = typed("str")
    document_feature: str | None = typed("str")
    label_feature: str | None = typed("str")
    first_stage_feature: str | None = typed("str")
    first_stage_score_source: str | None = typed("str")
    parameters: Mapping[str, Any] | None = typed("object", repr=False)
    seed: int | None = typed("int")
    filtered: Mapping[str, int] | None = typed("counts")
    splits: Mapping[str, SplitEntry] = typed("splits", default=EMPTY, read=_read_splits)
    normalization: Mapping[str, Any] | None = typed("object", repr=False)
    extra: Mapping[str, Any] = dataclasses.field(default_factory=lambda: EMPTY, repr=False)
    key_order: tuple[str, ...] = dataclasses.field(default=(), compare=False, repr=False)

    def __post_init__(self):
        splits = {
            name: entry if isinstance(entry, SplitEntry) else SplitEntry.from_json(entry)
            for name, entry in (self.splits or {}).items()
        }
        object.__setattr__(self, "splits", splits)
        self.freeze()

    @classmethod
    def from_json(cls, data, *, path: str | None = None, complete: bool = True) -> Manifest:
        """The manifest of the JSON ``data`` from ``path``; ``complete`` requires ``splits``
        with their ``files`` and (unless text) ``num_features``."""
        origin = Origin(path, "; rerun tfr-convert") if path else Origin()
        _check_manifest(origin, data, complete=complete)
        return cls(**cls.fields_of(data, origin))

    @classmethod
    def coerce(cls, value: Manifest | Mapping) -> Manifest:
        """``value`` as a ``Manifest``: itself, or a mapping checked field by field."""
        if isinstance(value, Manifest):
            return value
        if isinstance(value, Mapping):
            return cls.from_json(value, complete=False)
        raise TypeError(f"a manifest is a Manifest or a mapping, not {type(value).__name__}")

    @property
    def is_text(self) -> bool:
        return self.kind == TEXT_KIND

    @property
    def fold(self) -> int | None:
        """The input's fold the dataset was converted from (``None``: a single set)."""
        return (self.source or {}).get("fold")

    @property
    def clicks(self) -> Mapping[str, Any] | None:
        """The click simulation's parameters when the labels are simulated clicks."""
        if self.label_kind != _SIMULATED:
            return None
        return (self.parameters or EMPTY)["clicks"]

    @property
    def label_levels(self) -> int:
        """Levels of the list label above 0: the highest training label."""
        if self.clicks is not None:
            return int(self.clicks["purchase_label"])
        if self.max_relevance is None:
            raise ValueError("the manifest records no 'max_relevance'")
        return int(self.max_relevance)

    @property
    def longest_list(self) -> int:
        """The longest list over every split (1 when none is recorded)."""
        return max((e.longest_or(1) for e in self.splits.values()), default=1)

    def split(self, name: str, data_dir: str = "the dataset") -> SplitEntry:
        """The entry of split ``name``, else a ``ValueError`` naming those there are."""
        if name not in self.splits:
            raise ValueError(f"{data_dir} has no {name!r} split; it has {sorted(self.splits)}")
        return self.splits[name]

    def split_files(self, data_dir: str, split: str) -> list[str]:
        """The TFRecord shards of ``split``, as listed in the manifest."""
        return [os.path.join(data_dir, name) for name in self.split(split, data_dir).files or ()]


def _check_manifest(origin: Origin, data, *, complete: bool) -> None:
    """What every reader relies on (other fields are checked as read)."""
    if not isinstance(data, Mapping):
        raise origin.error("the manifest is not a JSON object")
    if not complete:
        return
    if data.get("kind") != TEXT_KIND and not is_int(data.get("num_features")):
        raise origin.error("the manifest's 'num_features' is missing or not a JSON integer")
    if not isinstance(data.get("splits"), Mapping):
        raise origin.error("the manifest's 'splits' is missing or not a JSON object")
    for split, entry in data["splits"].items():
        if not isinstance(entry, Mapping) or not isinstance(entry.get("files"), Mapping):
            raise origin.error(f"split {split!r} lists no 'files' object")


def read_manifest(path: str, *, complete: bool = True) -> Manifest:
    """The manifest in ``path``; a ``ValueError`` names the file and the field at fault."""
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except json.JSONDecodeError as e:
        raise ValueError(
            f"{path}:{e.lineno}:{e.colno}: the manifest is not valid JSON ({e.msg}); "
            "rerun tfr-convert"
        ) from None
    except UnicodeDecodeError as e:
        raise ValueError(
            f"{path}: the manifest is not UTF-8 text (byte {e.start}); rerun tfr-convert"
        ) from None
    return Manifest.from_json(data, path=path, complete=complete)


def load_manifest(data_dir: str) -> Manifest:
    """The ``manifest.json`` of a converted feature-vector dataset."""
    path = os.path.join(data_dir, MANIFEST_NAME)
    if not os.path.isfile(path):
        raise FileNotFoundError(
            f"{data_dir} holds no manifest.json: point --data at the output of one "
            "tfr-convert run (or one of its FoldN/ directories)"
        )
    manifest = read_manifest(path)
    if manifest.num_features is None:
        raise ValueError(
            f"{path}: the manifest's 'num_features' is missing or not a JSON integer; "
            "rerun tfr-convert"
        )
    return manifest


def manifest_text(manifest: Manifest) -> str:
    """The text of ``manifest.json``: its JSON, lists of numbers kept on one line."""
    return dumps(manifest.to_json()) + "\n"


def write_manifest(
    directory: str, manifest: Manifest, *, write_text: Callable[[str, str], None] | None = None
) -> str:
    """Writes ``directory/manifest.json`` (through ``write_text(path, text)`` if given)."""
    path = os.path.join(directory, MANIFEST_NAME)
    text = manifest_text(manifest)
    if write_text is not None:
        write_text(path, text)
        return path
    with atomic_write(path) as f:
        f.write(text)
    return path
