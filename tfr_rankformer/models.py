"""The model registry: the RankFormer and its peers as Keras functional models.

Every model takes ``{"features": [B, L, d] float32 raw, "mask": [B, L] bool}``,
normalises the features in-graph from the manifest's statistics, and returns
``{"scores": [B, L] float32}`` (padding items score ``PADDING_SCORE``); models
with a list head also return ``{"list_quality": [B, K]}`` logits of
``P(t >= k)`` for ``k = 1 .. K``, and models built for the item-level ordinal
loss ``{"item_levels": [B, L, K]}`` logits (their score is the sum of the
level probabilities).

Models: ``rankformer``, ``transformer`` (no list head), ``mlp`` (pointwise),
``context_aware`` (allRank's post-LayerNorm encoder, optional positional
encoding) and ``listformer`` (global-local attention, the RankFormer's heads).

A model is the normalisation layer followed by a nested model, the *ranker*
(``ranker_of``), which takes normalised features. Training fits the ranker on
features normalised once in the input pipeline; checkpoints, evaluation and
serving use the whole model on raw features.
"""

from __future__ import annotations

import dataclasses

import tensorflow as tf

from tfr_rankformer.config_io import require_positive_ints
from tfr_rankformer.data import MASK
from tfr_rankformer.elwc_schema import FEATURES
from tfr_rankformer.feature_normalization import FeatureNormalization
from tfr_rankformer.layers import (
    ClsToken,
    ItemAndContextHead,
    LayerNorm,
    MaskedScores,
    PreNormEncoderLayer,
)
from tfr_rankformer.peer_layers import (
    GlobalLocalEncoderLayer,
    GlobalTokens,
    LearnedPositionalEncoding,
    PostNormEncoderLayer,
    SinusoidalPositionalEncoding,
)

__all__ = [
    "ModelConfig",
    "MODELS",
    "PRESETS",
    "DEFAULT_ALPHA",
    "build_model",
    "has_list_head",
    "normalization_of",
    "ranker_of",
]


# Each model's defaults; ``ModelConfig`` fields left ``None`` take them.
_ENCODER = dict(num_layers=3, num_heads=1, ff_dim=512, dropout=0.25, head_hidden=128)
PRESETS = {
    # The RankFormer paper's best (Sec. 6.2), also for its alpha = 0 ablation.
    "rankformer": _ENCODER,
    "transformer": _ENCODER,
    "mlp": dict(dropout=0.25, mlp_units=(512, 256, 128)),
    # Pobrotyn et al.'s best MSLR-WEB30K setting.
    "context_aware": dict(num_layers=4, num_heads=2, ff_dim=512, dropout=0.4, d_fc=144),
    # The RankFormer's encoder and heads with global-local attention.
    "listformer": dict(_ENCODER, global_tokens=4),
}
_BASE = dict(
    num_layers=3,
    num_heads=1,
    ff_dim=512,
    dropout=0.25,
    head_hidden=128,
    mlp_units=(512, 256, 128),
    d_fc=144,
    positional_encoding="none",
    max_positions=1024,
    global_tokens=4,
)
POSITIONAL_ENCODINGS = ("none", "fixed", "learned")


