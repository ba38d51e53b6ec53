"""The Listformer (Reuter, 2022): a text re-ranker with document-wise global-local attention
over ``[CLS] q [SEP] d_1 [SEP] ... d_N [SEP]``; document ``j``'s score is read from its closing
``[SEP]`` (or is a residual over known rankings, ``ScoreMixture``), a list head reads ``[CLS]``.
"""

from __future__ import annotations

import tensorflow as tf

from tfr_rankformer.core import model_families
from tfr_rankformer.model.layers import LayerNorm
from tfr_rankformer.model.model_config import ModelConfig
from tfr_rankformer.model.models import copy_first_layer, list_head, score_outputs
from tfr_rankformer.model.projections import Dense, dense
from tfr_rankformer.text.listformer_config import ListformerForm
from tfr_rankformer.text.listformer_layers import (
    GlobalLocalTextEncoderLayer,
    ListformerEmbedding,
    ScoreMixture,
)
from tfr_rankformer.text.sentence_tower import SentenceTower

__all__ = [
    "QUERY_IDS",
    "DOCUMENT_IDS",
    "FIRST_STAGE",
    "build_listformer",
    "build_text_model",
]

QUERY_IDS = "query_ids"
DOCUMENT_IDS = "document_ids"
MASK = "mask"
FIRST_STAGE = "first_stage"
SIMILARITY_LAYER = "similarity"


def text_inputs(first_stage: bool = False) -> dict:
    """The Keras inputs of a text model (with the first stage's scores when asked)."""
    inputs = {
        QUERY_IDS: tf.keras.Input(shape=(None,), dtype=tf.int32, name=QUERY_IDS),
        DOCUMENT_IDS: tf.keras.Input(shape=(None, None), dtype=tf.int32, name=DOCUMENT_IDS),
        MASK: tf.keras.Input(shape=(None,), dtype=tf.bool, name=MASK),
    }
    if first_stage:
        inputs[FIRST_STAGE] = tf.keras.Input(shape=(None,), dtype=tf.float32, name=FIRST_STAGE)
    return inputs


def _signals(inputs: dict, config: ModelConfig, tower: dict | None) -> dict:
    """The known rankings ``[B, N]`` the score is a residual over, by name."""
    signals = {}
    if config.similarity == "checkpoint":
        if tower is None:
            raise ValueError("`similarity` checkpoint needs the checkpoint's encoder settings")
        encoder = SentenceTower.from_config({**tower, "name": SIMILARITY_LAYER})
        signals["similarity"] = encoder.cosine(
            inputs[QUERY_IDS], inputs[DOCUMENT_IDS], inputs[MASK]
        )
    if config.first_stage:
        signals["first_stage"] = inputs[FIRST_STAGE]
    return signals


def _encoder(x, global_valid, local_valid, config: ModelConfig, form: ListformerForm):
    """The encoder layers (and a final LayerNorm): ``[B, S, D]`` -> globals ``[B, G, D]``."""
    encoder = []
    for i in range(config.num_layers):
        layer = GlobalLocalTextEncoderLayer(
            window=config.attention_window,
            attention=config.attention,
            num_heads=config.num_heads,
            ff_dim=config.ff_dim,
            dropout=config.dropout,
            activation=form.activation,
            init=config.init,
            norm_first=form.norm_first,
            epsilon=form.layer_norm_epsilon,
            global_projections=form.global_projections,
            globals_only=i == config.num_layers - 1,  # only [CLS] and the [SEP]s are read
            name=f"encoder_{i}",
        )
        x = layer(x, global_valid, local_valid)
        encoder.append(layer)
    if config.copied_layers:
        copy_first_layer(encoder)
    if form.norm_first:  # pre-LayerNorm layers leave the residual stream unnormalised
        x = LayerNorm(epsilon=form.layer_norm_epsilon, name="final_norm")(x)
    return x


