"""The text ELWC layout (context ``query_tokens``, items ``document_tokens``, ``relevance``,
ours also ids and ``first_stage_score``), encoded without TensorFlow."""

from __future__ import annotations

import dataclasses
import glob
import math
import os
import struct
import zlib
from collections.abc import Iterator

import numpy as np
from google.protobuf.message import DecodeError

from tfrecords_tools.elwc_writer import TFRecordWriter, shard_names
from tfrecords_tools.list_processing import SplitStats
from tfrecords_tools.protobuf_wire import ExampleListWithContext
from tfrecords_tools.tfrecord_reader import TFRecordFile, TFRecordFormatError

QUERY_FEATURE = "query_tokens"
DOCUMENT_FEATURE = "document_tokens"
LABEL_FEATURE = "relevance"
QUERY_ID_FEATURE = "query_id"
DOCUMENT_ID_FEATURE = "document_id"
FIRST_STAGE_FEATURE = "first_stage_score"
TEXT_KIND = "text"


def to_float32(value: float) -> float:
    """``value`` rounded to float32; ``ValueError`` when not finite in float32."""
    try:
        (rounded,) = struct.unpack("<f", struct.pack("<f", value))
    except OverflowError:
        raise ValueError(f"{value!r} is beyond float32's range") from None
    except struct.error:
        raise ValueError(f"{value!r} is not a number") from None
    if not math.isfinite(rounded):
        raise ValueError(f"{value!r} is not a finite number")
    return rounded


@dataclasses.dataclass(frozen=True)
class TextList:
    """One query's candidate documents, tokenised, with graded labels and, optionally,
    each document's first-stage score (kept rounded to float32, as it is written)."""

    query_id: str
    query_tokens: tuple
    document_ids: tuple
    document_tokens: tuple
    relevance: tuple
    first_stage_scores: tuple | None = None

    def __post_init__(self):
        n = len(self.document_ids)
        if len(self.document_tokens) != n or len(self.relevance) != n:
            raise ValueError(
                f"list {self.query_id!r}: {n} document ids, {len(self.document_tokens)} token "
                f"lists and {len(self.relevance)} labels; they must be equally many"
            )
        if self.first_stage_scores is None:
            return
        if len(self.first_stage_scores) != n:
            raise ValueError(
                f"list {self.query_id!r}: {n} document ids and {len(self.first_stage_scores)} "
                "first-stage scores; they must be equally many"
            )
        try:
            scores = tuple(to_float32(v) for v in self.first_stage_scores)
        except ValueError as e:
            raise ValueError(f"list {self.query_id!r}: a first-stage score {e}") from None
        object.__setattr__(self, "first_stage_scores", scores)


def encode_text_list(text_list: TextList) -> bytes:
    """Serialises one list as an ``ExampleListWithContext`` of the text layout."""
    elwc = ExampleListWithContext()
    context = elwc.context.features.feature
    context[QUERY_ID_FEATURE].bytes_list.value.append(text_list.query_id.encode("utf-8"))
    context[QUERY_FEATURE].bytes_list.value.extend(
        t.encode("utf-8") for t in text_list.query_tokens
    )
    for i, document_id in enumerate(text_list.document_ids):
        item = elwc.examples.add().features.feature
        item[DOCUMENT_ID_FEATURE].bytes_list.value.append(document_id.encode("utf-8"))
        tokens = (t.encode("utf-8") for t in text_list.document_tokens[i])
        item[DOCUMENT_FEATURE].bytes_list.value.extend(tokens)  # present even when empty
        item[LABEL_FEATURE].int64_list.value.append(int(text_list.relevance[i]))
        if text_list.first_stage_scores is not None:
            item[FIRST_STAGE_FEATURE].float_list.value.append(text_list.first_stage_scores[i])
    return elwc.SerializeToString(deterministic=True)


# === Decoding ===


def _values(features, name: str) -> tuple[str, list]:
    """A feature's ``(kind, values)``: ``bytes``, ``float``, ``int64``, ``empty``, ``missing``."""
    if name not in features:
        return "missing", []
    kind = features[name].WhichOneof("kind")
    if kind is None:
        return "empty", []
    return kind.removesuffix("_list"), list(getattr(features[name], kind).value)


