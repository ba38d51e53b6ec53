"""The feature-vector models, the RankFormer and its peers, as Keras functional models:
``{"features": [B, L, d] raw, "mask": [B, L]}`` -> ``{"scores": [B, L]}`` (``list_quality``
``[B, K]`` logits for list heads, ``item_levels`` ``[B, L, K]`` for the ordinal loss). A
model is its normalisation, then the *ranker* that training fits on normalised features.
"""

from __future__ import annotations

from collections.abc import Mapping

import tensorflow as tf

from tfr_rankformer.core import model_families
from tfr_rankformer.core.elwc_schema import FEATURES, MASK
from tfr_rankformer.inputs.manifest import Manifest
from tfr_rankformer.model.encoder_layer import PreNormEncoderLayer
from tfr_rankformer.model.feature_normalization import FeatureNormalization
from tfr_rankformer.model.layers import (
    ClsToken,
    FastDropout,
    ItemAndContextHead,
    KeyedDropout,
    LayerNorm,
    MaskedScores,
)
from tfr_rankformer.model.model_config import ModelConfig
from tfr_rankformer.model.peer_layers import (
    GlobalLocalEncoderLayer,
    GlobalTokens,
    LearnedPositionalEncoding,
    PostNormEncoderLayer,
    SinusoidalPositionalEncoding,
)
from tfr_rankformer.model.projections import dense


def copy_first_layer(layers: list) -> None:
    """Sets every built layer's weights to the first one's (``copied_layers``)."""
    first = layers[0].get_weights()
    for layer in layers[1:]:
        layer.set_weights(first)


def _inputs(num_features: int):
    features = tf.keras.Input(shape=(None, num_features), dtype=tf.float32, name=FEATURES)
    mask = tf.keras.Input(shape=(None,), dtype=tf.bool, name=MASK)
    return features, mask


def mlp_head(fan_in: int, config: ModelConfig, outputs: int, name: str) -> tf.keras.Sequential:
    """An MLP head with one hidden layer: Linear, ReLU, Dropout, Linear (the released code's)."""
    hidden = config.head_hidden
    return tf.keras.Sequential(
        [
            dense(hidden, fan_in=fan_in, init=config.init, activation="relu"),
            FastDropout(config.head_dropout),
            dense(outputs, fan_in=hidden, init=config.init, dtype="float32"),
        ],
        name=name,
    )


def list_head(z_cls, fan_in: int, config: ModelConfig, levels: int):
    """h_d(z_CLS): ``[B, fan_in]`` -> ``list_quality`` ``[B, K]`` logits of P(t >= k)."""
    logits = mlp_head(fan_in, config, levels, "list_head")(z_cls)
    return tf.keras.layers.Activation("linear", dtype="float32", name="list_quality")(logits)


def score_outputs(raw, mask, item_levels: int | None) -> dict:
    """``scores`` from ``[B, L, 1]``, or with ``item_levels`` the sum of the level
    probabilities of ``[B, L, K]`` logits."""
    if not item_levels:
        return {"scores": MaskedScores(name="scores")(raw, mask)}
    logits = tf.keras.layers.Activation("linear", dtype="float32", name="item_levels")(raw)
    expected = tf.reduce_sum(tf.sigmoid(logits), axis=-1, keepdims=True)  # [B, L, 1]
    return {"scores": MaskedScores(name="scores")(expected, mask), "item_levels": logits}


def _listwise(num_features, config: ModelConfig, levels, item_levels, name: str, *, glob=0):
    """The RankFormer encoder, score head and (``levels``) list head; ``glob`` summary tokens
    join ``[CLS]`` under global-local attention."""
    if levels and not config.cls_token:
        raise ValueError("a list head reads the [CLS] token: it needs `cls_token`")
    # === Inputs (normalised features) ===
    features, mask = _inputs(num_features)
    # === Encoder ===
    x, valid, lead = _with_leading_tokens(features, mask, config, glob)
    x = _encoder(x, valid, config, glob)
    # [B, lead + L, d] -> [B, lead, d] and [B, L, d] (a slice's gradient copies it whole)
    leading, z_items = tf.split(x, [lead, -1], axis=1) if lead else (None, x)
    # === Heads ===
    z_cls = leading[:, glob, :] if config.cls_token else None  # [B, d]
    raw = _score_head(z_items, z_cls, num_features, config, item_levels or 1)
    outputs = score_outputs(raw, mask, item_levels)
    if levels:
        outputs["list_quality"] = list_head(z_cls, num_features, config, levels)
    return tf.keras.Model({FEATURES: features, MASK: mask}, outputs, name=name)


def _with_leading_tokens(features, mask, config: ModelConfig, glob: int):
    """The items after ``[CLS]`` and ``glob`` summary tokens, their mask and ``lead``."""
    x, valid, lead = features, mask, 0
    if config.cls_token:
        cls = ClsToken(config.cls_stddev, name="cls_token")
        x, valid = cls(features, mask)  # [B, L, d] -> [B, L + 1, d]
        lead = 1
    if glob:
        x, valid = GlobalTokens(glob, name="global_tokens")(x, valid)  # [B, glob + L + 1, d]
        lead += glob
    return x, valid, lead


