"""The Listformer's fast paths compute what the plain ones do.

Training batches lists of similar lengths together and cuts their padding
(``text_data.length_sorted_batches``), pads the token axes to a few shapes
(``text_model_inputs(token_multiples=...)``), evaluation tokenises in the input
pipeline, and the blocked attention splits its weights rather than slicing
them: the scores, metrics and gradients are those of the plain paths.
"""

import collections
import os

import numpy as np
import pytest
import tensorflow as tf

from tests.test_listformer_training import text_elwc
from tfr_rankformer.core.model_families import get_family
from tfr_rankformer.core.multi_worker import WorkerRole
from tfr_rankformer.ranking.ranking_metrics import evaluate_rankings
from tfr_rankformer.text import text_data
from tfr_rankformer.text.global_local_attention import blocked_attention, dense_attention
from tfr_rankformer.text.listformer import build_text_model
from tfr_rankformer.text.listformer_config import ListformerConfig
from tfr_rankformer.text.text_runs import evaluate_text_model, text_model_inputs
from tfr_rankformer.text.text_tokenizer import TextTokenizer, build_vocabulary, count_words
from tfr_rankformer.training.text_config import TextConfig
from tfr_rankformer.training.train_config import TrainConfig

WORDS = ["apple", "banana", "cherry", "delta", "echo", "fox", "golf", "hotel", "india"]


def _write_lists(directory, count=37, seed=0):
    """``count`` lists of 1 to 12 documents of 1 to 9 words; query ``q<i>`` names list i."""
    rng = np.random.default_rng(seed)
    os.makedirs(directory, exist_ok=True)
    with tf.io.TFRecordWriter(os.path.join(directory, "vali-00000-of-00001.tfrecord")) as w:
        for i in range(count):
            size = int(rng.integers(1, 13))
            documents = [
                [str(t) for t in rng.choice(WORDS, int(rng.integers(1, 10)))] for _ in range(size)
            ]
            labels = [int(v) for v in rng.integers(0, 3, size)]
            w.write(
                text_elwc([f"q{i}", *rng.choice(WORDS, int(rng.integers(0, 3)))], documents, labels)
            )
    # The same lists for training.
    source = os.path.join(directory, "vali-00000-of-00001.tfrecord")
    tf.io.gfile.copy(source, os.path.join(directory, "train-00000-of-00001.tfrecord"))
    return text_data.load_text_data(directory, TextConfig())


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    data = _write_lists(str(tmp_path_factory.mktemp("text")))
    vocabulary = build_vocabulary(count_words([*WORDS, *(f"q{i}" for i in range(40))]), size=200)
    tokenizer = TextTokenizer(vocabulary, max_query_tokens=6, max_document_tokens=7)
    tf.keras.utils.set_random_seed(0)
    config = ListformerConfig(width=16, num_layers=2, num_heads=2, ff_dim=32, attention_window=3)
    model = build_text_model("listformer", len(vocabulary), config, 2)
    return data, tokenizer, model


def _scores_by_query(model, tokenizer, batches, **inputs_settings):
    """``query -> (scores of its real documents, list-head logits)``."""
    found = {}
    for batch in batches:
        outputs = model(text_model_inputs(tokenizer, batch, **inputs_settings), training=False)
        mask = batch[text_data.MASK].numpy()
        for row, query in enumerate(batch[text_data.QUERY].numpy()):
            scores = outputs["scores"].numpy()[row][mask[row]]
            found[query.decode()] = (scores, outputs["list_quality"].numpy()[row])
    return found


def test_sorted_batches_hold_the_same_lists_and_give_the_same_scores(setup):
    data, tokenizer, model = setup
    lists = text_data.parsed_text_lists(data, "vali", list_size=8)
    plain = list(text_data.batched_text_lists(lists, 4))
    fast = list(text_data.length_sorted_batches(lists, 4, window=3))
    assert len(fast) == len(plain) == 10
    assert [len(b[text_data.MASK]) for b in fast].count(4) == 9  # one short batch: the last
    for batch in fast:
        mask = batch[text_data.MASK].numpy()
        width = mask.shape[1]
        assert width == mask.sum(axis=1).max()  # only padding is cut
    want = _scores_by_query(model, tokenizer, plain)
    got = _scores_by_query(model, tokenizer, fast, token_multiples=(4, 16))
    assert sorted(got) == sorted(want)
    for query, (scores, levels) in want.items():
        np.testing.assert_allclose(got[query][0], scores, atol=1e-5)
        np.testing.assert_allclose(got[query][1], levels, atol=1e-5)