def _document_scores(z_seps, inputs: dict, config: ModelConfig, item_levels, tower) -> dict:
    """``scores [B, N]`` (and ``item_levels``) from the ``[SEP]`` outputs ``[B, N, D]``."""
    mask = inputs[MASK]
    signals = _signals(inputs, config, tower)
    if signals and item_levels:
        raise ValueError("the ordinal loss's level logits take no similarity or first stage")
    if not signals:
        score = dense(item_levels or 1, fan_in=config.width, init=config.init, dtype="float32")
        return score_outputs(score(z_seps), mask, item_levels)  # [B, N, 1] -> [B, N]
    score = Dense(1, kernel_initializer="zeros", dtype="float32", name="score_head")
    raw = score(z_seps)[..., 0]  # [B, N, 1] -> [B, N]
    # Beside the similarity the first stage starts unused: the model starts as the checkpoint.
    initial = [0.0 if name == "first_stage" and len(signals) > 1 else 1.0 for name in signals]
    mixture = ScoreMixture(tuple(signals), initial=initial, name="mixture")
    raw = mixture(raw, mask, *signals.values())
    return score_outputs(raw[..., tf.newaxis], mask, None)  # [B, N] -> [B, N, 1] -> [B, N]


def build_listformer(
    vocab_size: int,
    config: ModelConfig,
    levels: int | None,
    item_levels: int | None = None,
    *,
    form: ListformerForm | None = None,
    tower: dict | None = None,
) -> tf.keras.Model:
    """The Listformer on ``query_ids [B, Q]``, ``document_ids [B, N, T]`` (int32, ``-1``
    padding), ``mask [B, N]`` (and ``first_stage [B, N]``).

    Args:
      vocab_size: the tokenizer's vocabulary size.
      config: resolved settings (``ModelConfig.resolved("listformer")``).
      levels: ``K`` levels of the list head; ``None`` or 0: no list head.
      item_levels: per-document level logits for the ordinal loss; ``None``: one score.
      form: the layers' form; ``None``: ``ListformerForm()``.
      tower: ``SentenceTower``'s settings when ``config.similarity`` is ``checkpoint``.
    """
    form = form or ListformerForm()
    # === Inputs ===
    inputs = text_inputs(bool(config.first_stage))
    mask = inputs[MASK]
    # === Embedding ===
    embedding = ListformerEmbedding(
        vocab_size,
        config.width,
        config.max_positions,
        config.dropout,
        epsilon=form.layer_norm_epsilon,
        cls_position=form.cls_position,
        match_marks=config.match_marks,
        name="embedding",
    )
    # -> [B, S, D] with S = 1 + Q + N + N T, [B, G], [B, N, T]
    x, global_valid, local_valid = embedding(inputs[QUERY_IDS], inputs[DOCUMENT_IDS], mask)
    # === Encoder ===
    x = _encoder(x, global_valid, local_valid, config, form)  # [B, S, D] -> [B, G, D]
    # === Heads ===
    # [CLS] and the [SEP]s closing the documents, the last N globals: [B, D], [B, N, D].
    num_global = tf.shape(global_valid)[1]
    docs = tf.shape(mask)[1]
    z_cls, z_seps = x[:, 0], x[:, num_global - docs : num_global]
    outputs = _document_scores(z_seps, inputs, config, item_levels, tower)
    if levels:
        outputs["list_quality"] = list_head(z_cls, config.width, config, levels)
    return tf.keras.Model(inputs, outputs, name="listformer")


def build_text_model(
    name: str, vocab_size: int, config: ModelConfig, levels: int | None, **options
) -> tf.keras.Model:
    """The text model ``name`` with ``config``'s defaults filled in (``options``: its
    builder's, as ``build_listformer``'s)."""
    if not model_families.is_text(name):
        known = sorted(model_families.model_names(model_families.TEXT_KIND))
        raise ValueError(f"Unknown text model {name!r}; choose from {known}")
    build = model_families.get_model(name).load_builder()
    return build(vocab_size, config.resolved(name), levels, **options)
