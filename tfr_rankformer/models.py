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
encoding) and ``summary_token_ranker`` (this project's item-level ranker:
``[CLS]`` and learned summary tokens are the only tokens items attend to, so
items never see each other and cost is linear in the list length).

The Listformer (Reuter, 2022) is a text model over token ids: it lives in
``listformer`` (``TEXT_MODELS``); its settings are ``ModelConfig`` fields too.

The RankFormer family's defaults follow the authors' released code: no final
LayerNorm, heads ``Linear, ReLU, Dropout, Linear``, ``[CLS]`` drawn from
``N(0, 1)``, PyTorch's initialisation, and without a list head (alpha = 0,
``transformer``) the encoder alone with ``h_s(z_i)`` and no ``[CLS]``.
``ModelConfig`` fields bring back the other variants.

A model is the normalisation layer followed by a nested model, the *ranker*
(``ranker_of``), which takes normalised features. Training fits the ranker on
features normalised once in the input pipeline; checkpoints, evaluation and
serving use the whole model on raw features.
"""

from __future__ import annotations

import dataclasses

import tensorflow as tf

from tfr_rankformer.command_names import ATTENTIONS, TEXT_MODEL_NAMES
from tfr_rankformer.config_io import require_positive_ints
from tfr_rankformer.data import MASK
from tfr_rankformer.elwc_schema import FEATURES
from tfr_rankformer.encoder_layer import PreNormEncoderLayer
from tfr_rankformer.feature_normalization import FeatureNormalization
from tfr_rankformer.initializers import INITIALIZATIONS, dense
from tfr_rankformer.layers import (
    ClsToken,
    FastDropout,
    ItemAndContextHead,
    KeyedDropout,
    LayerNorm,
    MaskedScores,
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
    "TEXT_MODEL_NAMES",
    "PRESETS",
    "LOSS_PRESETS",
    "build_model",
    "has_list_head",
    "normalization_of",
    "ranker_of",
    "score_outputs",
]


# Each model's defaults; ``ModelConfig`` fields left ``None`` take them.
_ENCODER = dict(num_layers=3, num_heads=1, ff_dim=512, dropout=0.25, head_hidden=128)
PRESETS = {
    # The RankFormer paper's best (Sec. 6.2); [CLS] and the z_i || z_CLS head
    # only with a list head (see TrainConfig), as in the released code.
    "rankformer": dict(_ENCODER, cls_token=True),
    # The released code's alpha = 0 model: the encoder alone, h_s(z_i).
    "transformer": dict(_ENCODER, cls_token=False),
    "mlp": dict(dropout=0.25, mlp_units=(512, 256, 128)),
    # Pobrotyn et al.'s best MSLR-WEB30K setting (allRank's ordinal configuration),
    # initialised as allRank does (Xavier-uniform weights).
    "context_aware": dict(
        num_layers=4, num_heads=2, ff_dim=512, dropout=0.4, d_fc=144, init="keras"
    ),
    # This project's item-level ranker: the RankFormer's encoder and heads, with
    # [CLS] and learned summary tokens as the only tokens the items attend to.
    "summary_token_ranker": dict(_ENCODER, global_tokens=4, cls_token=True),
    # The Listformer (text), trained from scratch: a small encoder, CPU-sized; the
    # thesis fine-tuned Longformer-base (12 layers, width 768), which cannot be
    # fetched here. Window 256 per side is Longformer-base's 512 in all.
    "listformer": dict(
        num_layers=2,
        num_heads=2,
        ff_dim=256,
        dropout=0.1,
        head_hidden=128,
        width=128,
        attention_window=256,
        max_positions=512,
        init="keras",
        copied_layers=False,
    ),
}
# Models over text (``listformer.TEXT_MODELS``), not feature vectors:
# ``TEXT_MODEL_NAMES``, from ``command_names``.
# allRank's published configuration per loss, where it differs from the
# model's preset (reproducibility/configs/contextaware_web30k/ndcgloss2pp.json).
LOSS_PRESETS = {
    ("context_aware", "ndcg_loss2pp"): dict(d_fc=128, num_heads=4, dropout=0.3),
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
    cls_token=True,
    final_norm=False,
    head_dropout=None,  # the model's `dropout`, as the released heads
    cls_stddev=1.0,
    init="pytorch",
    copied_layers=True,
    width=128,
    attention_window=256,
    attention="blocked",
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
      max_positions: positions a ``learned`` encoding has embeddings for; the
        ``listformer``'s position table (queries and documents must be shorter).
      global_tokens: ``summary_token_ranker``'s learned summary tokens besides ``[CLS]``.
      cls_token: listwise encoders: prepend the learnable ``[CLS]`` and score
        ``h_s(z_i || z_CLS)``; off, the encoder alone scores ``h_s(z_i)`` (the
        released code's alpha = 0). A list head needs it.
      final_norm: a LayerNorm after the last encoder layer (the released code has
        none).
      head_dropout: dropout in the score and list heads, between their ReLU and
        their output layer; ``None``: ``dropout``, as the released code.
      cls_stddev: the ``[CLS]`` vector's initial values are ``N(0, cls_stddev^2)``
        (released: 1, a ``torch.nn.Embedding``).
      init: weight initialisation, ``pytorch`` (``torch.nn.Linear``'s, the
        released code's) or ``keras`` (Glorot-uniform, zero biases); see
        ``initializers``.
      copied_layers: every encoder layer starts from the first one's initial
        weights, as in the released code (``torch.nn.TransformerEncoder``
        deep-copies the one layer it is given) and allRank (whose ``clones``
        deep-copy too); off, each layer draws its own (this project's earlier
        variant; the ``listformer``'s default).
      width: ``listformer``: the embedding and encoder width (the numeric
        models' width is their feature count).
      attention_window: ``listformer``: a document's token attends to its
        document's tokens at most this many positions away (on each side).
      attention: ``listformer``: ``blocked`` (per-document blocks, memory linear
        in the documents), ``dense_masked`` (the same attention through the
        full masked matrix, for checking) or ``full`` (plain full attention over
        the same sequence: a baseline, not the Listformer).
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
    cls_token: bool | None = None
    final_norm: bool | None = None
    head_dropout: float | None = None
    cls_stddev: float | None = None
    init: str | None = None
    copied_layers: bool | None = None
    width: int | None = None
    attention_window: int | None = None
    attention: str | None = None

    def __post_init__(self):
        names = ("num_layers", "num_heads", "ff_dim", "head_hidden", "d_fc", "max_positions")
        names += ("width", "attention_window")
        require_positive_ints(self, *names, optional=True)
        if self.global_tokens is not None and (
            isinstance(self.global_tokens, bool)
            or not isinstance(self.global_tokens, int)
            or self.global_tokens < 0
        ):
            raise ValueError(f"`global_tokens` must be an int >= 0, got {self.global_tokens!r}")
        for name in ("dropout", "head_dropout"):
            rate = getattr(self, name)
            if rate is not None and not 0.0 <= rate < 1.0:
                raise ValueError(f"`{name}` must lie in [0, 1), got {rate!r}")
        if self.cls_stddev is not None and not self.cls_stddev > 0:
            raise ValueError(f"`cls_stddev` must be > 0, got {self.cls_stddev!r}")
        if self.init is not None and self.init not in INITIALIZATIONS:
            raise ValueError(f"`init` must be one of {list(INITIALIZATIONS)}, got {self.init!r}")
        if self.attention is not None and self.attention not in ATTENTIONS:
            raise ValueError(
                f"`attention` must be one of {list(ATTENTIONS)}, got {self.attention!r}"
            )
        if self.mlp_units is not None:
            object.__setattr__(self, "mlp_units", tuple(self.mlp_units))
        encoding = self.positional_encoding
        if encoding is not None and encoding not in POSITIONAL_ENCODINGS:
            raise ValueError(
                f"`positional_encoding` must be one of {list(POSITIONAL_ENCODINGS)}, "
                f"got {encoding!r}"
            )

    def resolved(self, model: str, loss: str | None = None) -> ModelConfig:
        """Every ``None`` replaced by ``model``'s default (for ``loss``, where it has one)."""
        _check_name(model)
        defaults = {**_BASE, **PRESETS[model], **LOSS_PRESETS.get((model, loss), {})}
        values = {
            f.name: defaults[f.name] if getattr(self, f.name) is None else getattr(self, f.name)
            for f in dataclasses.fields(self)
        }
        if values["positional_encoding"] != "none" and model != "context_aware":
            raise ValueError(f"{model!r} takes no positional encoding (context_aware does)")
        if values["head_dropout"] is None:
            values["head_dropout"] = values["dropout"]
        if model == "summary_token_ranker" and not values["cls_token"]:
            raise ValueError(
                "summary_token_ranker's [CLS] is one of its global tokens: it needs `cls_token`"
            )
        if model == "listformer" and values["width"] % values["num_heads"]:
            raise ValueError(
                f"`width` {values['width']} is not divisible by `num_heads` {values['num_heads']}"
            )
        return ModelConfig(**values)


