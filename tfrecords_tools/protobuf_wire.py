"""The protobuf wire format, as far as the hand-written ELWC encoders and decoder need it.

Varints (unsigned, with negative int64 values as their 64-bit two's
complement), the header of a length-delimited field, and a walk over the
fields of a message. See https://protobuf.dev/programming-guides/encoding/.
"""

from __future__ import annotations

from collections.abc import Iterator

__all__ = [
    "LENGTH_DELIMITED",
    "WireFormatError",
    "decode_varint",
    "encode_varint",
    "field_header",
    "iter_fields",
]

LENGTH_DELIMITED = 2  # wire type of bytes, strings, sub-messages and packed lists

_UINT64_MASK = (1 << 64) - 1


class WireFormatError(ValueError):
    """Bytes that are not a well-formed protobuf message (truncated or unsupported)."""


def encode_varint(value: int) -> bytes:
    """The varint bytes of ``value``; negative values take ten bytes, as int64 does.

    >>> encode_varint(300).hex(), encode_varint(-1).hex()
    ('ac02', 'ffffffffffffffffff01')
    """
    value &= _UINT64_MASK
    out = bytearray()
    while value > 0x7F:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def decode_varint(data: bytes, pos: int) -> tuple[int, int]:
    """The unsigned varint starting at ``data[pos]`` and the position after it.

    >>> decode_varint(b"\\x00\\xac\\x02", 1)
    (300, 3)

    Raises:
      WireFormatError: ``data`` ends inside the varint.
    """
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
    """Tag and length of a length-delimited field whose ``length`` payload bytes follow.

    >>> field_header(1, 3).hex()
    '0a03'
    """
    return encode_varint(number << 3 | LENGTH_DELIMITED) + encode_varint(length)


def iter_fields(data: bytes) -> Iterator[tuple[int, int, object]]:
    """Yields a message's ``(field number, wire type, value)`` in order.

    The value is an int for varints (wire type 0), the payload bytes for
    length-delimited fields (2) and the raw 8 or 4 bytes for fixed-width ones
    (1, 5).

    >>> list(iter_fields(b"\\x08\\x96\\x01\\x12\\x02hi"))
    [(1, 0, 150), (2, 2, b'hi')]

    Raises:
      WireFormatError: truncated data or a group (wire types 3, 4).
    """
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
