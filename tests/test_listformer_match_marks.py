"""The Listformer's exact-match marks (``--match-marks``)."""

import numpy as np
import pytest
import tensorflow as tf

from tfr_rankformer.text.listformer import build_text_model
from tfr_rankformer.text.listformer_config import ListformerConfig
from tfr_rankformer.text.listformer_layers import ListformerEmbedding

VOCAB, WIDTH, POSITIONS = 30, 8, 16


def _embedding(seed=0):
    layer = ListformerEmbedding(VOCAB, WIDTH, POSITIONS, dropout=0.0, match_marks=True)
    query = np.array([[5, 7, 5, -1]], np.int32)  # token 5 twice: its first position marks
    documents = np.array([[[7, 1, 5, -1], [2, 3, 4, 6]]], np.int32)
    mask = np.array([[True, True]])
    layer(query, documents, mask)  # builds it
    rng = np.random.default_rng(seed)
    layer.marks.assign(rng.normal(size=(POSITIONS, WIDTH)).astype(np.float32))
    return layer, query, documents


def test_each_document_token_equal_to_a_query_token_gets_that_token_s_mark():
    layer, query, documents = _embedding()
    marks = layer._document_marks(tf.constant(query), tf.constant(documents)).numpy()
    m = layer.marks.numpy()
    np.testing.assert_allclose(marks[0, 0, 0], m[1])  # token 7 is query token 1
    np.testing.assert_allclose(marks[0, 0, 2], m[0])  # token 5: its first position, 0
    for n, t in [(0, 1), (0, 3), (1, 0), (1, 1), (1, 2), (1, 3)]:  # no match, or padding
        assert not marks[0, n, t].any()


def test_padding_never_matches_padding():
    layer, _, _ = _embedding()
    query = tf.constant([[4, -1]], tf.int32)
    documents = tf.constant([[[-1, -1, 4]]], tf.int32)
    marks = layer._document_marks(query, documents).numpy()
    assert not marks[0, 0, :2].any() and marks[0, 0, 2].any()


def _model(match_marks, seed=0):
    tf.keras.utils.set_random_seed(seed)
    config = ListformerConfig(
        width=WIDTH, num_heads=2, ff_dim=16, num_layers=1, dropout=0.0, attention_window=2,
        head_hidden=8, match_marks=match_marks, max_positions=POSITIONS,
    )  # fmt: skip
    return build_text_model("listformer", VOCAB, config, None)


def _lists():
    rng = np.random.default_rng(1)
    documents = rng.integers(0, VOCAB, [1, 3, 5]).astype(np.int32)
    query = documents[:, 0, :2].copy()  # the first document holds both query tokens
    return {"query_ids": query, "document_ids": documents, "mask": np.ones([1, 3], bool)}


def test_marks_start_at_zero_so_a_model_starts_as_it_would_without_them():
    marked, plain = _model(True), _model(False)
    marks = marked.get_layer("embedding").marks
    assert not marks.numpy().any()
    plain_weights = iter(plain.get_weights())
    for variable in marked.weights:  # every weight but the marks, in the same order
        if variable is not marks:
            variable.assign(next(plain_weights))
    inputs = _lists()
    np.testing.assert_allclose(marked(inputs)["scores"], plain(inputs)["scores"], atol=1e-6)


def test_trained_marks_move_the_scores_and_documents_stay_permutable():
    model, inputs = _model(True), _lists()
    before = model(inputs)["scores"].numpy()
    marks = model.get_layer("embedding").marks
    marks.assign(np.random.default_rng(2).normal(size=marks.shape).astype(np.float32))
    after = model(inputs)["scores"].numpy()
    assert not np.allclose(before, after)
    perm = [2, 0, 1]
    permuted = dict(inputs, document_ids=inputs["document_ids"][:, perm])
    np.testing.assert_allclose(model(permuted)["scores"][0], after[0, perm], atol=1e-5)


def _config(*argv):
    from pipelines import train_cli

    parser = train_cli.build_parser()
    return train_cli._configs(parser, parser.parse_args(list(argv)))


@pytest.mark.parametrize("flag, expected", [([], False), (["--match-marks"], True)])
def test_the_flag_reaches_the_listformer_s_config(flag, expected):
    config = _config("--model", "listformer", "--data", "d", "--model-dir", "m", *flag)
    assert config.architecture.resolved("listformer").match_marks is expected


def test_the_flag_is_refused_for_the_feature_vector_models(capsys):
    with pytest.raises(SystemExit):
        _config("--model", "rankformer", "--data", "d", "--model-dir", "m", "--match-marks")
    assert "--match-marks: for the listformer (text) only" in capsys.readouterr().err
