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
    """A trained model opened to score lists (``runner.load_served``).

    Attributes:
      path: the SavedModel directory, the GBDT's ``model.txt``, or the URL of
        a TF Serving's model (``runner.load_remote``).
      kind: the ``model_families`` kind that scores it: ``features`` (a
        feature-vector run's export), ``text`` (either of a text run's
        exports) or ``gbdt``.
      num_features: the feature count the model takes (``None`` for text).
      model: the loaded SavedModel (or a ``serving_client.RemoteModel``, whose
        signatures are called alike), or the LightGBM booster.
      tokenizer: a token-id text export's client tokenizer, read from its
        ``assets.extra/`` (``None``: the export takes raw strings, or no text).
    """

    path: str
    kind: str
    num_features: int | None
    model: object
    tokenizer: ClientTokenizer | None = None

    @property
    def is_text(self) -> bool:
        return self.kind == TEXT_KIND
