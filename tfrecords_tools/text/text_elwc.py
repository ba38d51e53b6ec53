"""The text ELWC layout: writing and reading lists of tokenised queries and documents.

The layout is the one TF-Ranking's own text examples use
(``tensorflow_ranking/examples/keras/keras_dnn_tfrecord.py`` and the files of
``tensorflow_ranking/examples/data/``): one ``ExampleListWithContext`` per
query whose

* context holds ``query_tokens`` (``bytes_list``, one UTF-8 entry per token);
* items hold ``document_tokens`` (``bytes_list``, one entry per token) and
  ``relevance`` (``int64_list``, one graded label).

Our files add two features a parser that does not ask for them never sees: the
context's ``query_id`` and each item's ``document_id`` (``bytes_list``, one
entry), so scores can be written back as a TREC run. Splits are written to
``DIR/{train,vali,test}-NNNNN-of-NNNNN.tfrecord`` beside ``manifest.json``
(``kind: "text"``).

The protos are encoded and decoded by hand (bytes and int64 lists only), so
conversion and reading never load TensorFlow; tests check both directions
against the protobuf classes and ``tf.io`` parsing.
"""

from __future__ import annotations

import collections
import dataclasses
import glob
import os
import zlib
from collections.abc import Iterator, Sequence

from tfrecords_tools.elwc_writer import TFRecordWriter, shard_names
from tfrecords_tools.protobuf_wire import (
    WireFormatError,
    decode_varint,
    encode_varint,
    field_header,
    iter_fields,
)
from tfrecords_tools.tfrecord_reader import TFRecordFile

__all__ = [
    "QUERY_FEATURE",
    "DOCUMENT_FEATURE",
    "LABEL_FEATURE",
    "QUERY_ID_FEATURE",
    "DOCUMENT_ID_FEATURE",
    "TEXT_KIND",
    "TextList",
    "TextElwcError",
    "encode_text_list",
    "decode_text_list",
    "TextSplitWriter",
    "text_split_files",
    "read_text_split",
]

QUERY_FEATURE = "query_tokens"
DOCUMENT_FEATURE = "document_tokens"
LABEL_FEATURE = "relevance"
QUERY_ID_FEATURE = "query_id"
DOCUMENT_ID_FEATURE = "document_id"
TEXT_KIND = "text"


@dataclasses.dataclass(frozen=True)
class TextList:
    """One query's candidate documents, tokenised.

    Attributes:
      query_id: the query's id in the source files.
      query_tokens: the query's tokens.
      document_ids: ``[n]`` the documents' ids.
      document_tokens: ``[n]`` each document's tokens.
      relevance: ``[n]`` graded labels (non-negative ints).
    """

    query_id: str
    query_tokens: tuple
    document_ids: tuple
    document_tokens: tuple
    relevance: tuple

    def __post_init__(self):
        n = len(self.document_ids)
        if len(self.document_tokens) != n or len(self.relevance) != n:
            raise ValueError(
                f"list {self.query_id!r}: {n} document ids, {len(self.document_tokens)} token "
                f"lists and {len(self.relevance)} labels; they must be equally many"
            )


class TextElwcError(ValueError):
    """A text ELWC record that does not follow the layout; names the file and record."""

    def __init__(self, path: str, record: int, message: str):
        self.path, self.record, self.message = str(path), record, message
        super().__init__(f"{self.path}: record {record}: {message}")

    def __reduce__(self):
        return (type(self), (self.path, self.record, self.message))


# === Encoding ===


def _field(number: int, payload: bytes) -> bytes:
    """A length-delimited field (wire type 2)."""
    return field_header(number, len(payload)) + payload


def _bytes_feature(values: Sequence[bytes]) -> bytes:
    # Feature.bytes_list (1) -> BytesList.value (1), repeated.
    return _field(1, b"".join(_field(1, v) for v in values))


def _int64_feature(values: Sequence[int]) -> bytes:
    # Feature.int64_list (3) -> Int64List.value (1), packed.
    return _field(3, _field(1, b"".join(encode_varint(v) for v in values)))


def _example(features: dict) -> bytes:
    """``Example.features`` (1) -> ``Features.feature`` (1): map entries key (1), value (2)."""
    entries = b"".join(
        _field(1, _field(1, key.encode("utf-8")) + _field(2, value))
        for key, value in features.items()
    )
    return _field(1, entries)


def _utf8(tokens) -> list[bytes]:
    return [t.encode("utf-8") for t in tokens]


def encode_text_list(text_list: TextList) -> bytes:
    """Serialises one list as an ``ExampleListWithContext`` of the text layout."""
    items = b"".join(
        _field(
            1,  # ExampleListWithContext.examples
            _example(
                {
                    DOCUMENT_ID_FEATURE: _bytes_feature([doc_id.encode("utf-8")]),
                    DOCUMENT_FEATURE: _bytes_feature(_utf8(tokens)),
                    LABEL_FEATURE: _int64_feature([int(label)]),
                }
            ),
        )
        for doc_id, tokens, label in zip(
            text_list.document_ids, text_list.document_tokens, text_list.relevance
        )
    )
    context = _example(
        {
            QUERY_ID_FEATURE: _bytes_feature([text_list.query_id.encode("utf-8")]),
            QUERY_FEATURE: _bytes_feature(_utf8(text_list.query_tokens)),
        }
    )
    return items + _field(2, context)  # ExampleListWithContext.context


# === Decoding ===


