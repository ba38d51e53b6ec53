"""A Listformer from a checkpoint starts as a residual over the checkpoint's own cosine and
the first stage's score (``ScoreMixture``), and serves the first stage's scores."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

from pipelines.export_cli import main as export_main  # noqa: E402
from pipelines.predict_cli import main as predict_main  # noqa: E402
from pipelines.train_cli import main as train_main  # noqa: E402
from tests.bert_checkpoints import WORDS, write_checkpoint  # noqa: E402
from tests.test_text_first_stage import _trec_files  # noqa: E402
from tfr_rankformer.core.model_families import get_family  # noqa: E402
from tfr_rankformer.core.multi_worker import WorkerRole  # noqa: E402
from tfr_rankformer.text import text_data  # noqa: E402
from tfr_rankformer.text.listformer import SIMILARITY_LAYER  # noqa: E402
from tfr_rankformer.text.listformer_layers import standardized  # noqa: E402
from tfr_rankformer.text.text_runs import text_model_inputs  # noqa: E402
from tfr_rankformer.training.train_config import TrainConfig  # noqa: E402
from tfrecords_tools.text.trec_convert import TrecConfig, convert_trec  # noqa: E402

CAPS = dict(max_query_tokens=8, max_document_tokens=16)


def _words(name: str) -> str:
    """A text of the checkpoint's words, drawn from the name (so texts differ)."""
    rng = np.random.default_rng(sum(map(ord, name)))
    return " ".join(rng.choice(WORDS[:30], 4 if name.startswith("query") else 6))


@pytest.fixture(scope="module")
def start(tmp_path_factory):
    """A tiny checkpoint and a dataset converted from a run (with first-stage scores)."""
    root = tmp_path_factory.mktemp("residual")
    checkpoint = str(root / "bert")
    write_checkpoint(checkpoint)
    paths = _trec_files(root / "in", text=_words)
    config = TrecConfig(
        output=str(root / "data"),
        train_queries=paths["queries"],
        collection=paths["collection"],
        qrels=paths["qrels"],
        run=paths["run"],
    )
    convert_trec(config, progress=False)
    return checkpoint, str(root / "data"), root


def _initial(start, **settings):
    checkpoint, data, _ = start
    config = TrainConfig.from_flat(
        dict(model="listformer", data=data, model_dir="unused", init_from=checkpoint, **CAPS)
        | settings
    )
    family = get_family("text").load()
    run = family.prepare(config, worker=WorkerRole())
    model, _ = family.build(run, steps_per_epoch=1, xla=False)
    return run, model


def _batch(run):
    lists = text_data.parsed_text_lists(run.data, "train", list_size=None)
    return next(iter(lists.batch(8)))


@pytest.mark.parametrize("first_stage", [False, True])
def test_before_training_the_model_ranks_exactly_by_the_checkpoint(start, first_stage):
    run, model = _initial(start, first_stage=first_stage)
    assert run.config.architecture.similarity == "checkpoint"  # the default from a checkpoint
    batch = _batch(run)
    inputs = text_model_inputs(run.extra.tokenizer, batch, first_stage=first_stage)
    scores = model(inputs, training=False)["scores"].numpy()
    mask = batch["mask"]
    tower = model.get_layer(SIMILARITY_LAYER)
    cosine = tower.cosine(inputs["query_ids"], inputs["document_ids"], mask)
    expected = standardized(cosine, mask)  # the first stage starts at weight 0
    valid = mask.numpy()
    np.testing.assert_allclose(scores[valid], expected.numpy()[valid], atol=1e-4)
    assert np.ptp(scores[valid]) > 0  # a ranking, not ties
    weights = model.get_layer("mixture").mixing_weights()
    assert weights == pytest.approx(
        {"similarity": 1.0, "first_stage": 0.0} if first_stage else {"similarity": 1.0}
    )


def test_the_first_stage_weight_learns_from_zero(start):
    run, model = _initial(start, first_stage=True)
    batch = _batch(run)
    inputs = text_model_inputs(run.extra.tokenizer, batch, first_stage=True)
    mixture = model.get_layer("mixture")
    with tf.GradientTape() as tape:
        scores = model(inputs, training=False)["scores"]
        # Any loss that prefers the first stage's order: its gradient reaches b.
        loss = -tf.reduce_sum(tf.where(batch["mask"], scores * batch["first_stage"], 0.0))
    (gradient,) = tape.gradient(loss, [mixture.weights_by_signal["first_stage"]])
    assert float(gradient) < 0  # a step raises b from 0


def test_without_a_similarity_the_model_starts_as_the_first_stage(start):
    run, model = _initial(start, similarity="none", first_stage=True)
    batch = _batch(run)
    inputs = text_model_inputs(run.extra.tokenizer, batch, first_stage=True)
    scores = model(inputs, training=False)["scores"].numpy()
    valid = batch["mask"].numpy()
    expected = standardized(batch["first_stage"], batch["mask"]).numpy()
    np.testing.assert_allclose(scores[valid], expected[valid], atol=1e-4)


def test_the_similarity_encoder_stays_frozen_and_the_first_stage_is_auto(start):
    run, model = _initial(start)
    assert run.config.architecture.first_stage is True  # the data has the scores
    tower = model.get_layer(SIMILARITY_LAYER)
    assert not tower.trainable and tower.weights and not tower.trainable_weights
    assert {w.name.split("/")[-1].split(":")[0] for w in model.get_layer("mixture").weights} == {
        "similarity_weight",
        "first_stage_weight",
    }


def test_a_first_stage_is_refused_where_the_data_has_none(start, tmp_path):
    checkpoint, _, _ = start
    from tests.test_listformer_training import write_text_lists

    data = write_text_lists(str(tmp_path / "text"), lists=(("train", 4),))
    config = TrainConfig.from_flat(
        dict(model="listformer", data=data, model_dir="x", init_from=checkpoint, first_stage=True)
        | CAPS
    )
    with pytest.raises(ValueError, match="--first-stage on: .* holds no first-stage scores"):
        get_family("text").load().prepare(config, worker=WorkerRole())
    with pytest.raises(ValueError, match="`similarity` checkpoint needs a checkpoint"):
        TrainConfig.from_flat(
            dict(model="listformer", data=data, model_dir="x", similarity="checkpoint")
        )


@pytest.mark.slow
def test_the_export_takes_and_tfr_predict_sends_the_first_stage_scores(start, tmp_path):
    checkpoint, data, _ = start
    model_dir = str(tmp_path / "run")
    flags = ["--model", "listformer", "--data", data, "--model-dir", model_dir, "--quiet"]
    flags += ["--init-from", checkpoint, "--max-query-tokens", "8", "--max-document-tokens", "16"]
    assert train_main([*flags, "--epochs", "1", "--no-export"]) == 0
    assert export_main(["--model-dir", model_dir]) == 0
    saved = tf.saved_model.load(f"{model_dir}/export/1")
    inputs = saved.signatures["serving_default"].structured_input_signature[1]
    assert set(inputs) == {"query", "documents", "first_stage_scores"}
    ids = tf.saved_model.load(f"{model_dir}/export_token_ids/1")
    assert "first_stage_scores" in ids.signatures["serving_default"].structured_input_signature[1]
    out = str(tmp_path / "run.txt")
    assert (
        predict_main(["--model", model_dir, "--input", data, "--split", "train", "--output", out])
        == 0
    )
    with open(out, encoding="utf-8") as f:
        lines = f.read().splitlines()
    assert len(lines) == 10  # every document of the three lists
