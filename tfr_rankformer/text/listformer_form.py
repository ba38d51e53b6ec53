"""The Listformer's layer form: its own from-scratch form, or a pretrained checkpoint's.

Trained from scratch (the default), the Listformer's encoder layers are
pre-LayerNorm with a final LayerNorm, one set of query/key/value projections
serves global and local attention, and ``[CLS]`` takes no position. Started
from a BERT-family checkpoint (``listformer_checkpoint``), the layers take the
checkpoint's form instead: post-LayerNorm and no final LayerNorm, the
checkpoint's activation and LayerNorm epsilon, separate projections for the
global tokens' attention (Longformer's, which start as copies of the local
ones), and ``[CLS]`` at position 0 with the query after it, as BERT reads
``[CLS] q``. Documents restart at position 0 in both forms.

No TensorFlow here: the form is recorded beside a run's settings and read back.
"""

from __future__ import annotations

import dataclasses

from tfr_rankformer.core.config_io import from_dict

__all__ = ["ACTIVATIONS", "ListformerForm"]

# Feed-forward activations the encoder layers offer (``gelu`` is the exact one).
ACTIVATIONS = ("gelu", "relu")


@dataclasses.dataclass(frozen=True)
class ListformerForm:
    """How the Listformer's embedding and encoder layers are laid out.

    Attributes:
      norm_first: pre-LayerNorm encoder layers and a final LayerNorm (the
        from-scratch form); off: post-LayerNorm layers and no final LayerNorm
        (BERT's).
      layer_norm_epsilon: the epsilon of every LayerNorm, the embedding's too.
      activation: the feed-forward block's activation, one of ``ACTIVATIONS``.
      global_projections: the global tokens' attention has its own query, key
        and value projections (Longformer's); off: the local ones serve both.
      cls_position: ``[CLS]`` takes position 0 and the query positions
        ``1 .. Q`` (as BERT reads ``[CLS] q``); off: ``[CLS]`` takes no
        position and the query ``0 .. Q - 1``.
    """

    norm_first: bool = True
    layer_norm_epsilon: float = 1e-5
    activation: str = "gelu"
    global_projections: bool = False
    cls_position: bool = False

    def __post_init__(self):
        for name in ("norm_first", "global_projections", "cls_position"):
            if not isinstance(getattr(self, name), bool):
                raise ValueError(f"`{name}` must be a bool, got {getattr(self, name)!r}")
        epsilon = self.layer_norm_epsilon
        if isinstance(epsilon, bool) or not isinstance(epsilon, (int, float)) or not epsilon > 0:
            raise ValueError(f"`layer_norm_epsilon` must be a number > 0, got {epsilon!r}")
        if self.activation not in ACTIVATIONS:
            raise ValueError(
                f"`activation` must be one of {list(ACTIVATIONS)}, got {self.activation!r}"
            )

    @classmethod
    def from_scratch(cls) -> ListformerForm:
        """The form of a Listformer trained from random weights (the default)."""
        return cls()

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

    def to_json(self) -> dict:
        return dataclasses.asdict(self)

    @classmethod
    def from_json(cls, values: dict) -> ListformerForm:
        """The form ``to_json`` wrote, checked.

        Raises:
          ValueError: naming unknown keys or a bad value.
        """
        return from_dict(cls, values, what="listformer form")
