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
        widths = {FEATURES: num_features, LABEL: 1, RELEVANCE: 1}
        heads = [_feature_entry_header(key, 2, 4 * width) for key, width in widths.items()]
        features_len = sum(map(len, heads)) + 4 * (num_features + 2)
        example_len = len(field_header(1, features_len)) + features_len
        # Each item: ELWC.examples tag + length, Example.features tag + length, entries.
        heads[0] = field_header(1, example_len) + field_header(1, features_len) + heads[0]
        self._heads = [np.frombuffer(head, dtype=np.uint8) for head in heads]

    def encode(self, qid: int, features, labels, relevance, *, context: bytes = b"") -> bytes:
        """One list's ELWC from ``[n, d]`` features and ``[n]`` labels (as :meth:`encode_lists`)."""
        return self.encode_lists(
            qid, features[None], labels[None], relevance[None], context=context
        )[0]

    def encode_lists(
        self, qid: int, features, labels, relevance, *, context: bytes = b""
    ) -> list[bytes]:
        """``m`` lists of ``k`` items that share a qid (``[m, k, d]`` features, ``[m, k]``
        labels and relevance), serialised in one pass; ``context``: further ``Features``."""
        m, k = labels.shape
        columns = []
        for head, values in zip(self._heads, (features, labels, relevance)):
            width = values.shape[2] if values.ndim == 3 else 1  # explicit: k may be 0
            values = np.ascontiguousarray(values, dtype="<f4").reshape(m * k, width)
            columns += [np.broadcast_to(head, (m * k, len(head))), values.view(np.uint8)]
        flat = np.concatenate(columns, axis=1).tobytes()
        context = self._context(qid, context)
        size = len(flat) // m
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


def frame_records(records: list[bytes]) -> bytes:
    """Records in TFRecord framing: length, its masked CRC, data, its masked CRC."""
    parts = []
    for record in records:
        header = struct.pack("<Q", len(record))
        parts += [header, struct.pack("<I", masked_crc(header)), record]
        parts.append(struct.pack("<I", masked_crc(record)))
    return b"".join(parts)


class TFRecordWriter:
    """Writes records in TFRecord framing, byte-identical to ``tf.io.TFRecordWriter``."""

    def __init__(self, path: str):
        self._file = open(path, "wb")

    def write(self, record: bytes) -> None:
        self._file.write(frame_records([record]))

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
