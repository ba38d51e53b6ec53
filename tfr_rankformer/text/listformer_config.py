"""``ListformerConfig``, the text family's architecture settings, and ``ListformerForm``, its
layers' form (from scratch or a checkpoint's). No TensorFlow here.
"""

from __future__ import annotations

import argparse
import dataclasses

from tfr_rankformer.core.command_names import ATTENTIONS
from tfr_rankformer.core.config_io import check_fields, on_off, require_positive_ints, setting
from tfr_rankformer.model.model_config import ModelConfig

__all__ = ["ACTIVATIONS", "ListformerConfig", "ListformerForm"]

# Feed-forward activations the encoder layers offer (``gelu`` is the exact one).
ACTIVATIONS = ("gelu", "relu")


@dataclasses.dataclass(frozen=True)
class ListformerConfig(ModelConfig):
    """The Listformer's architecture settings (``None``: the model's default)."""

    _defaults = dict(
        ModelConfig._defaults,
        width=128,
        attention_window=256,
        attention="blocked",
        match_marks=False,
        similarity="none",
        first_stage=None,  # ``TextFamily`` decides by the data (on where it has the scores)
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
        action=argparse.BooleanOptionalAction,
    )
    similarity: str | None = setting(
        None,
        "listformer: checkpoint: a frozen copy of the --init-from checkpoint scores each "
        "document by its own cosine (mean-pooled embeddings), and the model's score is a "
        "residual over it, so it ranks as the checkpoint does before its first step; none. "
        "Not in the thesis. Default: checkpoint with --init-from, else none",
        choices=["none", "checkpoint"],
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
        super().__post_init__()
        require_positive_ints(self, "width", "attention_window", optional=True)
        if self.width and self.num_heads and self.width % self.num_heads:
            raise ValueError(
                f"`width` {self.width} is not divisible by `num_heads` {self.num_heads}"
            )

    def for_run(self, model: str, loss, list_head: bool, pretrained: bool) -> ListformerConfig:
        """As ``ModelConfig.for_run``; a pretrained start keeps the checkpoint's ranking."""
        config = self
        if config.similarity is None:
            similarity = "checkpoint" if pretrained else "none"
            config = dataclasses.replace(config, similarity=similarity)
        if config.similarity == "checkpoint" and not pretrained:
            raise ValueError("`similarity` checkpoint needs a checkpoint: give `init_from`")
        return ModelConfig.for_run(config, model, loss, list_head, pretrained)


@dataclasses.dataclass(frozen=True)
class ListformerForm:
    """How the Listformer's layers are laid out: from scratch, pre-LayerNorm with a final
    LayerNorm, one set of projections, ``[CLS]`` without a position; a BERT checkpoint's
    (:meth:`bert`): post-LayerNorm, its epsilon and activation, the globals' own projections
    (Longformer's) and ``[CLS]`` at position 0."""

    norm_first: bool = True
    layer_norm_epsilon: float = 1e-5
    activation: str = "gelu"
    global_projections: bool = False
    cls_position: bool = False

    def __post_init__(self):
        check_fields(self)
        if not self.layer_norm_epsilon > 0:
            raise ValueError(f"`layer_norm_epsilon` must be > 0, got {self.layer_norm_epsilon!r}")
        if self.activation not in ACTIVATIONS:
            raise ValueError(
                f"`activation` must be one of {list(ACTIVATIONS)}, got {self.activation!r}"
            )

    @classmethod
    def bert(cls, *, layer_norm_epsilon: float, activation: str = "gelu") -> ListformerForm:
        """The form of a BERT checkpoint's layers.

        >>> ListformerForm.bert(layer_norm_epsilon=1e-12).norm_first
        False
        """
        return cls(
            norm_first=False,
            layer_norm_epsilon=float(layer_norm_epsilon),
            activation=activation,
            global_projections=True,
            cls_position=True,
        )
