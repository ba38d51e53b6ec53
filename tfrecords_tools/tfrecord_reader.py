"""Reading TFRecord files (plain or GZIP) without TensorFlow, checking every record's CRCs."""

from __future__ import annotations

import gzip
import struct
import zlib
from collections.abc import Iterator

from tfrecords_tools.compressed_files import HashingReader, is_gzip
from tfrecords_tools.elwc_writer import masked_crc


class TFRecordFormatError(ValueError):
    """A TFRecord file whose framing is broken; names the file and the record."""

    def __init__(self, path: str, record: int, message: str):
        self.path, self.record, self.message = str(path), record, message
        super().__init__(f"{self.path}: record {record}: {message}")

    def __reduce__(self):
        return (type(self), (self.path, self.record, self.message))


class TFRecordFile:
    """One TFRecord file read once; afterwards ``sha256`` and ``size_bytes`` describe it."""

    def __init__(self, path: str):
        self.path = str(path)
        self.sha256: str | None = None
        self.size_bytes: int | None = None
        self.num_records = 0

    def records(self) -> Iterator[tuple[int, bytes]]:
        """Yields ``(record number, data)``, numbered from 1."""
        compressed = is_gzip(self.path)
        raw = HashingReader(open(self.path, "rb"))
        stream = gzip.GzipFile(fileobj=raw) if compressed else raw
        number = 0
        try:
            while True:
                number += 1
                data = self._read_record(stream, number)
                if data is None:
                    break
                yield number, data
        finally:
            stream.close()
            raw.close()
        self.num_records = number - 1
        self.sha256 = raw.sha256.hexdigest()
        self.size_bytes = raw.bytes_read

    def _read_record(self, stream, number: int) -> bytes | None:
        try:
            header = stream.read(12)
            if not header:
                return None
            if len(header) < 12:
                raise TFRecordFormatError(self.path, number, "truncated record header")
            (length,) = struct.unpack("<Q", header[:8])
            if struct.unpack("<I", header[8:])[0] != masked_crc(header[:8]):
                raise TFRecordFormatError(
                    self.path, number, "corrupt record header (length checksum mismatch)"
                )
            data = stream.read(length)
            footer = stream.read(4)
        except (EOFError, gzip.BadGzipFile, zlib.error) as e:
            raise TFRecordFormatError(self.path, number, f"corrupt gzip data ({e})") from None
        if len(data) < length or len(footer) < 4:
            raise TFRecordFormatError(self.path, number, "truncated record")
        if struct.unpack("<I", footer)[0] != masked_crc(data):
            raise TFRecordFormatError(self.path, number, "corrupt record (data checksum mismatch)")
        return data
