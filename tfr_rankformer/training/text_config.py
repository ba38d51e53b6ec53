"""``TextConfig``: how a text run's lists are read and tokenised.

The settings live below ``text/`` so that ``TrainConfig``, which nests them,
loads without TensorFlow; ``text.text_data`` reads text lists with them.
"""

from __future__ import annotations

import dataclasses

from tfr_rankformer.core.config_io import require_positive_ints

__all__ = ["TextConfig"]


@dataclasses.dataclass(frozen=True)
class TextConfig:
    """How text lists are read and tokenised.

    Attributes:
      query_feature: the context feature holding the query's tokens; ``None``:
        the manifest's ``query_feature``, else ``query_tokens``.
      document_feature: the per-item feature holding a document's tokens;
        ``None``: the manifest's ``document_feature``, else ``document_tokens``.
      label_feature: the per-item int64 label; ``None``: the manifest's
        ``label_feature``, else ``relevance``.
      max_query_tokens: WordPiece tokens kept of a query (the rest is cut and counted).
      max_document_tokens: WordPiece tokens kept of a document (likewise).
      vocab: a WordPiece vocabulary file (one token per line, with ``[UNK]``);
        empty: built from the training split's text.
      vocab_size: entries of a vocabulary built from the training text.
      init_from: a BERT-family checkpoint directory in the Hugging Face layout
        (``config.json``, ``model.safetensors``, ``vocab.txt``) the Listformer
        starts from: its sizes, weights, vocabulary and tokenisation
        (``listformer_checkpoint``); ``None``: trained from scratch. Its files
        are checked when training starts (``check_checkpoint_directory``), not
        here, so that a run reloads after the checkpoint has moved.
    """

    query_feature: str | None = None
    document_feature: str | None = None
    label_feature: str | None = None
    max_query_tokens: int = 32
    max_document_tokens: int = 128
    vocab: str = ""
    vocab_size: int = 8000
    init_from: str | None = None

    def __post_init__(self):
        require_positive_ints(self, "max_query_tokens", "max_document_tokens", "vocab_size")
        if self.init_from is None:
            return
        if not isinstance(self.init_from, str) or not self.init_from:
            raise ValueError(f"`init_from` must be a checkpoint directory, got {self.init_from!r}")
        if self.vocab:
            raise ValueError(
                "`vocab` and `init_from` exclude each other: a pretrained start's vocabulary "
                "is its checkpoint's vocab.txt"
            )
