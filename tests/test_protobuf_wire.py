"""The protobuf wire helpers and the ELWC class against the protobuf library and TF-Serving."""

from __future__ import annotations

import pytest
from google.protobuf import wrappers_pb2
from tensorflow_serving.apis import input_pb2

from tfrecords_tools.protobuf_wire import ExampleListWithContext, encode_varint, field_header

VALUES = [1, 127, 128, 300, 16_383, 16_384, 2**31, 2**32 + 5, 2**63 - 1, 2**64 - 1]


@pytest.mark.parametrize("value", VALUES)
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


def test_length_delimited_fields_match_protobuf():
    payload = b"x" * 200  # a length of two varint bytes
    message = wrappers_pb2.BytesValue(value=payload).SerializeToString()
    assert field_header(1, len(payload)) + payload == message


def test_the_elwc_class_reads_and_writes_what_tf_serving_does():
    elwc = input_pb2.ExampleListWithContext()
    item = elwc.examples.add().features.feature
    item["tokens"].bytes_list.value.extend([b"a", b"\xc3\xa9"])
    item["score"].float_list.value.append(0.5)
    item["label"].int64_list.value.extend([3, -4])
    elwc.context.features.feature["qid"].int64_list.value.append(7)
    data = elwc.SerializeToString(deterministic=True)
    ours = ExampleListWithContext.FromString(data)
    assert list(ours.examples[0].features.feature["label"].int64_list.value) == [3, -4]
    assert ours.examples[0].features.feature["score"].WhichOneof("kind") == "float_list"
    assert ours.SerializeToString(deterministic=True) == data
