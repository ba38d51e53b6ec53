"""``tf.train.Example`` protos as bytes, encoded and decoded by hand.

An ``Example`` is ``features`` (1) -> ``Features.feature`` (1), a map whose
entries hold the key (1) and a ``Feature`` (2); a ``Feature`` is one of
``bytes_list`` (1), ``float_list`` (2, little-endian float32) or ``int64_list``
(3), each holding its repeated ``value`` (1). The text ELWC
(``text/text_elwc.py``) is written and read with these, so converting and
reading import no TensorFlow; its tests check the bytes against the protobuf
classes both ways.

>>> decode_example(encode_example({"x": int64_feature([3]), "s": float_feature([0.5])}))
{'x': ('int64', [3]), 's': ('float', [0.5])}
"""

from __future__ import annotations

import struct
from collections.abc import Sequence

from tfrecords_tools.protobuf_wire import (
    WireFormatError,
    decode_varint,
    encode_varint,
    field_header,
    iter_fields,
)

__all__ = [
    "length_delimited",
    "bytes_feature",
    "int64_feature",
    "float_feature",
    "encode_example",
    "decode_feature",
    "decode_example",
]


# === Encoding ===


def length_delimited(number: int, payload: bytes) -> bytes:
    """A length-delimited field (wire type 2)."""
    return field_header(number, len(payload)) + payload


def bytes_feature(values: Sequence[bytes]) -> bytes:
    # Feature.bytes_list (1) -> BytesList.value (1), repeated.
    return length_delimited(1, b"".join(length_delimited(1, v) for v in values))


def int64_feature(values: Sequence[int]) -> bytes:
    # Feature.int64_list (3) -> Int64List.value (1), packed.
    return length_delimited(3, length_delimited(1, b"".join(encode_varint(v) for v in values)))


def float_feature(values: Sequence[float]) -> bytes:
    """A ``float_list`` ``Feature`` (packed float32; a value beyond float32's range is an
    ``OverflowError``)."""
    # Feature.float_list (2) -> FloatList.value (1), packed.
    return length_delimited(2, length_delimited(1, struct.pack(f"<{len(values)}f", *values)))


def encode_example(features: dict) -> bytes:
    """``{name: encoded Feature}`` -> an ``Example``'s bytes."""
    # Example.features (1) -> Features.feature (1): map entries key (1), value (2).
    entries = b"".join(
        length_delimited(1, length_delimited(1, key.encode("utf-8")) + length_delimited(2, value))
        for key, value in features.items()
    )
    return length_delimited(1, entries)


# === Decoding ===


def _int64_values(data: bytes) -> list[int]:
    """The values of an ``Int64List``, packed or not."""
    values = []
    for n, w, v in iter_fields(data):
        if n == 1 and w == 2:  # packed
            pos = 0
            while pos < len(v):
                item, pos = decode_varint(v, pos)
                values.append(item - (1 << 64) if item >> 63 else item)
        elif n == 1 and w == 0:
            values.append(v - (1 << 64) if v >> 63 else v)
    return values


def _float_values(data: bytes) -> list[float]:
    """The values of a ``FloatList``, packed (wire type 2) or not (wire type 5)."""
    values = []
    for n, w, v in iter_fields(data):
        if n != 1 or w not in (2, 5):
            continue
        if len(v) % 4 or (w == 5 and len(v) != 4):
            raise WireFormatError(f"a float list of {len(v)} bytes")
        values.extend(struct.unpack(f"<{len(v) // 4}f", v))
    return values


def decode_feature(data: bytes) -> tuple[str, list]:
    """A ``Feature`` as ``(kind, values)``; kind is ``bytes``, ``float``, ``int64`` or
    ``empty`` (no list set)."""
    for number, wire, value in iter_fields(data):
        if number == 1 and wire == 2:
            return "bytes", [v for n, w, v in iter_fields(value) if n == 1 and w == 2]
        if number == 3 and wire == 2:
            return "int64", _int64_values(value)
        if number == 2 and wire == 2:
            return "float", _float_values(value)
    return "empty", []


def decode_example(data: bytes) -> dict:
    """An ``Example``'s bytes -> ``{name: (kind, values)}`` (see :func:`decode_feature`).

    Raises:
      WireFormatError: malformed bytes.
      UnicodeDecodeError: a feature name that is not UTF-8.
    """
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
            features[key] = decode_feature(feature)
    return features
