"""Checking TFRecord shards before a command reads them: ``tf.data`` reports a bad record
only when it reaches it, without the file's name.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Iterator

from tfr_rankformer.inputs.manifest import Manifest

_HEADER = struct.Struct("<QI")
_FOOTER = struct.Struct("<I")
_MASK_DELTA = 0xA282EAD8


class RecordFileError(ValueError):
    """A TFRecord file that cannot be read; names the file and the record (from 1)."""

    def __init__(self, path: str, record: int | None, message: str):
        self.path, self.record, self.message = str(path), record, message
        where = f"{self.path}: record {record}" if record else self.path
        super().__init__(f"{where}: {message}")

    def __reduce__(self):
        return (type(self), (self.path, self.record, self.message))


def _masked_crc(data: bytes) -> int:
    import google_crc32c

    crc = google_crc32c.value(data)
    return ((((crc >> 15) | (crc << 17)) & 0xFFFFFFFF) + _MASK_DELTA) & 0xFFFFFFFF


def check_tfrecord_file(path: str, *, expected_records: int | None = None) -> int:
    """An uncompressed TFRecord file's record count after checking its framing, checksums and
    ``expected_records``, else a ``RecordFileError``."""
    if not os.path.isfile(path):
        raise FileNotFoundError(f"{path}: no such TFRecord file (listed by the manifest)")
    size = os.path.getsize(path)
    count, offset = 0, 0
    with open(path, "rb") as f:
        while offset < size:
            number = count + 1
            header = f.read(_HEADER.size)
            if len(header) < _HEADER.size:
                cut = f"the file ends inside a record header at byte {size} (cut short?)"
                raise RecordFileError(path, number, f"truncated TFRecord data: {cut}")
            length, length_crc = _HEADER.unpack(header)
            if _masked_crc(header[:8]) != length_crc:
                bad = f"bad length checksum at byte {offset}"
                raise RecordFileError(path, number, f"corrupt TFRecord data: {bad}")
            end = offset + _HEADER.size + length + _FOOTER.size
            if end > size:
                cut = f"the record needs bytes up to {end}, the file ends at {size} (cut short?)"
                raise RecordFileError(path, number, f"truncated TFRecord data: {cut}")
            data = f.read(length)
            (data_crc,) = _FOOTER.unpack(f.read(_FOOTER.size))
            if _masked_crc(data) != data_crc:
                bad = f"bad data checksum at byte {offset}"
                raise RecordFileError(path, number, f"corrupt TFRecord data: {bad}")
            count, offset = number, end
    if expected_records is not None and count != expected_records:
        raise RecordFileError(
            path,
            None,
            f"holds {count} record{'' if count == 1 else 's'}; its manifest lists "
            f"{expected_records}",
        )
    return count


def check_split_files(data_dir: str, manifest: Manifest, splits: list[str] | None = None) -> None:
    """Checks every shard of ``splits`` (default: all) against the manifest's record counts."""
    for split in splits or list(manifest.splits):
        if split not in manifest.splits:
            continue  # the reader names the missing split
        for name, count in (manifest.splits[split].files or {}).items():
            check_tfrecord_file(os.path.join(data_dir, name), expected_records=count)


def read_records(path: str) -> Iterator[tuple[int, bytes]]:
    """``(record number from 1, record)`` of a TFRecord file, or ``RecordFileError``."""
    import tensorflow as tf

    number = 0
    try:
        for record in tf.data.TFRecordDataset([path]):
            number += 1
            yield number, record.numpy()
    except tf.errors.DataLossError as e:
        raise RecordFileError(
            path, number + 1, f"corrupt or truncated TFRecord data ({e.message.strip()})"
        ) from None
