"""What the two LETOR parsers share: the error they raise and the items they return.

:class:`LetorFormatError` names the file, line and token of a line that cannot
be converted; :class:`ParsedLines` holds the items parsed from consecutive
lines, as the reference parser (``letor_parser``) and the pyarrow fast path
(``letor_fast_path``) both return them; ``DUPLICATE_POLICIES`` are what a line
that repeats a feature index may give. ``letor_parser`` re-exports them all.
"""

from __future__ import annotations

import dataclasses

import numpy as np

__all__ = ["DUPLICATE_POLICIES", "LetorFormatError", "ParsedLines"]

# What a line that repeats a feature index gives: an error, or the value that
# comes last (TF-Ranking's LibSVM reader) or first on the line.
DUPLICATE_POLICIES = ("error", "last", "first")


class LetorFormatError(ValueError):
    """A LETOR file that cannot be converted; names the file, line and token."""

    def __init__(self, path: str, line: int | None, message: str, token: bytes | str | None = None):
        self.path = str(path)
        self.line = line
        self.token = token.decode("utf-8", "replace") if isinstance(token, bytes) else token
        self.message = message
        where = f"{self.path}:{line}" if line else self.path
        detail = f" (offending token: {self.token!r})" if self.token is not None else ""
        super().__init__(f"{where}: {message}{detail}")

    def __reduce__(self):
        # Rebuilt from its parts when it crosses a process boundary.
        return (type(self), (self.path, self.line, self.message, self.token))


@dataclasses.dataclass
class ParsedLines:
    """Items parsed from consecutive lines of one file.

    Attributes:
      labels: ``[n]`` int64 graded relevance labels.
      qids: ``[n]`` int64 query ids.
      features: ``[n, d]`` float32 raw feature values; missing features are 0.
      line_numbers: ``[n]`` int64 1-based line numbers in the file.
      unsorted_lines: lines whose feature indices were not in increasing order
        (they are sorted).
      duplicate_lines: lines that repeated a feature index and kept one of its
        values (``duplicates="last"`` or ``"first"``).
      sparse_lines: lines that omitted some feature index of ``1..d`` (those
        features are 0).
      last_features: ``[n]`` int64 highest feature index of each line, from the
        reference parser (``None`` from the fast path, whose lines all end at ``d``).
    """

    labels: np.ndarray
    qids: np.ndarray
    features: np.ndarray
    line_numbers: np.ndarray
    unsorted_lines: int = 0
    duplicate_lines: int = 0
    sparse_lines: int = 0
    last_features: np.ndarray | None = None

    def __len__(self) -> int:
        return int(self.labels.shape[0])
