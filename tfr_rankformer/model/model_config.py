"""Architecture settings: ``ModelConfig``, resolved with each model's defaults.

A field left ``None`` takes the model's default (``ModelConfig.resolved``): its
``ModelSpec``'s ``loss_architecture`` for the loss, else its ``architecture``, else the
value every model shares. No TensorFlow here.
"""

from __future__ import annotations

import argparse
import dataclasses

from tfr_rankformer.core import model_families
from tfr_rankformer.core.command_names import ATTENTIONS, INITIALIZATIONS, SIMILARITIES
from tfr_rankformer.core.config_io import check_fields, on_off, require_positive_ints, setting
from tfr_rankformer.inputs.list_limit import ListLimit

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


_SWITCH = {"action": argparse.BooleanOptionalAction}


@dataclasses.dataclass(frozen=True)
class ModelConfig:
    """Architecture settings; ``None`` takes the model's default (its ``ModelSpec``). Each
    field's help says what it is; ``models`` builds them."""

    num_layers: int | None = setting(None, "encoder layers (blocks)")
    num_heads: int | None = setting(None, "attention heads")
    ff_dim: int | None = setting(None, "feed-forward width")
    dropout: float | None = setting(None, "dropout rate")
    head_hidden: int | None = setting(None, "hidden width of the heads")
    mlp_units: tuple | None = None  # the mlp baseline's hidden widths
    d_fc: int | None = setting(None, "context_aware: width of the input projection. Default: 144")
    positional_encoding: str | None = setting(
        None,
        "context_aware: encode each item's position in the input order (fixed: sinusoidal), "
        "for re-ranking a first stage's order; training lists are then cut to their first "
        "items, never sampled. Default: none (permutation-equivariant)",
        choices=list(POSITIONAL_ENCODINGS),
    )
    max_positions: int | None = setting(
        None,
        "longest list a learned positional encoding takes (context_aware), or the "
        "listformer's position embeddings (its token caps must stay below it). Default: "
        "1024; listformer: 512",
    )
    global_tokens: int | None = setting(
        None, "summary_token_ranker: learned summary tokens besides [CLS]. Default: 4"
    )
    cls_token: bool | None = setting(
        None,
        "rankformer, transformer: prepend the learnable [CLS] and score h_s(z_i || z_CLS) "
        "(needed by a list head). Default: only with a list head (alpha > 0), as the "
        "authors' code; --cls-token gives the transformer a [CLS] without a list head",
        **_SWITCH,
    )
    final_norm: bool | None = setting(
        None,
        "a LayerNorm after the last encoder layer. Default: none (the authors' code)",
        **_SWITCH,
    )
    head_dropout: float | None = setting(
        None,
        "dropout between the heads' ReLU and output layer. Default: --dropout (the authors' "
        "code); 0: none",
    )
    cls_stddev: float | None = setting(
        None,
        "standard deviation of the [CLS] vector's initial values. Default: 1 (the authors' "
        "torch.nn.Embedding)",
    )
    init: str | None = setting(
        None,
        "weight initialisation: pytorch (torch.nn.Linear's, the authors' code) or keras "
        "(Glorot-uniform, zero biases). Default: pytorch; context_aware: keras (allRank's "
        "Xavier)",
        choices=list(INITIALIZATIONS),
    )
    copied_layers: bool | None = setting(
        None,
        "every encoder layer starts from the first layer's initial weights, as in the "
        "authors' code (torch.nn.TransformerEncoder deep-copies its layer) and allRank (its "
        "clones). Default: on; listformer: off. --no-copied-layers draws each layer's "
        "weights on its own",
        **_SWITCH,
    )
    width: int | None = setting(None, "listformer: embedding and encoder width. Default: 128")
    attention_window: int | None = setting(
        None,
        "listformer: a document's token attends to its document's tokens at most this many "
        "positions away on each side (Longformer's sliding window, cut at the document's "
        "borders). Default: 256",
    )
    attention: str | None = setting(
        None,
        "listformer: blocked (per-document blocks, memory linear in the documents), "
        "dense_masked (the same attention through the full masked matrix, for checking) or "
        "full (plain full attention over the same sequence: a baseline, not the "
        "Listformer). Default: blocked",
        choices=list(ATTENTIONS),
    )
    match_marks: bool | None = setting(
        None,
        "listformer: exact-match marks (MarkedBERT's, as embeddings): query token i and "
        "every document token equal to it get a learned vector m_i, zero at first. Not in "
        "the thesis. Default: off",
        **_SWITCH,
    )
    similarity: str | None = setting(
        None,
        "listformer: checkpoint: a frozen copy of the --init-from checkpoint scores each "
        "document by its own cosine (mean-pooled embeddings), and the model's score is a "
        "residual over it, so it ranks as the checkpoint does before its first step; none. "
        "Not in the thesis. Default: checkpoint with --init-from, else none",
        choices=list(SIMILARITIES),
    )
    first_stage: bool | None = setting(
        None,
        "listformer: add the first stage's score of each document (the run's, kept by "
        "tfr-convert --input trec) to that residual, standardised per list with a learned "
        "weight. Not in the thesis. Default: auto (on where the data has the scores)",
        type=on_off,
        metavar="{auto,on,off}",
    )

    def __post_init__(self):
        check_fields(self)
        names = ("num_layers", "num_heads", "ff_dim", "head_hidden", "d_fc", "max_positions")
        require_positive_ints(self, *names, "width", "attention_window", optional=True)
        if self.global_tokens is not None and self.global_tokens < 0:
            raise ValueError(f"`global_tokens` must be an int >= 0, got {self.global_tokens!r}")
        for name in ("dropout", "head_dropout"):
            rate = getattr(self, name)
            if rate is not None and not 0.0 <= rate < 1.0:
                raise ValueError(f"`{name}` must lie in [0, 1), got {rate!r}")
        if self.cls_stddev is not None and not self.cls_stddev > 0:
            raise ValueError(f"`cls_stddev` must be > 0, got {self.cls_stddev!r}")
        if self.mlp_units is not None:
            object.__setattr__(self, "mlp_units", tuple(self.mlp_units))

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

    def list_limit(self) -> ListLimit | None:
        """The most items a list may hold (``None``: any): a learned position table's."""
        if self.positional_encoding != "learned":
            return None
        return ListLimit(
            self.max_positions,
            f"its learned positional encoding's --max-positions {self.max_positions}",
            "set --max-positions {longest} or more, or --positional-encoding fixed (--list-size "
            "cuts only training lists: evaluation scores whole ones)",
        )

    def for_run(self, model: str, loss, list_head: bool, pretrained: bool) -> ModelConfig:
        """``resolved`` for a training run: a text model's similarity follows its start
        (a pretrained one keeps the checkpoint's own ranking), and a model whose [CLS]
        comes with its list head (the released code's) has one only with that head."""
        config = self
        if model_families.is_text(model) and config.similarity is None:
            similarity = "checkpoint" if pretrained else "none"
            config = dataclasses.replace(config, similarity=similarity)
        if config.similarity == "checkpoint" and not pretrained:
            raise ValueError("`similarity` checkpoint needs a checkpoint: give `init_from`")
        if model_families.get_model(model).cls_token_with_list_head and config.cls_token is None:
            config = dataclasses.replace(config, cls_token=list_head)
        config = config.resolved(model, loss)
        if list_head and not config.cls_token:
            raise ValueError(
                "alpha > 0: the list head reads the [CLS] token, so `cls_token` is needed"
            )
        return config


def _neural_names() -> tuple[str, ...]:
    return model_families.model_names(model_families.NEURAL_KINDS)


def check_model_name(name: str) -> None:
    """Raises ``ValueError`` unless ``name`` is a neural model of ``model_families``
    (feature vectors or text)."""
    if not model_families.is_neural(name):
        raise ValueError(f"Unknown model {name!r}; choose from {sorted(_neural_names())}")