@dataclasses.dataclass(frozen=True)
class ModelConfig:
    """Architecture settings; ``None`` takes the model's default (``PRESETS``).

    Attributes:
      num_layers: encoder layers (blocks).
      num_heads: attention heads (the width must be divisible by it).
      ff_dim: feed-forward width in each encoder layer.
      dropout: dropout rate throughout.
      head_hidden: hidden width of the score and list heads (one hidden layer).
      mlp_units: hidden widths of the pointwise ``mlp`` baseline.
      d_fc: width of ``context_aware``'s shared input projection (its encoder width).
      positional_encoding: ``context_aware`` only: ``none``, ``fixed``
        (sinusoidal over the input order) or ``learned``.
      max_positions: positions a ``learned`` encoding has embeddings for.
      global_tokens: ``listformer``'s learned summary tokens besides ``[CLS]``.
    """

    num_layers: int | None = None
    num_heads: int | None = None
    ff_dim: int | None = None
    dropout: float | None = None
    head_hidden: int | None = None
    mlp_units: tuple | None = None
    d_fc: int | None = None
    positional_encoding: str | None = None
    max_positions: int | None = None
    global_tokens: int | None = None

    def __post_init__(self):
        names = ("num_layers", "num_heads", "ff_dim", "head_hidden", "d_fc", "max_positions")
        require_positive_ints(self, *names, optional=True)
        if self.global_tokens is not None and (
            isinstance(self.global_tokens, bool)
            or not isinstance(self.global_tokens, int)
            or self.global_tokens < 0
        ):
            raise ValueError(f"`global_tokens` must be an int >= 0, got {self.global_tokens!r}")
        if self.dropout is not None and not 0.0 <= self.dropout < 1.0:
            raise ValueError(f"`dropout` must lie in [0, 1), got {self.dropout!r}")
        if self.mlp_units is not None:
            object.__setattr__(self, "mlp_units", tuple(self.mlp_units))
        encoding = self.positional_encoding
        if encoding is not None and encoding not in POSITIONAL_ENCODINGS:
            raise ValueError(
                f"`positional_encoding` must be one of {list(POSITIONAL_ENCODINGS)}, "
                f"got {encoding!r}"
            )

    def resolved(self, model: str) -> ModelConfig:
        """Every ``None`` replaced by ``model``'s default."""
        _check_name(model)
        defaults = {**_BASE, **PRESETS[model]}
        values = {
            f.name: defaults[f.name] if getattr(self, f.name) is None else getattr(self, f.name)
            for f in dataclasses.fields(self)
        }
        if values["positional_encoding"] != "none" and model != "context_aware":
            raise ValueError(f"{model!r} takes no positional encoding (context_aware does)")
        return ModelConfig(**values)


def _inputs(num_features: int):
    features = tf.keras.Input(shape=(None, num_features), dtype=tf.float32, name=FEATURES)
    mask = tf.keras.Input(shape=(None,), dtype=tf.bool, name=MASK)
    return features, mask


def _head(hidden: int, outputs: int, name: str) -> tf.keras.Sequential:
    # The paper's heads are MLPs with one hidden layer; ReLU is our choice there.
    return tf.keras.Sequential(
        [
            tf.keras.layers.Dense(hidden, activation="relu"),
            tf.keras.layers.Dense(outputs, dtype="float32"),
        ],
        name=name,
    )


def _score_outputs(raw, mask, item_levels: int | None) -> dict:
    """``scores`` from a score layer's ``[B, L, 1]`` output or, with ``item_levels``
    ``K``, from ``[B, L, K]`` level logits: the sum of the level probabilities
    (the ordinal loss's score), with the logits as ``item_levels``."""
    if not item_levels:
        return {"scores": MaskedScores(name="scores")(raw, mask)}
    logits = tf.keras.layers.Activation("linear", dtype="float32", name="item_levels")(raw)
    expected = tf.reduce_sum(tf.sigmoid(logits), axis=-1, keepdims=True)  # [B, L, 1]
    return {"scores": MaskedScores(name="scores")(expected, mask), "item_levels": logits}


def _listwise(num_features, config: ModelConfig, levels, item_levels, name: str, *, glob=0):
    """The RankFormer encoder with score head, and the list head when ``levels``.

    With ``glob`` > 0, ``glob`` learned summary tokens join ``[CLS]`` and the
    encoder layers use global-local attention (Listformer).
    """
    # === Inputs (normalised features) ===
    features, mask = _inputs(num_features)
    # === Encoder ===
    x, valid = ClsToken(name="cls_token")(features, mask)  # [B, L, d] -> [B, L + 1, d]
    if glob:
        x, valid = GlobalTokens(glob, name="global_tokens")(x, valid)  # [B, glob + L + 1, d]
    for i in range(config.num_layers):
        settings = dict(num_heads=config.num_heads, ff_dim=config.ff_dim, dropout=config.dropout)
        if glob:
            layer = GlobalLocalEncoderLayer(num_global=glob + 1, name=f"encoder_{i}", **settings)
        else:
            layer = PreNormEncoderLayer(name=f"encoder_{i}", **settings)
        x = layer(x, valid)
    x = LayerNorm(epsilon=1e-5, name="final_norm")(x)
    z_cls = x[:, glob, :]  # [B, d]
    z_items = x[:, glob + 1 :, :]  # [B, L, d]
    # === Heads ===
    # h_s(z_i || z_CLS): [B, L, d] and [B, d] -> [B, L, 1] (or [B, L, K])
    raw = ItemAndContextHead(config.head_hidden, item_levels or 1, name="score_head")(
        z_items, z_cls
    )
    outputs = _score_outputs(raw, mask, item_levels)
    if levels:
        # h_d(z_CLS): [B, d] -> [B, K] logits of P(t >= k).
        logits = _head(config.head_hidden, levels, "list_head")(z_cls)
        outputs["list_quality"] = tf.keras.layers.Activation("linear", name="list_quality")(logits)
    return tf.keras.Model({FEATURES: features, MASK: mask}, outputs, name=name)