def test_token_axes_are_padded_to_multiples_within_the_caps(setup):
    data, tokenizer, _ = setup
    batch = next(
        iter(
            text_data.batched_text_lists(
                text_data.parsed_text_lists(data, "vali", list_size=None), 5
            )
        )
    )
    plain = text_model_inputs(tokenizer, batch)
    padded = text_model_inputs(tokenizer, batch, token_multiples=(4, 5))
    q, t = plain["query_ids"].shape[1], plain["document_ids"].shape[2]
    assert padded["query_ids"].shape[1] == min(-(-q // 4) * 4, 6)
    assert padded["document_ids"].shape[2] == 7  # at most the cap, 7
    np.testing.assert_array_equal(padded["query_ids"][:, :q], plain["query_ids"])
    np.testing.assert_array_equal(padded["document_ids"][:, :, :t], plain["document_ids"])
    assert np.all(padded["document_ids"].numpy()[:, :, t:] == -1)


@pytest.mark.parametrize("buckets", [True, False])
def test_training_batches_take_few_shapes_and_every_list(setup, buckets):
    data, tokenizer, _ = setup
    config = TrainConfig.from_flat(
        dict(
            model="listformer", data=data.directory, model_dir="unused", batch_size=4,
            list_size=10, length_buckets=buckets, include_empty_lists=True,
            max_query_tokens=6, max_document_tokens=7,
        )
    )  # fmt: skip
    family = get_family("text").load()
    run = family.prepare(config, worker=WorkerRole())
    batches = list(family.training_data(run, None, ""))
    assert len(batches) == 10  # ceil(37 / 4), as without buckets
    assert sum(len(inputs["mask"]) for inputs, _ in batches) == 37
    shapes = {tuple(inputs["document_ids"].shape[1:]) for inputs, _ in batches}
    queries = {inputs["query_ids"].shape[1] for inputs, _ in batches}
    if buckets:  # documents: multiples of 8 up to the bucket's edge (10); tokens: the cap, 7
        assert {docs for docs, _ in shapes} <= {8, 10} and {t for _, t in shapes} == {7}
        assert queries == {4}  # up to 3 query tokens, padded to 4
    else:  # padded to --list-size documents, tokens to each batch's longest
        assert {docs for docs, _ in shapes} == {10}


def _plain_evaluation(model, tokenizer, data, batch_size):
    """``evaluate_text_model`` as it was: batches in file order, tokenised one by one."""
    parts = collections.defaultdict(list)
    lists = text_data.parsed_text_lists(data, "vali", list_size=None)
    for batch in text_data.batched_text_lists(lists, batch_size):
        outputs = model(text_model_inputs(tokenizer, batch), training=False)
        width = 12 - batch[text_data.MASK].shape[1]
        parts["scores"].append(np.pad(outputs["scores"].numpy(), [(0, 0), (0, width)]))
        parts["labels"].append(np.pad(batch[text_data.LABEL].numpy(), [(0, 0), (0, width)]))
        parts["mask"].append(np.pad(batch[text_data.MASK].numpy(), [(0, 0), (0, width)]))
        parts["probs"].append(tf.sigmoid(outputs["list_quality"]).numpy())
    labels, mask = np.concatenate(parts["labels"]), np.concatenate(parts["mask"])
    return evaluate_rankings(
        np.concatenate(parts["scores"]), labels, labels, mask & (labels >= 0),
        max_label=2, list_probs=np.concatenate(parts["probs"]),
    )  # fmt: skip


def test_evaluation_gives_the_metrics_of_the_plain_loop(setup):
    data, tokenizer, model = setup
    got = evaluate_text_model(
        model, tokenizer, data, "vali", batch_size=4, list_head=True, max_label=2
    )
    want = _plain_evaluation(model, tokenizer, data, 4)
    assert got["num_lists"] == want["num_lists"] == 37
    for key, value in want.items():
        if isinstance(value, float):
            np.testing.assert_allclose(got[key], value, rtol=1e-9, err_msg=key)
    assert got["truncation"]["documents_cut"] > 0  # documents of 8 and 9 words


def test_blocked_attention_has_the_gradients_of_the_dense_reference():
    rng = np.random.default_rng(3)
    b, h, q, n, t, dh = 2, 2, 2, 3, 4, 5
    g = 1 + q + n
    tensors = [tf.Variable(rng.normal(size=[b, h, g, dh]), dtype=tf.float32) for _ in range(3)]
    tensors += [tf.Variable(rng.normal(size=[b, h, n, t, dh]), dtype=tf.float32) for _ in range(3)]
    own = tf.Variable([0.7, -1.2])
    global_valid = tf.constant(np.arange(g)[None] < np.array([[g], [g - 1]]))
    local_valid = tf.constant(rng.random([b, n, t]) < 0.8)
    upstream = [rng.normal(size=[b, h, g, dh]), rng.normal(size=[b, h, n, t, dh])]
    local_rows = local_valid.numpy()[:, None, :, :, None].astype(np.float32)

    def gradients(attention):
        with tf.GradientTape() as tape:
            out = attention(
                tuple(tensors[:3]), tuple(tensors[3:]), global_valid, local_valid,
                window=1, own_bias=own,
            )  # fmt: skip
            # Padding tokens' rows are never read: they carry no gradient.
            loss = tf.reduce_sum(out[0] * upstream[0]) + tf.reduce_sum(
                out[1] * upstream[1] * local_rows
            )
        return tape.gradient(loss, [*tensors, own])

    for got, want in zip(gradients(blocked_attention), gradients(dense_attention)):
        np.testing.assert_allclose(got, want, atol=1e-5)
