"""The simple word tokenisation of the text ELWC's ``query_tokens`` and ``document_tokens``.

Text is lower-cased (``str.lower``) and cut into maximal runs of Unicode
letters and digits; everything else (spaces, punctuation, underscores,
symbols) separates tokens and is dropped. ``"COVID-19: what's new?"`` becomes
``["covid", "19", "what", "s", "new"]``. No stemming and no stop words: the
model's WordPiece tokenisation, which runs later inside its graph, splits
these words further, and BM25 (``tfr_rankformer.text.bm25``) scores the
same tokens.
"""

from __future__ import annotations

import re

__all__ = ["TOKENIZER_DESCRIPTION", "tokenize", "truncate_tokens"]

TOKENIZER_DESCRIPTION = (
    "lower-cased (str.lower), split into maximal runs of Unicode letters and digits "
    "(regex [^\\W_]+); no stemming, no stop words"
)

_WORD = re.compile(r"[^\W_]+")


def tokenize(text: str) -> list[str]:
    """The word tokens of ``text`` (see the module docstring)."""
    return _WORD.findall(text.lower())


def truncate_tokens(tokens: list[str], limit: int | None) -> tuple[list[str], bool]:
    """``tokens`` cut to ``limit`` (``None``: no limit); returns ``(tokens, truncated)``."""
    if limit is None or len(tokens) <= limit:
        return tokens, False
    return tokens[:limit], True
