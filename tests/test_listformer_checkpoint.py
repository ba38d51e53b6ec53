"""A pretrained start for the Listformer: a BERT checkpoint's weights loaded exactly.

The checkpoint is a tiny random BERT written by the test (``bert_checkpoints``);
a NumPy BERT forward pass is the reference.
"""

import json

import numpy as np
import pytest
import tensorflow as tf

from tests.bert_checkpoints import (
    EPS,
    HEADS,
    LAYERS,
    POSITIONS,
    UNCASED,
    drop_weight,
    reference_bert,
    write_checkpoint,
)
from tfr_rankformer.ranking.losses import get_score_loss
from tfr_rankformer.text.bert_checkpoint import read_bert_checkpoint
from tfr_rankformer.text.global_local_attention import blocked_attention, dense_attention
from tfr_rankformer.text.listformer import DOCUMENT_IDS, QUERY_IDS, build_text_model
from tfr_rankformer.text.listformer_checkpoint import (
    listformer_from_checkpoint,
    load_checkpoint_weights,
    pretrained_settings,
)
from tfr_rankformer.text.listformer_config import ListformerConfig, ListformerForm
from tfr_rankformer.text.text_tokenizer import TextTokenizer

# === The load is exact ===


def _listformer_inputs(queries, documents):
    """One document per list: ``query_ids [B, Q]``, ``document_ids [B, 1, T]``, -1 padded."""
    q_len, t_len = max(map(len, queries)), max(map(len, documents))
    query_ids = np.full([len(queries), q_len], -1, np.int32)
    document_ids = np.full([len(queries), 1, t_len], -1, np.int32)
    for b, (query, document) in enumerate(zip(queries, documents)):
        query_ids[b, : len(query)] = query
        document_ids[b, 0, : len(document)] = document
    return {
        QUERY_IDS: query_ids,
        DOCUMENT_IDS: document_ids,
        "mask": np.ones([len(queries), 1], bool),
    }


@pytest.mark.parametrize(
    "prefix, own_bias, attention",
    [("", 0.0, "blocked"), ("bert.", 2.0, "blocked"), ("", 2.0, "dense_masked")],
)
def test_the_encoder_computes_the_checkpoints_bert(tmp_path, prefix, own_bias, attention):
    weights = write_checkpoint(tmp_path / "bert", prefix=prefix)
    pretrained = listformer_from_checkpoint(
        str(tmp_path / "bert"),
        ListformerConfig(attention=attention),
        None,
        max_query_tokens=8,
        max_document_tokens=16,
    )
    model = pretrained.model
    for i in range(LAYERS):
        layer = model.get_layer(f"encoder_{i}")
        layer.own_bias.assign(np.full([HEADS], own_bias, np.float32))
    encoder = tf.keras.Model(model.inputs, model.get_layer(f"encoder_{LAYERS - 1}").output)
    rng = np.random.default_rng(1)
    vocab = len(UNCASED)
    queries = [rng.integers(5, vocab, 5), rng.integers(5, vocab, 3)]  # the second padded
    documents = [rng.integers(5, vocab, 7), rng.integers(5, vocab, 12)]
    inputs = _listformer_inputs(queries, documents)
    hidden = encoder(inputs, training=False).numpy()  # [B, G, D]: the last layer's globals
    q_len = inputs[QUERY_IDS].shape[1]
    cls_id, sep_id = UNCASED.index("[CLS]"), UNCASED.index("[SEP]")
    for b, (query, document) in enumerate(zip(queries, documents)):
        q, t = len(query), len(document)
        # BERT reads [CLS] q [SEP] d with the Listformer's positions and segments.
        ids = np.concatenate([[cls_id], query, [sep_id], document])
        positions = np.concatenate([np.arange(q + 1), [t], np.arange(t)])
        types = np.concatenate([np.zeros(q + 1, int), np.ones(t + 1, int)])
        bias = np.zeros([len(ids), len(ids)])
        bias[q + 1, q + 2 :] = own_bias  # [SEP] on its own document's tokens
        want = reference_bert(weights, ids, positions, types, bias)
        # [CLS], the query and the [SEP]: the rows the last layer computes.
        rows = [*range(q + 1), 1 + q_len]
        np.testing.assert_allclose(hidden[b, rows], want[: q + 2], atol=1e-4, rtol=0)