def _decode_feature(data: bytes) -> tuple[str, list]:
    """A ``Feature`` as ``(kind, values)``; kind is bytes, float or int64."""
    for number, wire, value in iter_fields(data):
        if number == 1 and wire == 2:
            return "bytes", [v for n, w, v in iter_fields(value) if n == 1 and w == 2]
        if number == 3 and wire == 2:
            values = []
            for n, w, v in iter_fields(value):
                if n == 1 and w == 2:  # packed
                    pos = 0
                    while pos < len(v):
                        item, pos = decode_varint(v, pos)
                        values.append(item - (1 << 64) if item >> 63 else item)
                elif n == 1 and w == 0:
                    values.append(v - (1 << 64) if v >> 63 else v)
            return "int64", values
        if number == 2 and wire == 2:
            return "float", [None]  # float values are not part of the text layout
    return "empty", []


def _decode_example(data: bytes) -> dict:
    features = {}
    for number, wire, value in iter_fields(data):
        if number != 1 or wire != 2:
            continue
        for n, w, entry in iter_fields(value):
            if n != 1 or w != 2:
                continue
            key, feature = "", b""
            for en, ew, ev in iter_fields(entry):
                if en == 1 and ew == 2:
                    key = ev.decode("utf-8")
                elif en == 2 and ew == 2:
                    feature = ev
            features[key] = _decode_feature(feature)
    return features


def _tokens(features: dict, name: str, where: str) -> tuple:
    kind, values = features.get(name, ("missing", []))
    if kind == "missing":
        raise ValueError(f"{where} lacks the bytes feature {name!r}")
    if kind not in ("bytes", "empty"):
        raise ValueError(f"{where}: feature {name!r} is a {kind} list, not a bytes list")
    return tuple(v.decode("utf-8") for v in values)


def decode_text_list(data: bytes, *, default_query_id: str = "") -> TextList:
    """Parses one serialised list of the text layout.

    Args:
      data: a serialised ``ExampleListWithContext``.
      default_query_id: the id of a list whose context has no ``query_id``.

    Raises:
      ValueError: a malformed proto, or a missing or mistyped feature (naming it).
    """
    try:
        items, context = [], {}
        for number, wire, value in iter_fields(data):
            if number == 1 and wire == 2:
                items.append(_decode_example(value))
            elif number == 2 and wire == 2:
                context = _decode_example(value)
    except (WireFormatError, UnicodeDecodeError) as e:
        raise ValueError(f"not an ExampleListWithContext ({e})") from None
    query_tokens = _tokens(context, QUERY_FEATURE, "the context")
    ids = _tokens(context, QUERY_ID_FEATURE, "the context") if QUERY_ID_FEATURE in context else ()
    doc_ids, doc_tokens, labels = [], [], []
    for i, item in enumerate(items, start=1):
        where = f"item {i}"
        doc_tokens.append(_tokens(item, DOCUMENT_FEATURE, where))
        kind, values = item.get(LABEL_FEATURE, ("missing", []))
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
    )


# === Files ===


class TextSplitWriter:
    """Writes a split's lists to ``--shards`` files, each list to the shard of its query id.

    Args:
      directory: the output directory.
      split: ``train``, ``vali`` or ``test``.
      num_shards: files of the split (all are written, possibly empty).
    """

    def __init__(self, directory: str, split: str, num_shards: int):
        self.names = shard_names(split, num_shards)
        self.counts = [0] * num_shards
        self.num_lists = self.num_items = 0
        # Lists by their length: every list, and those without a relevant document.
        self.list_lengths: collections.Counter = collections.Counter()
        self.empty_list_lengths: collections.Counter = collections.Counter()
        self._writers = [TFRecordWriter(os.path.join(directory, n)) for n in self.names]

    def write(self, text_list: TextList) -> None:
        shard = zlib.crc32(text_list.query_id.encode("utf-8")) % len(self._writers)
        self._writers[shard].write(encode_text_list(text_list))
        self.counts[shard] += 1
        length = len(text_list.document_ids)
        self.num_lists += 1
        self.num_items += length
        self.list_lengths[length] += 1
        if max(text_list.relevance, default=0) == 0:
            self.empty_list_lengths[length] += 1

    def length_histograms(self) -> dict:
        """The manifest's ``list_length_histogram`` and ``empty_list_length_histogram``.

        ``{str(length): lists}`` in increasing length, of every list written and
        of the lists whose highest label (the list label) is 0.
        """
        return {
            "list_length_histogram": _histogram(self.list_lengths),
            "empty_list_length_histogram": _histogram(self.empty_list_lengths),
        }

    def close(self) -> dict:
        """Closes the files; returns ``{file name: lists}``."""
        for writer in self._writers:
            writer.close()
        return dict(zip(self.names, self.counts))


def _histogram(counts: collections.Counter) -> dict:
    return {str(length): counts[length] for length in sorted(counts)}


def text_split_files(directory: str, split: str) -> list[str]:
    """The split's TFRecord files in ``directory``, sorted."""
    return sorted(glob.glob(os.path.join(glob.escape(directory), f"{split}-*.tfrecord")))


def read_text_split(directory: str, split: str) -> Iterator[TextList]:
    """Reads every list of a split written by :class:`TextSplitWriter`.

    Raises:
      FileNotFoundError: the split has no files in ``directory``.
      TextElwcError: a record that is not a list of the text layout (naming
        the file and the record).
    """
    paths = text_split_files(directory, split)
    if not paths:
        raise FileNotFoundError(f"no {split}-*.tfrecord files in {directory}")
    for path in paths:
        for number, data in TFRecordFile(path).records():
            try:
                yield decode_text_list(data, default_query_id=f"{split}:{number}")
            except ValueError as e:
                raise TextElwcError(path, number, str(e)) from None
