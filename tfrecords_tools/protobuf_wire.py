"""The protobuf wire format and ``tf.train.Example``, by hand, so converting and reading
never load TensorFlow (https://protobuf.dev/programming-guides/encoding/)."""

from __future__ import annotations

import struct
from collections.abc import Iterator, Sequence

LENGTH_DELIMITED = 2  # wire type of bytes, strings, sub-messages and packed lists


class WireFormatError(ValueError):
    """Bytes that are not a well-formed protobuf message (truncated or unsupported)."""


def encode_varint(value: int) -> bytes:
    """The varint bytes of ``value`` (negative: ten bytes, as int64)."""
    value &= (1 << 64) - 1
    out = bytearray()
    while value > 0x7F:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def decode_varint(data: bytes, pos: int) -> tuple[int, int]:
    """The varint at ``data[pos]`` and the position after it."""
    value = shift = 0
    while True:
        if pos >= len(data):
            raise WireFormatError("truncated varint")
        byte = data[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, pos
        shift += 7


def field_header(number: int, length: int) -> bytes:
    """Tag and length of a length-delimited field."""
    return encode_varint(number << 3 | LENGTH_DELIMITED) + encode_varint(length)


def iter_fields(data: bytes) -> Iterator[tuple[int, int, object]]:
    """Yields a message's ``(field number, wire type, value)``."""
    pos = 0
    while pos < len(data):
        key, pos = decode_varint(data, pos)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, pos = decode_varint(data, pos)
        elif wire == LENGTH_DELIMITED:
            length, pos = decode_varint(data, pos)
            if pos + length > len(data):
                raise WireFormatError("truncated field")
            value, pos = data[pos : pos + length], pos + length
        elif wire in (1, 5):
            width = 8 if wire == 1 else 4
            value, pos = data[pos : pos + width], pos + width
        else:
            raise WireFormatError(f"unsupported wire type {wire}")
        yield number, wire, value


# === tf.train.Example ===
# Example.features (1) -> Features.feature (1), map entries of key (1) and Feature (2);
# a Feature is bytes_list (1), float_list (2) or int64_list (3), each holding value (1).


def length_delimited(number: int, payload: bytes) -> bytes:
    return field_header(number, len(payload)) + payload


def bytes_feature(values: Sequence[bytes]) -> bytes:
    return length_delimited(1, b"".join(length_delimited(1, v) for v in values))


def int64_feature(values: Sequence[int]) -> bytes:
    return length_delimited(3, length_delimited(1, b"".join(encode_varint(v) for v in values)))


def float_feature(values: Sequence[float]) -> bytes:
    """Packed little-endian float32 (a value beyond float32's range is an ``OverflowError``)."""
    return length_delimited(2, length_delimited(1, struct.pack(f"<{len(values)}f", *values)))


def encode_example(features: dict) -> bytes:
    """``{name: encoded Feature}`` -> an ``Example``'s bytes."""
    entries = b"".join(
        length_delimited(1, length_delimited(1, key.encode("utf-8")) + length_delimited(2, value))
        for key, value in features.items()
    )
    return length_delimited(1, entries)


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
    """A ``Feature`` as ``(kind, values)``: ``bytes``, ``float``, ``int64`` or ``empty``."""
    for number, wire, value in iter_fields(data):
        if number == 1 and wire == 2:
            return "bytes", [v for n, w, v in iter_fields(value) if n == 1 and w == 2]
        if number == 3 and wire == 2:
            return "int64", _int64_values(value)
        if number == 2 and wire == 2:
            return "float", _float_values(value)
    return "empty", []


def decode_example(data: bytes) -> dict:
    """An ``Example``'s bytes -> ``{name: (kind, values)}`` (see :func:`decode_feature`)."""
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