def copy_first_layer(layers: list) -> None:
    """Sets every built layer's weights to the first one's (``copied_layers``)."""
    first = layers[0].get_weights()
    for layer in layers[1:]:
        layer.set_weights(first)


def _inputs(num_features: int):
    features = tf.keras.Input(shape=(None, num_features), dtype=tf.float32, name=FEATURES)
    mask = tf.keras.Input(shape=(None,), dtype=tf.bool, name=MASK)
    return features, mask


def _head(fan_in: int, config: ModelConfig, outputs: int, name: str) -> tf.keras.Sequential:
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


def score_outputs(raw, mask, item_levels: int | None) -> dict:
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
    encoder layers use global-local attention (Listformer). Without
    ``config.cls_token`` the encoder runs on the items alone and scores
    ``h_s(z_i)``.
    """
    if levels and not config.cls_token:
        raise ValueError("a list head reads the [CLS] token: it needs `cls_token`")
    # === Inputs (normalised features) ===
    features, mask = _inputs(num_features)
    # === Encoder ===
    x, valid, lead = features, mask, 0
    if config.cls_token:
        cls = ClsToken(config.cls_stddev, name="cls_token")
        x, valid = cls(features, mask)  # [B, L, d] -> [B, L + 1, d]
        lead = 1
    if glob:
        x, valid = GlobalTokens(glob, name="global_tokens")(x, valid)  # [B, glob + L + 1, d]
        lead += glob
    encoder = []
    for i in range(config.num_layers):
        settings = dict(
            num_heads=config.num_heads,
            ff_dim=config.ff_dim,
            dropout=config.dropout,
            init=config.init,
        )
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
    # [B, lead + L, d] -> [B, lead, d] and [B, L, d]; split, not sliced: a slice's
    # gradient zero-fills a copy of the whole tensor, which cost 5% of a step.
    leading, z_items = tf.split(x, [lead, -1], axis=1) if lead else (None, x)
    # === Heads ===
    outs = item_levels or 1
    if config.cls_token:
        z_cls = leading[:, glob, :]  # [B, d]
        # h_s(z_i || z_CLS): [B, L, d] and [B, d] -> [B, L, outs]
        score_head = ItemAndContextHead(
            config.head_hidden,
            outs,
            dropout=config.head_dropout,
            init=config.init,
            name="score_head",
        )
        raw = score_head(z_items, z_cls)
    else:
        # h_s(z_i): [B, L, d] -> [B, L, outs]
        raw = _head(num_features, config, outs, "score_head")(z_items)
    outputs = score_outputs(raw, mask, item_levels)
    if levels:
        # h_d(z_CLS): [B, d] -> [B, K] logits of P(t >= k).
        logits = _head(num_features, config, levels, "list_head")(z_cls)
        outputs["list_quality"] = tf.keras.layers.Activation("linear", name="list_quality")(logits)
    return tf.keras.Model({FEATURES: features, MASK: mask}, outputs, name=name)


def build_rankformer(num_features, config: ModelConfig, levels: int, item_levels=None):
    """The RankFormer: listwise encoder with [CLS], score head and listwide ordinal head.

    ``levels`` ``None`` or 0 (alpha = 0) builds no list head.
    """
    return _listwise(num_features, config, levels, item_levels, "rankformer")


def build_transformer(num_features, config: ModelConfig, levels: int, item_levels=None):
    """The same encoder without the list head (the paper's alpha = 0): by default,
    as the released code, without ``[CLS]`` either, scoring ``h_s(z_i)``."""
    del levels
    return _listwise(num_features, config, None, item_levels, "transformer")


def build_summary_token_ranker(num_features, config: ModelConfig, levels: int, item_levels=None):
    """This project's item-level ranker: the RankFormer's heads on an encoder whose
    items attend only to ``[CLS]``, ``global_tokens`` learned summary tokens and
    themselves (never to each other), so cost grows linearly with the list."""
    glob = config.global_tokens
    return _listwise(num_features, config, levels, item_levels, "summary_token_ranker", glob=glob)


def build_mlp(num_features, config: ModelConfig, levels: int, item_levels=None):
    """The pointwise MLP baseline: each item scored alone."""
    del levels
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
    del levels
    features, mask = _inputs(num_features)
    # The projection is linear, as in allRank's published configuration (our reading).
    projection = dense(config.d_fc, fan_in=num_features, init=config.init, name="input_projection")
    x = projection(features)  # [B, L, d] -> [B, L, d_fc]
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
    raw = score(x)
    outputs = score_outputs(raw, mask, item_levels)
    return tf.keras.Model({FEATURES: features, MASK: mask}, outputs, name="context_aware")


RANKER = "ranker"


MODELS = {
    "rankformer": build_rankformer,
    "transformer": build_transformer,
    "mlp": build_mlp,
    "context_aware": build_context_aware,
    "summary_token_ranker": build_summary_token_ranker,
}
_WITH_LIST_HEAD = {"rankformer", "summary_token_ranker", "listformer"}


def has_list_head(name: str) -> bool:
    """Whether the model ``name`` predicts the list label."""
    _check_name(name)
    return name in _WITH_LIST_HEAD


def _check_name(name: str) -> None:
    if name not in MODELS and name not in TEXT_MODEL_NAMES:
        choices = sorted([*MODELS, *TEXT_MODEL_NAMES])
        raise ValueError(f"Unknown model {name!r}; choose from {choices}")


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
    if name in TEXT_MODEL_NAMES:
        raise ValueError(f"{name!r} ranks text: build it with listformer.build_text_model")
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
