"""The client tokenizer's REST and gRPC bodies carry ``first_stage_scores`` exactly when
the token-id export takes them, as its ``tokenizer.json`` records."""

from __future__ import annotations

import json

import numpy as np
import pytest
import tensorflow as tf

from tfr_rankformer import ClientTokenizer
from tfr_rankformer.serving.client_tokenizer import tokenizer_settings

VOCABULARY = ["[PAD]", "[UNK]", "a", "##b"]
QUERIES, DOCUMENTS, SCORES = ["a", "ab"], [["ab"], ["a", "ab", "b"]], [[2.5], [1.0, 0.5, -3.0]]


def _client(first_stage) -> ClientTokenizer:
    return ClientTokenizer(
        VOCABULARY, max_query_tokens=2, max_document_tokens=3, first_stage=first_stage
    )


def test_rest_and_grpc_bodies_carry_the_scores_padded_with_zero():
    client = _client(True)
    body = client.rest_request(QUERIES, DOCUMENTS, SCORES)
    assert body["inputs"]["first_stage_scores"] == [[2.5, 0.0, 0.0], [1.0, 0.5, -3.0]]
    assert body["inputs"]["document_mask"] == [[True, False, False], [True, True, True]]
    request = client.grpc_request(QUERIES, DOCUMENTS, SCORES, model_name="rerank")
    assert request.model_spec.name == "rerank" and not request.model_spec.HasField("version")
    arrays = {name: tf.make_ndarray(proto) for name, proto in request.inputs.items()}
    assert arrays["first_stage_scores"].dtype == np.float32
    np.testing.assert_array_equal(arrays["first_stage_scores"], [[2.5, 0, 0], [1, 0.5, -3]])
    assert arrays["document_ids"].dtype == np.int32 and arrays["document_ids"].shape == (2, 3, 2)
    assert json.loads(json.dumps(body)) == body  # plain JSON


def test_a_request_without_the_input_the_export_needs_is_refused_naming_it():
    with pytest.raises(ValueError, match="the export needs the input first_stage_scores"):
        _client(True).rest_request(QUERIES, DOCUMENTS)
    with pytest.raises(ValueError, match="does not take the input first_stage_scores"):
        _client(False).grpc_request(QUERIES, DOCUMENTS, SCORES, model_name="m")
    with pytest.raises(ValueError, match="one score per document"):
        _client(True).encode(QUERIES, DOCUMENTS, [[1.0], [1.0]])
    # An export older than the setting: not known, so either is sent.
    assert "first_stage_scores" not in _client(None).encode(QUERIES, DOCUMENTS)


def test_the_export_files_record_whether_it_takes_the_scores(tmp_path):
    (tmp_path / "vocab.txt").write_text("\n".join(VOCABULARY) + "\n")
    for first_stage in (True, False):
        settings = tokenizer_settings(_client(None), first_stage=first_stage)
        (tmp_path / "tokenizer.json").write_text(json.dumps(settings))
        client = ClientTokenizer.from_files(tmp_path / "vocab.txt", tmp_path / "tokenizer.json")
        assert client.first_stage is first_stage
