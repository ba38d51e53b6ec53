"""TF-Ranking-style ELWC as a ``tfr-convert`` input, read twice: a survey (names, labels,
context types), then the validated conversion; errors name file, record, item and field."""

from __future__ import annotations

import dataclasses
import logging
import math
from collections.abc import Iterator

import numpy as np
from google.protobuf.message import DecodeError

from tfrecords_tools.elwc_input import (
    NO_FEATURES_MESSAGE,
    ElwcConfig,
    elwc_split_files,
    resolve_feature_names,
)
from tfrecords_tools.letor.letor_parser import LetorFormatError
from tfrecords_tools.letor.letor_reader import QueryList
from tfrecords_tools.protobuf_wire import ExampleListWithContext
from tfrecords_tools.tfrecord_reader import TFRecordFile

logger = logging.getLogger(__name__)

_FLOAT32_MAX = float(np.finfo(np.float32).max)
_DTYPES = {"float_list": "float32", "int64_list": "int64", "bytes_list": "string"}


class ElwcFormatError(LetorFormatError):
    """An ELWC record that cannot be converted; names the file, record, item and field."""

    def __init__(
        self,
        path: str,
        record: int,
        message: str,
        field: str | None = None,
        item: int | None = None,
    ):
        self.path, self.line, self.token, self.message = str(path), record, None, message
        self.record, self.field, self.item = record, field, item
        where = f"record {record}" + (f", item {item}" if item else "")
        where += f", feature {field!r}" if field else ""
        ValueError.__init__(self, f"{self.path}: {where}: {message}")

    def __reduce__(self):
        return (type(self), (self.path, self.record, self.message, self.field, self.item))


@dataclasses.dataclass
class _SplitCounts:
    """What the manifest records about a split's ELWC input."""

    files: list = dataclasses.field(default_factory=list)
    missing_values: int = 0
    items_with_missing: int = 0
    missing_context: dict = dataclasses.field(default_factory=dict)
    unused: set = dataclasses.field(default_factory=set)


def _parse(path: str, number: int, data: bytes):
    try:
        elwc = ExampleListWithContext.FromString(data)
    except DecodeError as e:
        raise ElwcFormatError(path, number, f"not an ExampleListWithContext proto ({e})") from None
    if not elwc.examples:
        raise ElwcFormatError(
            path, number, "the list has no items (is this ExampleListWithContext?)"
        )
    return elwc


def _scalar(feature, path: str, number: int, item: int | None, name: str) -> float | None:
    """The one float or int64 value of ``feature``; ``None`` when it holds no value."""
    kind = feature.WhichOneof("kind")
    if kind == "bytes_list":
        raise ElwcFormatError(path, number, "holds bytes; expected a float or int64", name, item)
    values = getattr(feature, kind).value if kind else ()
    if len(values) > 1:
        raise ElwcFormatError(
            path, number, f"holds {len(values)} values; expected one per item", name, item
        )
    if not values:
        return None
    value = float(values[0])
    if not math.isfinite(value):
        raise ElwcFormatError(path, number, "value is NaN or infinite", name, item)
    if abs(value) > _FLOAT32_MAX:
        raise ElwcFormatError(path, number, "value overflows float32", name, item)
    return value


