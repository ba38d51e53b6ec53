"""ELWC protos and TFRecord framing written by hand: every item has the same byte layout,
so numpy assembles whole lists at once, and conversion never loads TensorFlow."""

from __future__ import annotations

import os
import struct
import zlib

import google_crc32c
import numpy as np

from tfr_rankformer.core.elwc_schema import FEATURES, LABEL, QID, RELEVANCE
from tfrecords_tools.protobuf_wire import encode_varint, field_header


def _feature_entry_header(key: str, kind_field: int, values_len: int) -> bytes:
    """Bytes of one ``Features.feature`` map entry up to its ``values_len`` bytes of
    packed values; ``kind_field`` is 2 for ``float_list`` and 3 for ``int64_list``."""
    key_bytes = key.encode("utf-8")
    list_len = len(field_header(1, values_len)) + values_len  # FloatList / Int64List
    feature_len = len(field_header(kind_field, list_len)) + list_len  # Feature
    key_len = len(field_header(1, len(key_bytes))) + len(key_bytes)
    entry_len = key_len + len(field_header(2, feature_len)) + feature_len
    return (
        field_header(1, entry_len)
        + field_header(1, len(key_bytes))
        + key_bytes
        + field_header(2, feature_len)
        + field_header(kind_field, list_len)
        + field_header(1, values_len)
    )


class ElwcEncoder:
    """Serialises query lists of ``num_features`` float features as ELWC protos."""

    def __init__(self, num_features: int):
        self.num_features = num_features
        feature_bytes = 4 * num_features
        self._segments = [
            ("const", _feature_entry_header(FEATURES, 2, feature_bytes)),
            ("features", feature_bytes),
            ("const", _feature_entry_header(LABEL, 2, 4)),
            ("label", 4),
            ("const", _feature_entry_header(RELEVANCE, 2, 4)),
            ("relevance", 4),
        ]
        features_len = sum(len(v) if k == "const" else v for k, v in self._segments)
        example_len = len(field_header(1, features_len)) + features_len
        # Each item: ELWC.examples tag + length, Example.features tag + length, entries.
        head = field_header(1, example_len) + field_header(1, features_len)
        self._segments.insert(0, ("const", head))
        self.item_bytes = len(head) + features_len

    def encode(
        self,
        qid: int,
        features: np.ndarray,
        labels: np.ndarray,
        relevance: np.ndarray,
        *,
        context: bytes = b"",
    ) -> bytes:
        """One list's ELWC from ``[n, d]`` features and ``[n]`` labels; ``context``: further
        serialised ``Features`` entries."""
        return self.encode_lists(
            qid, features[None], labels[None], relevance[None], context=context
        )[0]

    def encode_lists(
        self,
        qid: int,
        features: np.ndarray,
        labels: np.ndarray,
        relevance: np.ndarray,
        *,
        context: bytes = b"",
    ) -> list[bytes]:
        """``m`` lists of ``k`` items that share a qid (``[m, k, d]`` features, ``[m, k]``
        labels and relevance), serialised in one pass."""
        m, k = labels.shape
        rows = np.empty((m * k, self.item_bytes), dtype=np.uint8)
        values = {
            "features": np.ascontiguousarray(features, dtype="<f4").reshape(
                m * k, self.num_features
            ),
            "label": np.ascontiguousarray(labels, dtype="<f4").reshape(m * k, 1),
            "relevance": np.ascontiguousarray(relevance, dtype="<f4").reshape(m * k, 1),
        }
        offset = 0
        for kind, spec in self._segments:
            if kind == "const":
                width = len(spec)
                rows[:, offset : offset + width] = np.frombuffer(spec, dtype=np.uint8)
            else:
                width = spec
                rows[:, offset : offset + width] = values[kind].view(np.uint8)
            offset += width
        context = self._context(qid, context)
        flat = rows.tobytes()
        size = k * self.item_bytes
        return [flat[i * size : (i + 1) * size] + context for i in range(m)]

    @staticmethod
    def _context(qid: int, extra: bytes = b"") -> bytes:
        """The ``context`` field: an Example holding ``qid`` as int64, then ``extra`` entries."""
        qid_value = encode_varint(qid)
        entry = _feature_entry_header(QID, 3, len(qid_value)) + qid_value + extra
        example = field_header(1, len(entry)) + entry
        return field_header(2, len(example)) + example


def masked_crc(data: bytes) -> int:
    """TFRecord's masked CRC32C of ``data``."""
    crc = google_crc32c.value(data)
    return ((((crc >> 15) | (crc << 17)) & 0xFFFFFFFF) + 0xA282EAD8) & 0xFFFFFFFF


def _frame(record: bytes) -> tuple[bytes, bytes, bytes, bytes]:
    """TFRecord framing: length, masked CRC of the length, data, masked CRC of the data."""
    header = struct.pack("<Q", len(record))
    return (
        header,
        struct.pack("<I", masked_crc(header)),
        record,
        struct.pack("<I", masked_crc(record)),
    )


def frame_records(records: list[bytes]) -> bytes:
    """Records in TFRecord framing, ready to be appended to a TFRecord file."""
    return b"".join(part for record in records for part in _frame(record))


class TFRecordWriter:
    """Writes records in TFRecord framing, byte-identical to ``tf.io.TFRecordWriter``."""

    def __init__(self, path: str):
        self._file = open(path, "wb")

    def write(self, record: bytes) -> None:
        self._file.write(b"".join(_frame(record)))

    def write_many(self, records: list[bytes]) -> None:
        self._file.write(frame_records(records))

    def close(self) -> None:
        self._file.close()


def shard_names(split: str, num_shards: int) -> list[str]:
    """File names of a split's shards: ``train-00000-of-00004.tfrecord``."""
    return [f"{split}-{i:05d}-of-{num_shards:05d}.tfrecord" for i in range(num_shards)]


def shard_of(qid: int, num_shards: int) -> int:
    """The shard of every list of a query: a hash of the qid, so any process can decide it."""
    return zlib.crc32(struct.pack("<q", qid)) % num_shards


class PartWriter:
    """Writes one part of a split: per shard, a file of TFRecords in list order, to be
    appended to the split's shards in input order (``split_writer.SplitTarget``)."""

    def __init__(self, directory: str, split: str, part: str, num_shards: int):
        self._prefix = os.path.join(directory, f"{split}.{part}.")
        self.num_shards = num_shards
        self.counts = [0] * num_shards
        self._writers: dict[int, TFRecordWriter] = {}

    def write_list(self, qid: int, records: list[bytes]) -> None:
        if not records:
            return
        shard = shard_of(qid, self.num_shards)
        if shard not in self._writers:
            self._writers[shard] = TFRecordWriter(f"{self._prefix}{shard:05d}.part")
        self._writers[shard].write_many(records)
        self.counts[shard] += len(records)

    def close(self) -> list[int]:
        for writer in self._writers.values():
            writer.close()
        return self.counts
