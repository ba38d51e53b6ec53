"""The text ELWC layout: hand-encoded protos against protobuf, tf.io and TF-Ranking parsing."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from tfr_rankformer.text.word_tokens import tokenize
from tfrecords_tools.elwc_writer import TFRecordWriter
from tfrecords_tools.text.text_elwc import (
    TextList,
    TextSplitWriter,
    decode_text_list,
    encode_text_list,
    read_text_split,
)
from tfrecords_tools.tfrecord_reader import TFRecordFormatError

LIST = TextList(
    query_id="q7",
    query_tokens=("covid", "19", "vaccin\u00e9"),
    document_ids=("d1", "d2", "d3"),
    document_tokens=(("a", "covid", "b"), (), ("\u00e9t\u00e9", "19") * 40),
    relevance=(2, 0, 300),
)
# The same list as converted from a first stage's run: 0.1 is kept as float32.
SCORED = dataclasses.replace(LIST, first_stage_scores=(12.5, 0.1, -3.0))


def test_tokenizer_lower_cases_and_splits_on_non_alphanumerics():
    assert tokenize("COVID-19: what's new?") == ["covid", "19", "what", "s", "new"]
    assert tokenize("Caf\u00e9_au  lait\tNo.5") == ["caf\u00e9", "au", "lait", "no", "5"]
    assert tokenize(" -- ") == []


def test_round_trip():
    assert decode_text_list(encode_text_list(LIST)) == LIST


def test_bytes_parse_with_the_protobuf_classes():
    from tensorflow_serving.apis import input_pb2

    elwc = input_pb2.ExampleListWithContext.FromString(encode_text_list(LIST))
    context = elwc.context.features.feature
    assert [t.decode() for t in context["query_tokens"].bytes_list.value] == list(LIST.query_tokens)
    assert context["query_id"].bytes_list.value == [b"q7"]
    assert len(elwc.examples) == 3
    for example, tokens, label in zip(elwc.examples, LIST.document_tokens, LIST.relevance):
        feature = example.features.feature
        assert [t.decode() for t in feature["document_tokens"].bytes_list.value] == list(tokens)
        assert list(feature["relevance"].int64_list.value) == [label]
    # And the other way: protobuf's own serialisation decodes to the same list.
    assert decode_text_list(elwc.SerializeToString()) == LIST


def test_tf_ranking_parses_the_contract_features():
    import tensorflow as tf
    import tensorflow_ranking as tfr

    serialized = tf.constant([encode_text_list(LIST), encode_text_list(LIST)])
    features = tfr.data.parse_from_example_list(
        serialized,
        list_size=4,
        context_feature_spec={"query_tokens": tf.io.VarLenFeature(tf.string)},
        example_feature_spec={
            "document_tokens": tf.io.VarLenFeature(tf.string),
            "relevance": tf.io.FixedLenFeature([1], tf.int64, default_value=[-1]),
        },
    )
    query = tf.sparse.to_dense(features["query_tokens"], default_value=b"").numpy()
    assert [t.decode() for t in query[0]] == list(LIST.query_tokens)
    relevance = features["relevance"].numpy()
    assert relevance.shape == (2, 4, 1)
    assert relevance[0, :, 0].tolist() == [2, 0, 300, -1]  # padded to list_size with -1
    documents = tf.sparse.to_dense(features["document_tokens"], default_value=b"").numpy()
    assert documents.shape[:2] == (2, 4)
    assert [t.decode() for t in documents[0, 0] if t] == ["a", "covid", "b"]
    assert not any(documents[0, 1])  # the empty document stays empty


def test_split_writer_and_reader(tmp_path):
    writer = TextSplitWriter(str(tmp_path), "train", 2)
    lists = [TextList(f"q{i}", ("x",), (f"d{i}",), (("x", "y"),), (i % 3,)) for i in range(10)]
    for text_list in lists:
        writer.write(text_list)
    entry = writer.close()
    files = entry["files"]
    assert sorted(files) == ["train-00000-of-00002.tfrecord", "train-00001-of-00002.tfrecord"]
    assert sum(files.values()) == 10 and entry["num_items"] == entry["num_lists"] == 10
    # Lists by length: all ten of one document, four of them (i = 0, 3, 6, 9) with label 0.
    assert entry["list_length_histogram"] == {"1": 10}
    assert entry["empty_list_length_histogram"] == {"1": 4}
    read = sorted(read_text_split(str(tmp_path), "train"), key=lambda t: int(t.query_id[1:]))
    assert read == lists
    with pytest.raises(FileNotFoundError, match="no vali-"):
        list(read_text_split(str(tmp_path), "vali"))


def test_reader_names_file_and_record_of_a_bad_list(tmp_path):
    good = encode_text_list(LIST)
    no_label = encode_text_list(LIST).replace(b"relevance", b"relevanXe")
    path = str(tmp_path / "test-00000-of-00001.tfrecord")
    writer = TFRecordWriter(path)
    writer.write(good)
    writer.write(no_label)
    writer.close()
    expected = r"test-00000-of-00001.tfrecord: record 2: item 1: "
    with pytest.raises(TFRecordFormatError, match=expected):
        list(read_text_split(str(tmp_path), "test"))


def test_text_list_checks_its_lengths():
    with pytest.raises(ValueError, match="equally many"):
        TextList("q", (), ("d1", "d2"), (("a",),), (1, 0))


def test_first_stage_scores_round_trip_as_float32():
    assert SCORED.first_stage_scores == (12.5, float(np.float32(0.1)), -3.0)
    assert decode_text_list(encode_text_list(SCORED)) == SCORED
    assert b"first_stage_score" in encode_text_list(SCORED)
    # A list without scores is written as before: no such feature, read back as None.
    assert b"first_stage_score" not in encode_text_list(LIST)
    assert decode_text_list(encode_text_list(LIST)).first_stage_scores is None


def test_first_stage_scores_parse_with_the_protobuf_classes():
    from tensorflow_serving.apis import input_pb2

    elwc = input_pb2.ExampleListWithContext.FromString(encode_text_list(SCORED))
    values = [list(e.features.feature["first_stage_score"].float_list.value) for e in elwc.examples]
    assert values == [[12.5], [float(np.float32(0.1))], [-3.0]]
    assert decode_text_list(elwc.SerializeToString()) == SCORED


def test_first_stage_scores_are_checked():
    with pytest.raises(ValueError, match="3 document ids and 2 first-stage scores"):
        dataclasses.replace(LIST, first_stage_scores=(1.0, 2.0))
    with pytest.raises(ValueError, match="first-stage score 1e\\+40 is beyond float32's range"):
        dataclasses.replace(LIST, first_stage_scores=(1.0, 1e40, 0.0))
    with pytest.raises(ValueError, match="inf is not a finite number"):
        dataclasses.replace(LIST, first_stage_scores=(1.0, float("inf"), 0.0))
    # Every item holds the score, or none does.
    partial = encode_text_list(SCORED).replace(b"first_stage_score", b"first_stage_scorX", 1)
    with pytest.raises(ValueError, match="item 1: 'first_stage_score' must be one float"):
        decode_text_list(partial)