def build_rankformer(num_features, config: ModelConfig, levels: int, item_levels=None):
    """The RankFormer: listwise encoder with [CLS], score head and listwide ordinal head."""
    return _listwise(num_features, config, levels, item_levels, "rankformer")


def build_transformer(num_features, config: ModelConfig, levels: int, item_levels=None):
    """The same encoder and score head without the list head (the paper's alpha = 0)."""
    del levels
    return _listwise(num_features, config, None, item_levels, "transformer")


def build_listformer(num_features, config: ModelConfig, levels: int, item_levels=None):
    """The RankFormer's heads on Listformer's global-local attention encoder."""
    glob = config.global_tokens
    return _listwise(num_features, config, levels, item_levels, "listformer", glob=glob)


def build_mlp(num_features, config: ModelConfig, levels: int, item_levels=None):
    """The pointwise MLP baseline: each item scored alone."""
    del levels
    features, mask = _inputs(num_features)
    x = features
    for i, units in enumerate(config.mlp_units):
        x = tf.keras.layers.Dense(units, activation="relu", name=f"dense_{i}")(x)
        x = tf.keras.layers.Dropout(config.dropout, name=f"dropout_{i}")(x)
    raw = tf.keras.layers.Dense(item_levels or 1, dtype="float32", name="score")(x)
    outputs = _score_outputs(raw, mask, item_levels)
    return tf.keras.Model({FEATURES: features, MASK: mask}, outputs, name="mlp")


def build_context_aware(num_features, config: ModelConfig, levels: int, item_levels=None):
    """allRank's context-aware ranker: a shared projection to ``d_fc``, post-LayerNorm
    encoder blocks over the list, a shared linear scoring layer."""
    del levels
    features, mask = _inputs(num_features)
    # The projection is linear, as in allRank's published configuration (our reading).
    x = tf.keras.layers.Dense(config.d_fc, name="input_projection")(features)  # [B, L, d_fc]
    if config.positional_encoding == "fixed":
        x = SinusoidalPositionalEncoding(name="positional_encoding")(x)
    elif config.positional_encoding == "learned":
        x = LearnedPositionalEncoding(config.max_positions, name="positional_encoding")(x)
    for i in range(config.num_layers):
        x = PostNormEncoderLayer(
            config.num_heads, config.ff_dim, config.dropout, name=f"block_{i}"
        )(x, mask)
    raw = tf.keras.layers.Dense(item_levels or 1, dtype="float32", name="score")(x)
    outputs = _score_outputs(raw, mask, item_levels)
    return tf.keras.Model({FEATURES: features, MASK: mask}, outputs, name="context_aware")


RANKER = "ranker"


MODELS = {
    "rankformer": build_rankformer,
    "transformer": build_transformer,
    "mlp": build_mlp,
    "context_aware": build_context_aware,
    "listformer": build_listformer,
}
_WITH_LIST_HEAD = {"rankformer", "listformer"}
# The listwide loss's weight when none is given: the RankFormer's best; the
# Listformer's head is optional (its paper has none).
DEFAULT_ALPHA = {"rankformer": 0.25, "listformer": 0.0}


def has_list_head(name: str) -> bool:
    """Whether the model ``name`` predicts the list label."""
    _check_name(name)
    return name in _WITH_LIST_HEAD


def _check_name(name: str) -> None:
    if name not in MODELS:
        raise ValueError(f"Unknown model {name!r}; choose from {sorted(MODELS)}")


def build_model(
    name: str,
    manifest: dict,
    config: ModelConfig,
    levels: int,
    *,
    item_levels: int | None = None,
) -> tf.keras.Model:
    """Builds the model ``name`` for a converted dataset: normalisation, then the ranker.

    Args:
      name: a key of ``MODELS``.
      manifest: the dataset's manifest (feature count, normalisation statistics).
      config: architecture settings (``None`` fields take the model's defaults).
      levels: ``K``, list-label levels above 0 (see ``data.label_levels``).
      item_levels: for the item-level ordinal loss, the label levels each item
        gets a logit for (the ``item_levels`` output); ``None``: one score.
    """
    _check_name(name)
    config = config.resolved(name)
    num_features = manifest["num_features"]
    ranker = MODELS[name](num_features, config, levels, item_levels)
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
