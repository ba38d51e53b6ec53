"""``ServedModel``: a trained model opened to score lists (``runner.load_served``)."""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

from tfr_rankformer.core.model_families import TEXT_KIND

if TYPE_CHECKING:
    from tfr_rankformer.serving.client_tokenizer import ClientTokenizer

__all__ = ["ServedModel"]


@dataclasses.dataclass(frozen=True)
class ServedModel:
    """A trained model opened to score lists.

    Attributes:
      path: the SavedModel directory, the GBDT's ``model.txt``, or a TF Serving model's URL.
      kind: the ``model_families`` kind that scores it.
      num_features: the feature count the model takes (``None`` for text).
      model: the loaded SavedModel, a ``serving_client.RemoteModel`` or a LightGBM booster.
      tokenizer: a token-id text export's client tokenizer (``None``: none needed).
    """

    path: str
    kind: str
    num_features: int | None
    model: object
    tokenizer: ClientTokenizer | None = None

    @property
    def is_text(self) -> bool:
        return self.kind == TEXT_KIND
