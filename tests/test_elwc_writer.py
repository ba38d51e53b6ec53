"""ELWC encoding and TFRecord framing, checked against the protobuf classes and TF."""

from __future__ import annotations

import os

import numpy as np
import tensorflow as tf
from google.protobuf import text_format
from tensorflow_serving.apis import input_pb2

from tfrecords_tools.elwc_writer import ElwcEncoder, PartWriter, TFRecordWriter, shard_of
from tfrecords_tools.split_writer import SplitTarget

EXPECTED = """
examples {
  features {
    feature { key: "features" value { float_list { value: [0.5, -1.25, 3.0] } } }
    feature { key: "label" value { float_list { value: 2.0 } } }
    feature { key: "relevance" value { float_list { value: 4.0 } } }
  }
}
examples {
  features {
    feature { key: "features" value { float_list { value: [0.0, 7.0, 1e-05] } } }
    feature { key: "label" value { float_list { value: 0.0 } } }
    feature { key: "relevance" value { float_list { value: 1.0 } } }
  }
}
context {
  features { feature { key: "qid" value { int64_list { value: 12345678901 } } } }
}
"""


def _list():
    features = np.array([[0.5, -1.25, 3.0], [0.0, 7.0, 1e-05]], dtype=np.float32)
    return features, np.array([2, 0]), np.array([4, 1])


def test_encoding_matches_the_proto_golden():
    features, labels, relevance = _list()
    encoded = ElwcEncoder(3).encode(12345678901, features, labels, relevance)
    expected = text_format.Parse(EXPECTED, input_pb2.ExampleListWithContext())
    parsed = input_pb2.ExampleListWithContext.FromString(encoded)
    assert parsed == expected


def test_negative_qid_round_trips():
    features, labels, relevance = _list()
    parsed = input_pb2.ExampleListWithContext.FromString(
        ElwcEncoder(3).encode(-7, features, labels, relevance)
    )
    assert parsed.context.features.feature["qid"].int64_list.value == [-7]


def test_encode_lists_equals_one_list_at_a_time():
    rng = np.random.default_rng(0)
    features = rng.normal(size=(4, 5, 3)).astype(np.float32)
    labels = rng.integers(0, 3, size=(4, 5))
    relevance = rng.integers(0, 5, size=(4, 5))
    encoder = ElwcEncoder(3)
    together = encoder.encode_lists(9, features, labels, relevance)
    apart = [encoder.encode(9, f, y, r) for f, y, r in zip(features, labels, relevance)]
    assert together == apart


def test_tfr_data_parses_the_records():
    import tensorflow_ranking as tfr

    from tfr_rankformer.core.elwc_schema import context_feature_spec, example_feature_spec

    features, labels, relevance = _list()
    encoded = ElwcEncoder(3).encode(3, features, labels, relevance)
    parsed = tfr.data.parse_from_example_list(
        [encoded],
        list_size=4,
        context_feature_spec=context_feature_spec(),
        example_feature_spec=example_feature_spec(3),
    )
    np.testing.assert_allclose(parsed["features"][0, :2].numpy(), features)
    # Padding items carry TF-Ranking's negative label.
    assert parsed["label"][0, :, 0].numpy().tolist() == [2.0, 0.0, -1.0, -1.0]
    assert parsed["relevance"][0, :2, 0].numpy().tolist() == [4.0, 1.0]
    assert parsed["qid"].numpy().ravel().tolist() == [3]


def test_tfrecord_framing_is_byte_identical_to_tensorflow(tmp_path):
    records = [b"", b"x", os.urandom(1000), bytes(range(256)) * 300]
    ours, theirs = tmp_path / "ours.tfrecord", tmp_path / "theirs.tfrecord"
    writer = TFRecordWriter(str(ours))
    writer.write(records[0])
    writer.write_many(records[1:])
    writer.close()
    with tf.io.TFRecordWriter(str(theirs)) as reference:
        for record in records:
            reference.write(record)
    assert ours.read_bytes() == theirs.read_bytes()
    read_back = [r.numpy() for r in tf.data.TFRecordDataset(str(ours))]
    assert read_back == records


def test_parts_are_appended_per_shard_in_the_order_given(tmp_path):
    parts, out = tmp_path / "parts", tmp_path / "out"
    parts.mkdir()
    out.mkdir()
    qids = list(range(40))
    # Written out of order on purpose: the shards follow the order of append().
    for name, chunk in (("000001.1", qids[20:]), ("000000.1", qids[:20])):
        part = PartWriter(str(parts), "train", name, 3)
        for qid in chunk:
            part.write_list(qid, [str(qid).encode()])
        part.close()
    shards = SplitTarget(str(parts), str(out), "train", 3)
    shards.append("000000.1", "000001.1", "000002.1")  # the last part wrote nothing
    names = shards.close()
    assert names == [f"train-0000{i}-of-00003.tfrecord" for i in range(3)]
    assert os.listdir(parts) == []
    for shard, name in enumerate(names):
        got = [int(r.numpy()) for r in tf.data.TFRecordDataset(str(out / name))]
        assert got == [q for q in qids if shard_of(q, 3) == shard]
    assert {shard_of(q, 3) for q in qids} == {0, 1, 2}
