"""The model registry: the RankFormer and its peers as Keras functional models.

Every model takes ``{"features": [B, L, d] float32 raw, "mask": [B, L] bool}``,
normalises the features in-graph from the manifest's statistics, and returns
``{"scores": [B, L] float32}`` (padding items score ``PADDING_SCORE``); models
with a list head also return ``{"list_quality": [B, K]}`` logits of
``P(t >= k)`` for ``k = 1 .. K``.

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
from tfr_rankformer.layers import ClsToken, MaskedScores, PreNormEncoderLayer

__all__ = [
    "ModelConfig",
    "MODELS",
    "build_model",
    "has_list_head",
    "normalization_of",
    "ranker_of",
]


@dataclasses.dataclass(frozen=True)
class ModelConfig:
    """Architecture settings; defaults are the paper's best (Sec. 6.2).

    Attributes:
      num_layers: Transformer encoder layers.
      num_heads: attention heads (the width is the feature count ``d``).
      ff_dim: feed-forward width in each encoder layer.
      dropout: dropout rate throughout.
      head_hidden: hidden width of the score and list heads (one hidden layer).
      mlp_units: hidden widths of the pointwise ``mlp`` baseline.
    """

    num_layers: int = 3
    num_heads: int = 1
    ff_dim: int = 512
    dropout: float = 0.25
    head_hidden: int = 128
    mlp_units: tuple = (512, 256, 128)

    def __post_init__(self):
        require_positive_ints(self, "num_layers", "num_heads", "ff_dim", "head_hidden")
        if not 0.0 <= self.dropout < 1.0:
            raise ValueError(f"`dropout` must lie in [0, 1), got {self.dropout!r}")
        object.__setattr__(self, "mlp_units", tuple(self.mlp_units))


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


def _listwise(num_features: int, config: ModelConfig, levels: int | None, name: str):
    """The RankFormer encoder with score head, and the list head when ``levels``."""
    # === Inputs (normalised features) ===
    features, mask = _inputs(num_features)
    # === Encoder ===
    x, valid = ClsToken(name="cls_token")(features, mask)  # [B, L, d] -> [B, L + 1, d]
    for i in range(config.num_layers):
        x = PreNormEncoderLayer(
            config.num_heads, config.ff_dim, config.dropout, name=f"encoder_{i}"
        )(x, valid)
    x = tf.keras.layers.LayerNormalization(epsilon=1e-5, name="final_norm")(x)
    z_cls = x[:, 0, :]  # [B, d]
    z_items = x[:, 1:, :]  # [B, L, d]
    # === Heads ===
    # h_s(z_i || z_CLS): [B, L, d] and [B, d] -> [B, L, 2d] -> [B, L, 1]
    z_cls_per_item = tf.ones_like(z_items[..., :1]) * z_cls[:, tf.newaxis, :]
    joined = tf.keras.layers.Concatenate(name="item_and_cls")([z_items, z_cls_per_item])
    scores = _head(config.head_hidden, 1, "score_head")(joined)
    outputs = {"scores": MaskedScores(name="scores")(scores, mask)}
    if levels:
        # h_d(z_CLS): [B, d] -> [B, K] logits of P(t >= k).
        logits = _head(config.head_hidden, levels, "list_head")(z_cls)
        outputs["list_quality"] = tf.keras.layers.Activation("linear", name="list_quality")(logits)
    return tf.keras.Model({FEATURES: features, MASK: mask}, outputs, name=name)


def build_rankformer(num_features: int, config: ModelConfig, levels: int) -> tf.keras.Model:
    """The RankFormer: listwise encoder with [CLS], score head and listwide ordinal head."""
    return _listwise(num_features, config, levels, "rankformer")


def build_transformer(num_features: int, config: ModelConfig, levels: int) -> tf.keras.Model:
    """The same encoder and score head without the list head (the paper's alpha = 0)."""
    del levels
    return _listwise(num_features, config, None, "transformer")


def build_mlp(num_features: int, config: ModelConfig, levels: int) -> tf.keras.Model:
    """The pointwise MLP baseline: each item scored alone."""
    del levels
    features, mask = _inputs(num_features)
    x = features
    for i, units in enumerate(config.mlp_units):
        x = tf.keras.layers.Dense(units, activation="relu", name=f"dense_{i}")(x)
        x = tf.keras.layers.Dropout(config.dropout, name=f"dropout_{i}")(x)
    scores = tf.keras.layers.Dense(1, dtype="float32", name="score")(x)  # [B, L, 1]
    outputs = {"scores": MaskedScores(name="scores")(scores, mask)}
    return tf.keras.Model({FEATURES: features, MASK: mask}, outputs, name="mlp")


RANKER = "ranker"


MODELS = {
    "rankformer": build_rankformer,
    "transformer": build_transformer,
    "mlp": build_mlp,
}
_WITH_LIST_HEAD = {"rankformer"}


def has_list_head(name: str) -> bool:
    """Whether the model ``name`` predicts the list label."""
    _check_name(name)
    return name in _WITH_LIST_HEAD


def _check_name(name: str) -> None:
    if name not in MODELS:
        raise ValueError(f"Unknown model {name!r}; choose from {sorted(MODELS)}")


def build_model(name: str, manifest: dict, config: ModelConfig, levels: int) -> tf.keras.Model:
    """Builds the model ``name`` for a converted dataset: normalisation, then the ranker.

    Args:
      name: a key of ``MODELS``.
      manifest: the dataset's manifest (feature count, normalisation statistics).
      config: architecture settings.
      levels: ``K``, list-label levels above 0 (see ``data.label_levels``).
    """
    _check_name(name)
    num_features = manifest["num_features"]
    ranker = MODELS[name](num_features, config, levels)
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
