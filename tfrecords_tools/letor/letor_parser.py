"""The reference LETOR / SVMlight parser (``<label> qid:<int> <index>:<value> ... [# c]``),
pure Python, naming the file, line and token of any error."""

from __future__ import annotations

import dataclasses
import math

import numpy as np

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
    """Items of consecutive lines: ``[n]`` labels, qids, 1-based line numbers, ``[n, d]``
    float32 raw features (missing: 0), and counts of reordered, repeated and sparse lines."""

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


# The smallest magnitude that rounds to infinity in float32: the largest float32
# plus half its spacing (a tie rounds to the even mantissa, which is the infinity).
# Below it a value rounds to a finite float32, as the fast path's cast does.
_FLOAT32_OVERFLOW = 2.0**128 - 2.0**103


def _number(text: bytes, kind, path: str, line_no: int, message: str, token: bytes):
    """``kind(text)``, else the error ``message``; Python's digit separators (``1_000``) are
    no LETOR number."""
    if b"_" not in text:
        try:
            return kind(text)
        except ValueError:
            pass
    raise LetorFormatError(path, line_no, message, token)


def _parse_label(token: bytes, path: str, line_no: int) -> int:
    label = _number(
        token, int, path, line_no, "malformed label: expected a non-negative integer", token
    )
    if label < 0:
        raise LetorFormatError(path, line_no, "label must be a non-negative integer", token)
    if label >= 2**63:
        raise LetorFormatError(path, line_no, "label does not fit in a 64-bit integer", token)
    return label


def _parse_qid(token: bytes | None, path: str, line_no: int) -> int:
    if token is None or not token.startswith(b"qid:"):
        raise LetorFormatError(
            path, line_no, "missing qid: the second token must be 'qid:<integer>'", token
        )
    qid = _number(token[4:], int, path, line_no, "malformed qid: expected 'qid:<integer>'", token)
    if not -(2**63) <= qid < 2**63:
        raise LetorFormatError(path, line_no, "qid does not fit in a 64-bit integer", token)
    return qid


def _parse_feature(token: bytes, num_features: int, path: str, line_no: int):
    index_text, colon, value_text = token.partition(b":")
    if not colon:
        raise LetorFormatError(
            path, line_no, "malformed feature: expected '<index>:<value>'", token
        )
    message = "malformed feature index: expected a positive integer"
    index = _number(index_text, int, path, line_no, message, token)
    if index < 1:
        raise LetorFormatError(path, line_no, f"feature index {index} is not >= 1", token)
    if index > num_features:
        raise LetorFormatError(
            path, line_no, f"feature index {index} is above the feature count {num_features}", token
        )
    value = _number(value_text, float, path, line_no, "non-numeric feature value", token)
    if not math.isfinite(value):
        raise LetorFormatError(path, line_no, "feature value is NaN or infinite", token)
    if abs(value) >= _FLOAT32_OVERFLOW:
        raise LetorFormatError(path, line_no, "feature value overflows float32", token)
    return index, value


def _line_features(
    tokens: list[bytes], *, num_features: int, duplicates: str, path: str, line_no: int
) -> tuple[list[int], list[float], bool, bool]:
    """``(indices, values, in_order, repeated)`` of a line's ``index:value`` tokens, sorted."""
    pairs = [_parse_feature(t, num_features, path, line_no) for t in tokens]
    indices = [index for index, _ in pairs]
    if all(a < b for a, b in zip(indices, indices[1:])):
        return indices, [value for _, value in pairs], True, False
    kept: dict[int, float] = {}
    repeated = False
    for token, (index, value) in zip(tokens, pairs):
        if index in kept:
            if duplicates == "error":
                raise LetorFormatError(
                    path,
                    line_no,
                    f"feature index {index} is duplicated on the line (pass --duplicate-features "
                    "last or first to keep one of its values)",
                    token,
                )
            repeated = True
            if duplicates == "first":
                continue
        kept[index] = value
    ordered = sorted(kept)
    in_order = all(a <= b for a, b in zip(indices, indices[1:]))
    return ordered, [kept[i] for i in ordered], in_order, repeated


def parse_letor_lines(
    lines: list[bytes],
    *,
    num_features: int,
    path: str,
    first_line: int,
    duplicates: str = "error",
) -> ParsedLines:
    """Parses raw LETOR lines; raises :class:`LetorFormatError` at the first invalid one."""
    if duplicates not in DUPLICATE_POLICIES:
        raise ValueError(
            f"Unknown duplicate-feature policy {duplicates!r}; choose from {DUPLICATE_POLICIES}"
        )
    items = _ItemColumns()
    for offset, raw in enumerate(lines):
        tokens = raw.partition(b"#")[0].split()  # a comment dropped
        if tokens:
            items.add_line(
                tokens,
                num_features=num_features,
                duplicates=duplicates,
                path=path,
                line_no=first_line + offset,
            )
    return items.parsed(num_features)


@dataclasses.dataclass
class _ItemColumns:
    """The items parsed so far, features as coordinates: a sparse line costs its values only."""

    labels: list[int] = dataclasses.field(default_factory=list)
    qids: list[int] = dataclasses.field(default_factory=list)
    line_numbers: list[int] = dataclasses.field(default_factory=list)
    rows: list[int] = dataclasses.field(default_factory=list)
    cols: list[int] = dataclasses.field(default_factory=list)
    values: list[float] = dataclasses.field(default_factory=list)
    last_features: list[int] = dataclasses.field(default_factory=list)
    unsorted_lines: int = 0
    duplicate_lines: int = 0
    sparse_lines: int = 0

    def add_line(
        self, tokens: list[bytes], *, num_features: int, duplicates: str, path: str, line_no: int
    ) -> None:
        label = _parse_label(tokens[0], path, line_no)
        qid = _parse_qid(tokens[1] if len(tokens) > 1 else None, path, line_no)
        if len(tokens) < 3:
            raise LetorFormatError(path, line_no, "line has no features", tokens[-1])
        indices, line_values, in_order, had_duplicates = _line_features(
            tokens[2:], num_features=num_features, duplicates=duplicates, path=path, line_no=line_no
        )
        row = len(self.line_numbers)
        self.labels.append(label)
        self.qids.append(qid)
        self.line_numbers.append(line_no)
        self.unsorted_lines += not in_order
        self.duplicate_lines += had_duplicates
        self.sparse_lines += len(indices) < num_features
        self.last_features.append(indices[-1])
        self.rows.extend([row] * len(indices))
        self.cols.extend(index - 1 for index in indices)
        self.values.extend(line_values)

    def parsed(self, num_features: int) -> ParsedLines:
        """The items as arrays; features are ``[n, d]`` float32, absent ones 0."""
        features = np.zeros((len(self.line_numbers), num_features), dtype=np.float64)
        rows = np.asarray(self.rows, dtype=np.int64)
        features[rows, np.asarray(self.cols, dtype=np.int64)] = self.values
        return ParsedLines(
            labels=np.asarray(self.labels, dtype=np.int64),
            qids=np.asarray(self.qids, dtype=np.int64),
            features=features.astype(np.float32),
            line_numbers=np.asarray(self.line_numbers, dtype=np.int64),
            unsorted_lines=self.unsorted_lines,
            duplicate_lines=self.duplicate_lines,
            sparse_lines=self.sparse_lines,
            last_features=np.asarray(self.last_features, dtype=np.int64),
        )
