"""The protobuf wire helpers against the protobuf library's own encoding."""

from __future__ import annotations

import pytest
from google.protobuf import wrappers_pb2

from tfrecords_tools.protobuf_wire import (
    WireFormatError,
    decode_varint,
    encode_varint,
    field_header,
    iter_fields,
)

VALUES = [0, 1, 127, 128, 300, 16_383, 16_384, 2**31, 2**32 + 5, 2**63 - 1, 2**64 - 1]


@pytest.mark.parametrize("value", VALUES)
def test_varints_round_trip_from_any_position(value):
    data = b"\x05" + encode_varint(value) + b"\x07"
    assert decode_varint(data, 1) == (value, len(data) - 1)


@pytest.mark.parametrize("value", [v for v in VALUES if v])
def test_varints_match_protobuf(value):
    # Field 1 of UInt64Value is a varint: tag byte 0x08, then the value.
    expected = wrappers_pb2.UInt64Value(value=value).SerializeToString()
    assert b"\x08" + encode_varint(value) == expected


@pytest.mark.parametrize("value", [-1, -2, -(2**63)])
def test_negative_values_are_their_twos_complement(value):
    expected = wrappers_pb2.Int64Value(value=value).SerializeToString()
    encoded = encode_varint(value)
    assert len(encoded) == 10
    assert b"\x08" + encoded == expected
    assert decode_varint(encoded, 0) == (value + 2**64, 10)


@pytest.mark.parametrize("data", [b"", b"\x80", b"\xff\xff"])
def test_a_truncated_varint_is_an_error(data):
    with pytest.raises(WireFormatError, match="truncated varint"):
        decode_varint(data, 0)


def test_length_delimited_fields_match_protobuf_and_walk_back():
    payload = b"x" * 200  # a length of two varint bytes
    message = wrappers_pb2.BytesValue(value=payload).SerializeToString()
    assert field_header(1, len(payload)) + payload == message
    assert list(iter_fields(message + b"\x10\x96\x01")) == [(1, 2, payload), (2, 0, 150)]


def test_a_field_longer_than_the_data_is_an_error():
    with pytest.raises(WireFormatError, match="truncated field"):
        list(iter_fields(field_header(1, 5) + b"abc"))