def test_the_checkpoint_sets_sizes_form_and_starting_weights(tmp_path):
    weights = write_checkpoint(tmp_path / "bert")
    pretrained = listformer_from_checkpoint(
        str(tmp_path / "bert"),
        ListformerConfig(width=128, num_layers=3, dropout=0.05),
        2,
        max_query_tokens=8,
        max_document_tokens=16,
    )
    config = pretrained.config
    assert (config.width, config.num_layers, config.num_heads, config.ff_dim) == (32, 2, 4, 64)
    assert config.max_positions == POSITIONS and config.dropout == 0.05
    assert pretrained.form == ListformerForm.bert(layer_norm_epsilon=EPS)
    assert pretrained.vocab_size == len(UNCASED) and pretrained.tokenizer.lower_case
    model = pretrained.model
    assert "final_norm" not in [layer.name for layer in model.layers]
    embedding = model.get_layer("embedding")
    words = weights["embeddings.word_embeddings.weight"]
    np.testing.assert_array_equal(embedding.special.numpy()[1], words[UNCASED.index("[SEP]")])
    np.testing.assert_array_equal(
        embedding.segments.numpy(), weights["embeddings.token_type_embeddings.weight"]
    )
    layer = model.get_layer("encoder_1")
    np.testing.assert_array_equal(layer.qkv_global.kernel.numpy(), layer.qkv.kernel.numpy())
    np.testing.assert_array_equal(
        layer.ff_out.kernel.numpy(), weights["encoder.layer.1.output.dense.weight"].T
    )
    assert np.allclose(layer.own_bias.numpy(), 2.0)  # the project's own-document bias


def test_a_run_rebuilds_the_model_and_tokenizer_from_the_recorded_settings(tmp_path):
    write_checkpoint(tmp_path / "bert")
    pretrained = listformer_from_checkpoint(
        str(tmp_path / "bert"), ListformerConfig(), None, max_query_tokens=8, max_document_tokens=16
    )
    recorded = pretrained_settings(pretrained.form, pretrained.vocab_size, pretrained.tokenizer)
    settings = json.loads(json.dumps(recorded))
    pretrained.model.save_weights(str(tmp_path / "weights" / "best"))
    model = build_text_model(
        "listformer",
        settings["vocab_size"],
        pretrained.config,
        None,
        form=ListformerForm(**settings["form"]),
    )
    model.load_weights(str(tmp_path / "weights" / "best")).assert_existing_objects_matched()
    tokenizer = TextTokenizer(
        pretrained.vocabulary,
        max_query_tokens=8,
        max_document_tokens=16,
        lower_case=settings["lower_case"],
        basic_tokenization=settings["basic_tokenization"],
    )
    query = tf.constant(["What is the quick fox?", "hello"])
    documents = tf.constant([["the lazy dog", "a fox jumps", "Café!"], ["world", "", ""]])
    encoded = tokenizer.encode(query, documents)
    inputs = {
        QUERY_IDS: encoded["query_ids"],
        DOCUMENT_IDS: encoded["document_ids"],
        "mask": tf.not_equal(documents, ""),
    }
    before = pretrained.model(inputs, training=False)["scores"].numpy()
    np.testing.assert_allclose(model(inputs, training=False)["scores"].numpy(), before, atol=1e-6)
    # Permuting the documents permutes their scores in the checkpoint's form too.
    order = [2, 0, 1]
    permuted = dict(inputs, **{DOCUMENT_IDS: tf.gather(inputs[DOCUMENT_IDS], order, axis=1)})
    permuted["mask"] = tf.gather(inputs["mask"], order, axis=1)
    after = model(permuted, training=False)["scores"].numpy()
    np.testing.assert_allclose(after[0], before[0, order], atol=1e-5)


