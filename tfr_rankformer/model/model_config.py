"""Architecture settings: ``ModelConfig``, resolved with each model's defaults.

A ``ModelConfig`` field left ``None`` takes the model's default
(``ModelConfig.resolved``): its ``model_families.ModelSpec``'s
``loss_architecture`` where allRank published a setting for the loss, else its
``architecture``, else the value every model shares. The RankFormer family's
defaults follow the authors' released code; ``ModelConfig`` fields bring back
the other variants (see ``models``).

No TensorFlow here: the settings are checked and resolved without building
anything.
"""

from __future__ import annotations

import dataclasses

from tfr_rankformer.core import model_families
from tfr_rankformer.core.command_names import ATTENTIONS, INITIALIZATIONS, SIMILARITIES
from tfr_rankformer.core.config_io import require_positive_ints

__all__ = [
    "ModelConfig",
    "POSITIONAL_ENCODINGS",
    "check_model_name",
]


# The value every model shares; each model's own defaults are its
# ``model_families.ModelSpec``'s ``architecture`` (and ``loss_architecture``).
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
    """Architecture settings; ``None`` takes the model's default (its ``ModelSpec``).

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
        spec = model_families.get_model(model)
        defaults = {**_BASE, **spec.architecture, **spec.loss_architecture.get(loss, {})}
        values = {
            f.name: defaults[f.name] if getattr(self, f.name) is None else getattr(self, f.name)
            for f in dataclasses.fields(self)
        }
        if values["positional_encoding"] != "none" and not spec.positional_encoding:
            takes = [n for n in _neural_names() if model_families.get_model(n).positional_encoding]
            raise ValueError(
                f"{model!r} takes no positional encoding ({', '.join(takes) or 'none'} does)"
            )
        if values["head_dropout"] is None:
            values["head_dropout"] = values["dropout"]
        if spec.summary_tokens and not values["cls_token"]:
            raise ValueError(f"{model}'s [CLS] is one of its global tokens: it needs `cls_token`")
        width = values[spec.item_width] if spec.heads_split_width else None
        if width is not None and width % values["num_heads"]:
            raise ValueError(
                f"`{spec.item_width}` {width} is not divisible by `num_heads` {values['num_heads']}"
            )
        return ModelConfig(**values)


def _neural_names() -> tuple[str, ...]:
    return model_families.model_names(model_families.NEURAL_KINDS)


def check_model_name(name: str) -> None:
    """Raises ``ValueError`` unless ``name`` is a neural model of ``model_families``
    (feature vectors or text)."""
    if not model_families.is_neural(name):
        raise ValueError(f"Unknown model {name!r}; choose from {sorted(_neural_names())}")
