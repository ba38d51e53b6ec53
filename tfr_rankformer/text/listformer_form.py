"""The Listformer's layer form: its own from-scratch form, or a pretrained checkpoint's.

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

    From scratch (the default): pre-LayerNorm layers and a final LayerNorm, one set of
    projections, ``[CLS]`` without a position. A BERT checkpoint's (:meth:`bert`):
    post-LayerNorm without a final LayerNorm, its epsilon and activation, the global tokens'
    own projections (Longformer's) and ``[CLS]`` at position 0 with the query after it.
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
