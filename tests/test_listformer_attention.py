"""The Listformer's document-wise global-local attention and the model's invariances."""

import numpy as np
import pytest
import tensorflow as tf

from tfr_rankformer.text.global_local_attention import blocked_attention, dense_attention
from tfr_rankformer.text.listformer import build_text_model
from tfr_rankformer.text.listformer_config import ListformerConfig

B, H, Q, N, T, DH = 2, 2, 3, 4, 5, 3
G = 1 + Q + N


def _qkv(rng, *shape):
    return tuple(tf.constant(rng.normal(size=shape), tf.float32) for _ in range(3))


def _inputs(seed=0):
    rng = np.random.default_rng(seed)
    globals_qkv = _qkv(rng, B, H, G, DH)
    locals_qkv = _qkv(rng, B, H, N, T, DH)
    global_valid = np.ones([B, G], bool)
    global_valid[1, 2:4] = False  # a short query
    global_valid[1, -1] = False  # the last document is padding
    local_valid = rng.random([B, N, T]) < 0.8
    local_valid[1, -1] = False
    return globals_qkv, locals_qkv, tf.constant(global_valid), tf.constant(local_valid)


OWN = tf.constant([1.5, -0.5])


@pytest.mark.parametrize("window", [0, 1, 2, 10])
def test_blocked_attention_equals_the_dense_masked_reference(window):
    args = _inputs()
    blocked = blocked_attention(*args, window=window, own_bias=OWN)
    dense = dense_attention(*args, window=window, own_bias=OWN)
    local_valid = args[3].numpy()
    for got, want in zip(blocked, dense):
        assert got.shape == want.shape
    np.testing.assert_allclose(blocked[0], dense[0], rtol=1e-5, atol=1e-5)
    # Rows of padding tokens are never read; compare the real ones.
    rows = np.broadcast_to(local_valid[:, None, :, :, None], blocked[1].shape)
    np.testing.assert_allclose(
        np.where(rows, blocked[1], 0), np.where(rows, dense[1], 0), rtol=1e-5, atol=1e-5
    )


def test_full_attention_differs_from_the_pattern():
    args = _inputs()
    full = dense_attention(*args, window=1, own_bias=OWN, pattern="full")
    masked = dense_attention(*args, window=1, own_bias=OWN)
    assert not np.allclose(full[1], masked[1])


def _change_document(locals_qkv, doc):
    rng = np.random.default_rng(7)
    changed = []
    for t in locals_qkv:
        t = t.numpy().copy()
        t[:, :, doc] = rng.normal(size=t[:, :, doc].shape)
        changed.append(tf.constant(t))
    return tuple(changed)


def test_a_document_token_sees_no_other_document_and_no_far_token():
    globals_qkv, locals_qkv, global_valid, local_valid = _inputs()
    before = blocked_attention(
        globals_qkv, locals_qkv, global_valid, local_valid, window=1, own_bias=OWN
    )
    after = blocked_attention(
        globals_qkv, _change_document(locals_qkv, 2), global_valid, local_valid,
        window=1, own_bias=OWN,
    )  # fmt: skip
    before = [t.numpy() for t in before]
    after = [t.numpy() for t in after]
    # Documents 0, 1 and 3 are unchanged; document 2 and the global tokens change.
    np.testing.assert_allclose(before[1][:, :, [0, 1, 3]], after[1][:, :, [0, 1, 3]], atol=1e-6)
    assert not np.allclose(before[1][:, :, 2], after[1][:, :, 2])
    assert not np.allclose(before[0], after[0])
    # With window 1, token 0 of a document never sees its token 3.
    changed = [t.numpy().copy() for t in locals_qkv]
    for t in changed:
        t[:, :, :, 3] += 5.0
    moved = blocked_attention(
        globals_qkv, tuple(map(tf.constant, changed)), global_valid, local_valid,
        window=1, own_bias=OWN,
    )  # fmt: skip
    np.testing.assert_allclose(before[1][:, :, :, 0], moved[1].numpy()[:, :, :, 0], atol=1e-6)


def test_padding_tokens_are_never_attended_to():
    globals_qkv, locals_qkv, global_valid, local_valid = _inputs()
    before = blocked_attention(
        globals_qkv, locals_qkv, global_valid, local_valid, window=2, own_bias=OWN
    )
    noisy = [t.numpy().copy() for t in locals_qkv]
    padding = ~local_valid.numpy()
    for t in noisy[1:]:  # keys and values of padding tokens
        t[np.broadcast_to(padding[:, None, :, :, None], t.shape)] = 1e3
    after = blocked_attention(
        globals_qkv, (locals_qkv[0], *map(tf.constant, noisy[1:])), global_valid, local_valid,
        window=2, own_bias=OWN,
    )  # fmt: skip
    np.testing.assert_allclose(before[0], after[0], rtol=1e-5, atol=1e-5)
    rows = np.broadcast_to(local_valid.numpy()[:, None, :, :, None], before[1].shape)
    np.testing.assert_allclose(
        np.where(rows, before[1], 0), np.where(rows, after[1], 0), rtol=1e-5, atol=1e-5
    )