def test_a_few_training_steps_lower_a_finite_loss(tmp_path):
    write_checkpoint(tmp_path / "bert")
    pretrained = listformer_from_checkpoint(
        str(tmp_path / "bert"), ListformerConfig(), None, max_query_tokens=8, max_document_tokens=16
    )
    loss = get_score_loss("softmax")
    pretrained.model.compile(
        optimizer=tf.keras.optimizers.Adam(1e-3), loss={"scores": loss.build(2)}
    )
    encoded = pretrained.tokenizer.encode(
        tf.constant(["quick fox", "lazy dog"]),
        tf.constant([["the quick fox", "a dog", "world"], ["lazy dog", "the fox", "hello"]]),
    )
    inputs = {
        QUERY_IDS: encoded["query_ids"],
        DOCUMENT_IDS: encoded["document_ids"],
        "mask": tf.ones([2, 3], tf.bool),
    }
    labels = {"scores": tf.constant([[2.0, 0.0, 0.0], [2.0, 1.0, 0.0]])}
    # The loss with dropout off, before and after: the training losses carry
    # dropout's noise, which hangs on the random state earlier tests left.
    tf.keras.utils.set_random_seed(0)
    before = float(pretrained.model.test_on_batch(inputs, labels))
    losses = [float(pretrained.model.train_on_batch(inputs, labels)) for _ in range(5)]
    after = float(pretrained.model.test_on_batch(inputs, labels))
    assert np.all(np.isfinite(losses)) and after < before


# === Global-local attention with the global tokens' own projections ===


def test_global_projections_blocked_equals_dense_and_keeps_local_rows():
    rng = np.random.default_rng(0)
    b, h, q, n, t, dh = 2, 2, 3, 3, 4, 3
    g = 1 + q + n

    def qkv(*shape):
        return tuple(tf.constant(rng.normal(size=shape), tf.float32) for _ in range(3))

    globals_qkv, locals_qkv = qkv(b, h, g, dh), qkv(b, h, n, t, dh)
    global_rows = (qkv(b, h, g, dh), qkv(b, h, n, t, dh))
    global_valid = tf.constant(np.ones([b, g], bool))
    local_valid = tf.constant(rng.random([b, n, t]) < 0.8)
    args = (globals_qkv, locals_qkv, global_valid, local_valid)
    own = tf.constant([1.0, -0.5])
    blocked = blocked_attention(*args, window=1, own_bias=own, global_rows=global_rows)
    dense = dense_attention(*args, window=1, own_bias=own, global_rows=global_rows)
    rows = np.broadcast_to(local_valid.numpy()[:, None, :, :, None], blocked[1].shape)
    np.testing.assert_allclose(blocked[0], dense[0], atol=1e-5)
    np.testing.assert_allclose(
        np.where(rows, blocked[1], 0), np.where(rows, dense[1], 0), atol=1e-5
    )
    shared = blocked_attention(*args, window=1, own_bias=own)
    # Local queries keep the local projections; the global ones read the global projections.
    np.testing.assert_allclose(blocked[1], shared[1], atol=1e-6)
    assert not np.allclose(blocked[0], shared[0])
    same = blocked_attention(*args, window=1, own_bias=own, global_rows=(globals_qkv, locals_qkv))
    np.testing.assert_allclose(same[0], shared[0], atol=1e-6)


def test_checkpoint_without_token_types_and_a_model_of_other_sizes(tmp_path):
    directory = str(tmp_path / "bert")
    write_checkpoint(directory, config={"type_vocab_size": None})
    drop_weight(directory, "embeddings.token_type_embeddings.weight")
    checkpoint = read_bert_checkpoint(directory)
    assert checkpoint.type_vocab_size == 0
    pretrained = listformer_from_checkpoint(
        directory, ListformerConfig(), None, max_query_tokens=8, max_document_tokens=16
    )
    assert not pretrained.model.get_layer("embedding").segments.numpy().any()
    narrow = build_text_model(
        "listformer",
        len(UNCASED),
        ListformerConfig(width=16, num_heads=4, num_layers=2),
        None,
        form=pretrained.form,
    )
    with pytest.raises(ValueError, match=r"embeddings.word_embeddings.weight gives shape"):
        load_checkpoint_weights(narrow, checkpoint)
    with pytest.raises(ValueError, match="max_position_embeddings"):
        listformer_from_checkpoint(
            directory, ListformerConfig(), None, max_query_tokens=8, max_document_tokens=POSITIONS
        )
