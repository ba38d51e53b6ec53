"""The word tokenisation of the text ELWC's ``query_tokens`` and ``document_tokens``.

Lower-cased runs of Unicode letters and digits, no stemming and no stop words:
``"COVID-19: what's new?"`` becomes ``["covid", "19", "what", "s", "new"]``. BM25 scores
these tokens; the model's WordPiece splits them further.
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
    """The word tokens of ``text``."""
    return _WORD.findall(text.lower())


def truncate_tokens(tokens: list[str], limit: int | None) -> tuple[list[str], bool]:
    """``tokens`` cut to ``limit`` (``None``: no limit); returns ``(tokens, truncated)``."""
    if limit is None or len(tokens) <= limit:
        return tokens, False
    return tokens[:limit], True