def _tokens(features, name: str, where: str) -> tuple:
    kind, values = _values(features, name)
    if kind == "missing":
        raise ValueError(f"{where} lacks the bytes feature {name!r}")
    if kind not in ("bytes", "empty"):
        raise ValueError(f"{where}: feature {name!r} is a {kind} list, not a bytes list")
    return tuple(v.decode("utf-8") for v in values)


def _first_stage_scores(items: list) -> tuple | None:
    """Each item's ``first_stage_score``; ``None`` when no item has one."""
    if not any(FIRST_STAGE_FEATURE in item for item in items):
        return None
    scores = []
    for i, item in enumerate(items, start=1):
        kind, values = _values(item, FIRST_STAGE_FEATURE)
        if kind != "float" or len(values) != 1:
            raise ValueError(
                f"item {i}: {FIRST_STAGE_FEATURE!r} must be one float (as the list's other "
                f"items have), got {kind} {values}"
            )
        scores.append(values[0])
    return tuple(scores)


def decode_text_list(data: bytes, *, default_query_id: str = "") -> TextList:
    """Parses one list of the text layout; ``ValueError`` names a bad proto or feature."""
    try:
        elwc = ExampleListWithContext.FromString(data)
    except DecodeError as e:
        raise ValueError(f"not an ExampleListWithContext ({e})") from None
    context = elwc.context.features.feature
    items = [example.features.feature for example in elwc.examples]
    query_tokens = _tokens(context, QUERY_FEATURE, "the context")
    ids = _tokens(context, QUERY_ID_FEATURE, "the context") if QUERY_ID_FEATURE in context else ()
    doc_ids, doc_tokens, labels = [], [], []
    for i, item in enumerate(items, start=1):
        where = f"item {i}"
        doc_tokens.append(_tokens(item, DOCUMENT_FEATURE, where))
        kind, values = _values(item, LABEL_FEATURE)
        if kind != "int64" or len(values) != 1 or values[0] < 0:
            raise ValueError(
                f"{where}: {LABEL_FEATURE!r} must be one non-negative int64, got {kind} {values}"
            )
        labels.append(values[0])
        own = _tokens(item, DOCUMENT_ID_FEATURE, where) if DOCUMENT_ID_FEATURE in item else ()
        doc_ids.append(own[0] if own else str(i))
    return TextList(
        ids[0] if ids else default_query_id,
        query_tokens,
        tuple(doc_ids),
        tuple(doc_tokens),
        tuple(labels),
        _first_stage_scores(items),
    )


# === Files ===


class TextSplitWriter:
    """Writes a split's lists to its shards (all written), each to its query id's shard."""

    def __init__(self, directory: str, split: str, num_shards: int):
        self.names = shard_names(split, num_shards)
        self.counts = [0] * num_shards
        self.stats = SplitStats()
        self._writers = [TFRecordWriter(os.path.join(directory, n)) for n in self.names]

    def write(self, text_list: TextList) -> None:
        shard = zlib.crc32(text_list.query_id.encode("utf-8")) % len(self._writers)
        self._writers[shard].write(encode_text_list(text_list))
        self.counts[shard] += 1
        relevance = np.asarray([text_list.relevance], dtype=np.int64)  # [1, n]
        self.stats.record(relevance, relevance)

    def close(self) -> dict:
        """Closes the files; returns the split's manifest entry."""
        for writer in self._writers:
            writer.close()
        stats = self.stats.as_dict(simulated=False)
        keys = ("num_lists", "num_items", "list_length_histogram", "empty_list_length_histogram")
        return {**{k: stats[k] for k in keys}, "files": dict(zip(self.names, self.counts))}


def read_text_split(directory: str, split: str) -> Iterator[TextList]:
    """Reads every list of a split written by :class:`TextSplitWriter`."""
    paths = sorted(glob.glob(os.path.join(glob.escape(directory), f"{split}-*.tfrecord")))
    if not paths:
        raise FileNotFoundError(f"no {split}-*.tfrecord files in {directory}")
    for path in paths:
        for number, data in TFRecordFile(path).records():
            try:
                yield decode_text_list(data, default_query_id=f"{split}:{number}")
            except ValueError as e:
                raise TFRecordFormatError(path, number, str(e)) from None
