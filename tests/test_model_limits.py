"""A model's hard limit (a learned position table) checked against the data before the
first step by tfr-train's plan, before any output by tfr-predict, and by the served
signature, each naming the flag that sets it."""

from __future__ import annotations

import os

import numpy as np
import pytest
import tensorflow as tf
from conftest import SMALL, identity_manifest, letor_line, write_lines

from pipelines.convert_cli import main as convert_main
from pipelines.predict_cli import main as predict_main
from pipelines.train_cli import main as train_main
from tfr_rankformer.model.model_config import ModelConfig
from tfr_rankformer.model.models import build_model
from tfr_rankformer.serving.export import save_servable


def test_tfr_train_refuses_lists_longer_than_learned_positions(tiny_dataset, tmp_path, capsys):
    data = str(tmp_path / "data")
    flags = ["--input", str(tiny_dataset), "--output", data, "--no-progress"]
    assert convert_main(flags + ["--log-level", "WARNING"]) == 0
    run = tmp_path / "run"
    argv = ["--model", "context_aware", "--data", data, "--model-dir", str(run), "--quiet"]
    # --list-size cuts training lists only: evaluation would still meet the 4-item list.
    argv += ["--positional-encoding", "learned", "--max-positions", "3", "--list-size", "3"]
    assert train_main(argv) == 1
    assert capsys.readouterr().err == (
        "tfr-train: error: the model takes lists of at most 3 items (its learned positional "
        f"encoding's --max-positions 3), but the 'train' split of {data} holds a list of 4; set "
        "--max-positions 4 or more, or --positional-encoding fixed (--list-size cuts only "
        "training lists: evaluation scores whole ones)\n"
    )
    assert not run.exists()


@pytest.fixture(scope="module")
def three_positions(tmp_path_factory) -> str:
    """An untrained context_aware export whose learned positions take 3 items."""
    tf.keras.utils.set_random_seed(0)
    config = ModelConfig(**SMALL, d_fc=8, positional_encoding="learned", max_positions=3)
    model = build_model("context_aware", identity_manifest(3), config.resolved("context_aware"), 2)
    path = str(tmp_path_factory.mktemp("export") / "1")
    save_servable(model, path, num_features=3, list_head=False, warmup=[], max_items=3)
    return path


def test_tfr_predict_refuses_a_longer_list_before_writing(three_positions, tmp_path, capsys):
    lines = [letor_line(0, 1, [0.1, 0.2, 0.3])] + [letor_line(0, 2, [i, 0, 1]) for i in range(5)]
    source = write_lines(tmp_path / "in.txt", lines)
    output = str(tmp_path / "out.trec")
    argv = ["--model", three_positions, "--input", source, "--output", output, "--no-progress"]
    assert predict_main(argv) == 1
    assert capsys.readouterr().err == (
        "tfr-predict: error: the model takes lists of at most 3 items (it was trained with "
        f"--max-positions 3), but --input {source} holds a list of 5; retrain it with "
        "--max-positions 5 or more\n"
    )
    assert os.listdir(tmp_path) == ["in.txt"]  # neither the output nor its .partial


def test_the_served_signature_names_the_limit(three_positions):
    signature = tf.saved_model.load(three_positions).signatures["predict_tensors"]
    fits = signature(features=tf.zeros([1, 3, 3]), mask=tf.ones([1, 3], tf.bool))
    assert np.isfinite(fits["scores"].numpy()).all()
    with pytest.raises(tf.errors.InvalidArgumentError, match="more than 3 items, the most"):
        signature(features=tf.zeros([1, 5, 3]), mask=tf.ones([1, 5], tf.bool))