# === The model ===

VOCAB = 30


def _model(attention="blocked", levels=2, seed=0):
    tf.keras.utils.set_random_seed(seed)
    config = ListformerConfig(
        width=8, num_heads=2, ff_dim=16, num_layers=2, dropout=0.0, attention_window=2,
        attention=attention, head_hidden=8,
    )  # fmt: skip
    return build_text_model("listformer", VOCAB, config, levels)


def _lists(seed=0):
    rng = np.random.default_rng(seed)
    query = rng.integers(0, VOCAB, [2, 3]).astype(np.int32)
    query[1, 2] = -1
    documents = rng.integers(0, VOCAB, [2, 4, 6]).astype(np.int32)
    documents[0, 1, 4:] = -1
    documents[1, 2, 2:] = -1
    mask = np.array([[True] * 4, [True, True, True, False]])
    return {"query_ids": query, "document_ids": documents, "mask": mask}


def test_permuting_documents_permutes_scores_and_keeps_the_list_prediction():
    model, inputs = _model(), _lists()
    out = model(inputs)
    perm = [2, 0, 3, 1]
    permuted = dict(
        inputs, document_ids=inputs["document_ids"][:, perm], mask=inputs["mask"][:, perm]
    )
    out_p = model(permuted)
    np.testing.assert_allclose(
        out_p["scores"][0], out["scores"].numpy()[0, perm], rtol=1e-5, atol=1e-5
    )
    np.testing.assert_allclose(out_p["list_quality"], out["list_quality"], rtol=1e-5, atol=1e-5)


def test_padding_documents_and_tokens_change_nothing():
    model, inputs = _model(), _lists()
    out = model(inputs)["scores"].numpy()
    rng = np.random.default_rng(3)
    padded_docs = np.concatenate(
        [inputs["document_ids"], rng.integers(0, VOCAB, [2, 2, 6]).astype(np.int32)], axis=1
    )
    mask = np.concatenate([inputs["mask"], np.zeros([2, 2], bool)], axis=1)
    padded_tokens = np.pad(padded_docs, [(0, 0), (0, 0), (0, 3)], constant_values=-1)
    padded_query = np.pad(inputs["query_ids"], [(0, 0), (0, 2)], constant_values=-1)
    more = model({"query_ids": padded_query, "document_ids": padded_tokens, "mask": mask})
    scores = more["scores"].numpy()
    valid = inputs["mask"]
    np.testing.assert_allclose(scores[:, :4][valid], out[valid], rtol=1e-5, atol=1e-5)
    assert (scores[:, 4:] < -1e8).all() and (scores[:, :4][~valid] < -1e8).all()


def test_blocked_and_dense_masked_models_agree():
    blocked, dense = _model("blocked"), _model("dense_masked")
    dense.set_weights(blocked.get_weights())
    inputs = _lists()
    np.testing.assert_allclose(
        blocked(inputs)["scores"], dense(inputs)["scores"], rtol=1e-4, atol=1e-4
    )


def test_first_layer_local_outputs_see_no_other_document():
    """Changing document 2's tokens (same length, so every global token's input is the
    same) leaves the other documents' token outputs of the first layer unchanged."""
    model = _model()
    encoder = tf.keras.Model(model.inputs, model.get_layer("encoder_0").output)
    inputs = _lists()
    changed = inputs["document_ids"].copy()
    changed[0, 2] = (changed[0, 2] + 7) % VOCAB
    before = encoder(inputs).numpy()
    after = encoder(dict(inputs, document_ids=changed)).numpy()
    g = 1 + 3 + 4
    blocks_before = before[:, g:].reshape(2, 4, 6, -1)
    blocks_after = after[:, g:].reshape(2, 4, 6, -1)
    np.testing.assert_allclose(blocks_before[0, [0, 1, 3]], blocks_after[0, [0, 1, 3]], atol=1e-6)
    np.testing.assert_allclose(blocks_before[1], blocks_after[1], atol=1e-6)
    assert not np.allclose(blocks_before[0, 2], blocks_after[0, 2])
    assert not np.allclose(before[0, :g], after[0, :g])  # the global tokens saw the change
    # Through the global tokens, the second layer carries it to the other documents.
    scores = model(inputs)["scores"].numpy()
    changed_scores = model(dict(inputs, document_ids=changed))["scores"].numpy()
    assert not np.allclose(scores[0, [0, 1, 3]], changed_scores[0, [0, 1, 3]])
