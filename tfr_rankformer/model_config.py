"""Architecture settings: ``ModelConfig``, and each model's defaults (``PRESETS``).

A ``ModelConfig`` field left ``None`` takes the model's default
(``ModelConfig.resolved``): ``LOSS_PRESETS`` where allRank published a setting
for the loss, else the model's ``PRESETS`` entry, else the value every model
shares. The RankFormer family's defaults follow the authors' released code;
``ModelConfig`` fields bring back the other variants (see ``models``).

No TensorFlow here: the settings are checked and resolved without building
anything.
"""

from __future__ import annotations

import dataclasses

from tfr_rankformer.command_names import ATTENTIONS, INITIALIZATIONS, MODEL_NAMES, SIMILARITIES
from tfr_rankformer.config_io import require_positive_ints

__all__ = [
    "ModelConfig",
    "PRESETS",
    "LOSS_PRESETS",
    "POSITIONAL_ENCODINGS",
    "check_model_name",
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
    match_marks=False,
    similarity="none",
    first_stage=None,  # the text family decides by the data (on where it has the scores)
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
      match_marks: ``listformer``: exact-match marks, as MarkedBERT's (Boualili
        et al., SIGIR 2020) but as embeddings rather than marker tokens: query
        token ``i`` and every document token equal to it get a learned vector
        ``m_i`` (zero at first, so a pretrained start is unchanged). Not in the
        thesis; off by default.
      similarity: ``listformer``: ``checkpoint``: a frozen copy of the
        ``--init-from`` checkpoint scores each document by its own cosine, and
        the score is a residual over it (``score_mixture``); ``none``. Not in
        the thesis; ``checkpoint`` by default with ``--init-from``.
      first_stage: ``listformer``: the first stage's score of each document
        (the run's, which ``tfr-convert --input trec`` keeps) joins that
        residual. Not in the thesis; ``None``: on where the data has the scores.
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
    match_marks: bool | None = None
    similarity: str | None = None
    first_stage: bool | None = None

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
        if self.similarity is not None and self.similarity not in SIMILARITIES:
            raise ValueError(
                f"`similarity` must be one of {list(SIMILARITIES)}, got {self.similarity!r}"
            )
        if self.first_stage is not None and not isinstance(self.first_stage, bool):
            raise ValueError(f"`first_stage` must be true or false, got {self.first_stage!r}")
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
        check_model_name(model)
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


def check_model_name(name: str) -> None:
    """Raises ``ValueError`` unless ``name`` is a neural model (``models.MODELS`` or
    ``models.TEXT_MODEL_NAMES``, both in ``command_names.MODEL_NAMES``)."""
    if name not in MODEL_NAMES:
        raise ValueError(f"Unknown model {name!r}; choose from {sorted(MODEL_NAMES)}")
