"""The protobuf wire format of ``tf.train.Example`` and ELWC: encoded by hand, since every
item has the same layout, and decoded by protobuf classes built from the field numbers, so
converting and reading never load TensorFlow (https://protobuf.dev/programming-guides/encoding/)."""

from __future__ import annotations

import struct
from collections.abc import Sequence

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

LENGTH_DELIMITED = 2  # wire type of bytes, strings, sub-messages and packed lists


def encode_varint(value: int) -> bytes:
    """The varint bytes of ``value`` (negative: ten bytes, as int64)."""
    value &= (1 << 64) - 1
    out = bytearray()
    while value > 0x7F:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def field_header(number: int, length: int) -> bytes:
    """Tag and length of a length-delimited field."""
    return encode_varint(number << 3 | LENGTH_DELIMITED) + encode_varint(length)


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


def _elwc_class():
    """TF-Serving's ``ExampleListWithContext`` and TF's ``Example``, same field numbers."""
    field = descriptor_pb2.FieldDescriptorProto
    proto = descriptor_pb2.FileDescriptorProto(
        name="tfr_elwc.proto", package="tfr", syntax="proto3"
    )

    def add(name, *fields, into=proto.message_type):
        message = into.add(name=name)
        for number, (field_name, kind, label) in enumerate(fields, start=1):
            spec = message.field.add(name=field_name, number=number, label=label)
            if isinstance(kind, str):
                spec.type, spec.type_name = field.TYPE_MESSAGE, f".tfr.{kind}"
            else:
                spec.type = kind
        return message

    one, many = field.LABEL_OPTIONAL, field.LABEL_REPEATED
    add("BytesList", ("value", field.TYPE_BYTES, many))
    add("FloatList", ("value", field.TYPE_FLOAT, many))
    add("Int64List", ("value", field.TYPE_INT64, many))
    kinds = [(f"{k}_list", f"{k.title()}List", one) for k in ("bytes", "float", "int64")]
    feature = add("Feature", *kinds)
    feature.oneof_decl.add(name="kind")
    for spec in feature.field:
        spec.oneof_index = 0
    features = add("Features", ("feature", "Features.FeatureEntry", many))
    entry = add(
        "FeatureEntry",
        ("key", field.TYPE_STRING, one),
        ("value", "Feature", one),
        into=features.nested_type,
    )
    entry.options.map_entry = True
    add("Example", ("features", "Features", one))
    add("ExampleListWithContext", ("examples", "Example", many), ("context", "Example", one))
    pool = descriptor_pool.DescriptorPool()
    pool.Add(proto)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName("tfr.ExampleListWithContext"))


ExampleListWithContext = _elwc_class()
