"""A model's hard limit (a learned position table) checked by the served signature, naming
the flag that sets it (tfr-train's and tfr-predict's refusals are rejected-input cases)."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf
from conftest import SMALL, identity_manifest

from tfr_rankformer.model.model_config import ModelConfig
from tfr_rankformer.model.models import build_model
from tfr_rankformer.serving.export import save_servable


@pytest.fixture(scope="module")
def three_positions(tmp_path_factory) -> str:
    """An untrained context_aware export whose learned positions take 3 items."""
    tf.keras.utils.set_random_seed(0)
    config = ModelConfig(**SMALL, d_fc=8, positional_encoding="learned", max_positions=3)
    model = build_model("context_aware", identity_manifest(3), config.resolved("context_aware"), 2)
    path = str(tmp_path_factory.mktemp("export") / "1")
    save_servable(model, path, num_features=3, list_head=False, warmup=[], max_items=3)
    return path


def test_the_served_signature_names_the_limit(three_positions):
    signature = tf.saved_model.load(three_positions).signatures["predict_tensors"]
    fits = signature(features=tf.zeros([1, 3, 3]), mask=tf.ones([1, 3], tf.bool))
    assert np.isfinite(fits["scores"].numpy()).all()
    with pytest.raises(tf.errors.InvalidArgumentError, match="more than 3 items, the most"):
        signature(features=tf.zeros([1, 5, 3]), mask=tf.ones([1, 5], tf.bool))
