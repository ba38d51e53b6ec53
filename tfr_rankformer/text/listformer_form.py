"""The Listformer's layer form: its own from-scratch form, or a pretrained checkpoint's,
recorded beside a run's settings (no TensorFlow here).
"""

from __future__ import annotations

import dataclasses

from tfr_rankformer.core.config_io import check_fields, from_dict

__all__ = ["ACTIVATIONS", "ListformerForm"]

# Feed-forward activations the encoder layers offer (``gelu`` is the exact one).
ACTIVATIONS = ("gelu", "relu")


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

    def to_json(self) -> dict:
        return dataclasses.asdict(self)

    @classmethod
    def from_json(cls, values: dict) -> ListformerForm:
        """The form ``to_json`` wrote, checked (``ValueError`` naming a bad key or value)."""
        return from_dict(cls, values, what="listformer form")