class ElwcSource:
    """An ``elwc:`` input, surveyed on creation."""

    def __init__(self, spec: str, config: ElwcConfig, *, max_relevance: int | None):
        self.spec, self.config = spec, config
        if not config.features:
            raise ValueError(NO_FEATURES_MESSAGE)  # before reading any file
        self.files = elwc_split_files(spec)
        self.splits = {split: split for split in self.files}
        available, max_label, self.context_types = self._survey()
        self.feature_names = resolve_feature_names(config.features, available)
        self.num_features = len(self.feature_names)
        self._index = {name: j for j, name in enumerate(self.feature_names)}
        self.max_relevance = max_relevance or max(int(max_label), 1)
        self._counts: dict[str, _SplitCounts] = {}

    def _survey(self) -> tuple[set[str], float, dict[str, str]]:
        """Item feature names, the highest label, and the carried context features' types."""
        names: set[str] = set()
        max_label = 0.0
        context_types: dict[str, str] = {}
        label = self.config.label
        for paths in self.files.values():
            for path in paths:
                for number, data in TFRecordFile(path).records():
                    elwc = _parse(path, number, data)
                    for example in elwc.examples:
                        names.update(example.features.feature.keys())
                        if label in example.features.feature:
                            value = example.features.feature[label]
                            values = getattr(value, value.WhichOneof("kind") or "float_list").value
                            if values and value.WhichOneof("kind") != "bytes_list":
                                max_label = max(max_label, *map(float, values))
                    context = elwc.context.features.feature
                    for name in self.config.context:
                        if name in context and name not in context_types:
                            context_types[name] = _DTYPES.get(context[name].WhichOneof("kind"))
        names.discard(label)
        return names, max_label, context_types

    def describe(self, split: str) -> dict:
        """What the manifest records about the split's input (after :meth:`lists`)."""
        counts = self._counts[split]
        return {
            "files": counts.files,
            "label_feature": self.config.label,
            "missing_value": self.config.missing_value,
            "missing_feature_values": counts.missing_values,
            "items_with_missing_features": counts.items_with_missing,
            "missing_context_features": dict(sorted(counts.missing_context.items())),
            "unused_item_features": sorted(counts.unused),
        }

    def lists(self, split: str) -> Iterator[QueryList]:
        """Yields the split's validated lists; items are numbered across the split."""
        counts = self._counts[split] = _SplitCounts()
        position, ordinal, seen = 1, 0, {}
        for path in self.files[split]:
            reader = TFRecordFile(path)
            for number, data in reader.records():
                ordinal += 1
                elwc = _parse(path, number, data)
                qid = self._qid(elwc, path, number, ordinal)
                if qid in seen:
                    message = f"qid {qid} appears again; it was {seen[qid]}"
                    raise ElwcFormatError(path, number, message, self.config.qid)
                seen[qid] = f"record {number} of {path}"
                labels, features = self._items(elwc, path, number, counts)
                positions = np.arange(position, position + len(labels), dtype=np.int64)
                position += len(labels)
                context = self._context(elwc, counts)
                yield QueryList(qid, labels, features, positions, context)
            counts.files.append(
                {
                    "path": reader.path,
                    "sha256": reader.sha256,
                    "bytes": reader.size_bytes,
                    "records": reader.num_records,
                }
            )
        if counts.missing_values:
            logger.warning(
                "%s: %d feature value(s) missing in %d item(s) were set to %g",
                split,
                counts.missing_values,
                counts.items_with_missing,
                self.config.missing_value,
            )

    def _qid(self, elwc, path: str, number: int, ordinal: int) -> int:
        name = self.config.qid
        if name is None:
            return ordinal
        feature = elwc.context.features.feature.get(name)
        if feature is None or feature.WhichOneof("kind") != "int64_list":
            raise ElwcFormatError(path, number, "the context lacks this int64 qid feature", name)
        if len(feature.int64_list.value) != 1:
            raise ElwcFormatError(path, number, "expected one qid value", name)
        return int(feature.int64_list.value[0])

    def _items(self, elwc, path: str, number: int, counts: _SplitCounts):
        """``[n]`` int64 labels and ``[n, d]`` float32 features of one record."""
        config, index = self.config, self._index
        n, d = len(elwc.examples), self.num_features
        features = np.full((n, d), config.missing_value, dtype=np.float32)
        filled = np.zeros((n, d), dtype=bool)
        labels = np.empty(n, dtype=np.int64)
        for i, example in enumerate(elwc.examples):
            item = i + 1
            for name, feature in example.features.feature.items():
                if name == config.label:
                    labels[i] = self._label(feature, path, number, item)
                    continue
                j = index.get(name)
                if j is None:
                    counts.unused.add(name)
                    continue
                value = _scalar(feature, path, number, item, name)
                if value is not None:
                    features[i, j] = value
                    filled[i, j] = True
            if config.label not in example.features.feature:
                raise ElwcFormatError(
                    path, number, "the item has no label feature", config.label, item
                )
        missing = d * n - int(filled.sum())
        if missing:
            counts.missing_values += missing
            counts.items_with_missing += int((~filled).any(axis=1).sum())
        return labels, features

    def _label(self, feature, path: str, number: int, item: int) -> int:
        value = _scalar(feature, path, number, item, self.config.label)
        if value is None or value < 0 or value != round(value):
            message = f"label must be one non-negative integer, got {value!r}"
        elif value > self.max_relevance:
            message = (
                f"label {int(value)} is above the maximum relevance {self.max_relevance} "
                "(pass --max-relevance to change it)"
            )
        else:
            return int(value)
        raise ElwcFormatError(path, number, message, self.config.label, item)

    def _context(self, elwc, counts: _SplitCounts) -> bytes:
        """The carried context features as a serialised ``tf.train.Features``."""
        if not self.config.context:
            return b""
        source = elwc.context.features.feature
        carried = type(elwc.context.features)()
        for name in self.config.context:
            if name in source:
                carried.feature[name].CopyFrom(source[name])
            else:
                counts.missing_context[name] = counts.missing_context.get(name, 0) + 1
        return carried.SerializeToString(deterministic=True)