def _encoder(x, valid, config: ModelConfig, glob: int):
    """The encoder layers over ``x`` ``[B, T, d]`` (and ``final_norm``)."""
    encoder = []
    for i in range(config.num_layers):
        settings = dict(num_heads=config.num_heads, ff_dim=config.ff_dim)
        settings.update(dropout=config.dropout, init=config.init)
        if glob:
            layer = GlobalLocalEncoderLayer(num_global=glob + 1, name=f"encoder_{i}", **settings)
        else:
            layer = PreNormEncoderLayer(name=f"encoder_{i}", **settings)
        x = layer(x, valid)
        encoder.append(layer)
    if config.copied_layers:
        copy_first_layer(encoder)
    if config.final_norm:
        x = LayerNorm(epsilon=1e-5, name="final_norm")(x)
    return x


def _score_head(z_items, z_cls, num_features: int, config: ModelConfig, outs: int):
    """``h_s(z_i || z_CLS)`` given ``z_cls`` ``[B, d]``, else ``h_s(z_i)``: ``[B, L, outs]``."""
    if z_cls is not None:
        # h_s(z_i || z_CLS): [B, L, d] and [B, d] -> [B, L, outs]
        head = ItemAndContextHead(
            config.head_hidden, outs, config.head_dropout, config.init, name="score_head"
        )
        return head(z_items, z_cls)
    # h_s(z_i): [B, L, d] -> [B, L, outs]
    return mlp_head(num_features, config, outs, "score_head")(z_items)


def build_rankformer(num_features, config: ModelConfig, levels: int, item_levels=None):
    """The RankFormer: encoder with [CLS], score head and (``levels`` > 0) list head."""
    return _listwise(num_features, config, levels, item_levels, "rankformer")


def build_transformer(num_features, config: ModelConfig, levels: int, item_levels=None):
    """The encoder without list head (alpha = 0); by default, as the released code,
    without ``[CLS]`` either."""
    return _listwise(num_features, config, None, item_levels, "transformer")


def build_summary_token_ranker(num_features, config: ModelConfig, levels: int, item_levels=None):
    """The RankFormer's heads on an encoder whose items attend only to ``[CLS]``, the
    ``global_tokens`` summary tokens and themselves: cost linear in the list length."""
    glob = config.global_tokens
    return _listwise(num_features, config, levels, item_levels, "summary_token_ranker", glob=glob)


def build_mlp(num_features, config: ModelConfig, levels: int, item_levels=None):
    """The pointwise MLP baseline: each item scored alone."""
    features, mask = _inputs(num_features)
    x, fan_in = features, num_features
    for i, units in enumerate(config.mlp_units):
        x = dense(units, fan_in=fan_in, init=config.init, activation="relu", name=f"dense_{i}")(x)
        x = KeyedDropout(config.dropout, name=f"dropout_{i}")(x)
        fan_in = units
    raw = dense(item_levels or 1, fan_in=fan_in, init=config.init, dtype="float32", name="score")(x)
    outputs = score_outputs(raw, mask, item_levels)
    return tf.keras.Model({FEATURES: features, MASK: mask}, outputs, name="mlp")


def build_context_aware(num_features, config: ModelConfig, levels: int, item_levels=None):
    """allRank's context-aware ranker: a shared projection to ``d_fc``, post-LayerNorm
    encoder blocks over the list, a shared linear scoring layer."""
    features, mask = _inputs(num_features)
    # Linear, as in allRank's published configuration (our reading): [B, L, d] -> [B, L, d_fc]
    x = dense(config.d_fc, fan_in=num_features, init=config.init, name="input_projection")(features)
    if config.positional_encoding == "fixed":
        x = SinusoidalPositionalEncoding(name="positional_encoding")(x)
    elif config.positional_encoding == "learned":
        x = LearnedPositionalEncoding(config.max_positions, name="positional_encoding")(x)
    blocks = []
    for i in range(config.num_layers):
        block = PostNormEncoderLayer(
            config.num_heads, config.ff_dim, config.dropout, init=config.init, name=f"block_{i}"
        )
        x = block(x, mask)
        blocks.append(block)
    if config.copied_layers:
        copy_first_layer(blocks)
    score = dense(
        item_levels or 1, fan_in=config.d_fc, init=config.init, dtype="float32", name="score"
    )
    outputs = score_outputs(score(x), mask, item_levels)
    return tf.keras.Model({FEATURES: features, MASK: mask}, outputs, name="context_aware")


RANKER = "ranker"


def build_model(
    name: str,
    manifest: Manifest | Mapping,
    config: ModelConfig,
    levels: int,
    *,
    item_levels: int | None = None,
) -> tf.keras.Model:
    """The feature-vector model ``name`` for a dataset (``manifest`` may be a mapping such
    as ``{"num_features": d, "normalization": {"method": "none"}}``)."""
    if model_families.is_text(name):
        raise ValueError(f"{name!r} ranks text: build it with listformer.build_text_model")
    config = config.resolved(name)
    manifest = Manifest.coerce(manifest)
    num_features = manifest.num_features
    if num_features is None:
        raise ValueError("the manifest gives no 'num_features'")
    builder = model_families.get_model(name).load_builder()
    ranker = builder(num_features, config, levels, item_levels)
    ranker._name = RANKER
    features, mask = _inputs(num_features)
    normalised = FeatureNormalization.from_manifest(manifest, name="normalization")(features)
    outputs = ranker({FEATURES: normalised, MASK: mask})
    return tf.keras.Model({FEATURES: features, MASK: mask}, outputs, name=name)


def ranker_of(model: tf.keras.Model) -> tf.keras.Model:
    """The nested model that takes normalised features."""
    return model.get_layer(RANKER)


def normalization_of(model: tf.keras.Model) -> tf.keras.layers.Layer:
    """The model's normalisation layer."""
    return model.get_layer("normalization")
