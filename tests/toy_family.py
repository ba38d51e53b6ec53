"""A toy model family in one file: a linear scorer over each item's features.

It reuses the feature-vector family's data, training loop, evaluation and exports and
adds one entry to ``metrics.json``'s ``training``; ``register()`` adds it and its one
model to the registry, after which ``tfr-train --model toy_linear`` and the other
commands take it like a builtin model.
"""

from __future__ import annotations

import tensorflow as tf

from tfr_rankformer.core import model_families
from tfr_rankformer.core.elwc_schema import FEATURES, MASK
from tfr_rankformer.core.model_spec import ModelFamily, ModelSpec
from tfr_rankformer.features.feature_family import FeatureFamily
from tfr_rankformer.model.models import score_outputs

NAME = "toy_linear"


def build_linear(num_features, config, levels, item_levels=None) -> tf.keras.Model:
    """``{"features": [B, L, d] normalised, "mask": [B, L]}`` -> scores ``[B, L]``."""
    del config, levels  # no settings, no list head
    features = tf.keras.Input(shape=(None, num_features), dtype=tf.float32, name=FEATURES)
    mask = tf.keras.Input(shape=(None,), dtype=tf.bool, name=MASK)
    raw = tf.keras.layers.Dense(item_levels or 1, name="linear")(features)  # [B, L, 1]
    return tf.keras.Model({FEATURES: features, MASK: mask}, score_outputs(raw, mask, item_levels))


class ToyFamily(FeatureFamily):
    """The feature-vector family, with one more entry in the training summary."""

    def summary(self, run) -> dict:
        return {"family": self.record.name}


def register() -> None:
    model_families.register_family(ModelFamily(NAME, "features", ToyFamily))
    model_families.register_model(
        ModelSpec(
            NAME,
            family=NAME,
            builder=build_linear,
            training=dict(
                loss="softmax",
                eval_batch_size=8,
                epochs=2,
                batch_size=8,
                loss_scaling="released",
                optimizer="adam",
                weight_decay=0.0,
                lr_schedule="epoch_inverse_sqrt",
            ),
            attention=False,
        )
    )


def unregister() -> None:
    model_families.unregister_family(NAME)
