"""ELWC without TensorFlow: varints and field headers for the hand-made encoder of feature
lists (every item has the same layout), and a protobuf class built from the field numbers
for the rest (https://protobuf.dev/programming-guides/encoding/)."""

from __future__ import annotations

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
