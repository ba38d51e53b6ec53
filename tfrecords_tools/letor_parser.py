"""Parsing LETOR / SVMlight lines into arrays, with validation.

A LETOR line is ``<label> qid:<int> <index>:<value> ... [# comment]``. Two
parsers produce identical :class:`ParsedLines`:

* :func:`parse_letor_lines`, the reference: pure Python, one line at a time,
  handles sparse lines and names the file, line and token of any error;
* :func:`parse_dense_chunk`, the fast path for the common dense layout (every
  line lists features ``1..d`` in order): pyarrow's multi-threaded CSV reader
  does the float parsing. It returns ``None`` whenever a chunk is not a clean
  dense chunk, and the caller then runs the reference parser on it, which
  either accepts the chunk (sparse lines) or raises the precise error.
"""

from __future__ import annotations

import dataclasses
import functools
import math

import numpy as np

__all__ = [
    "DUPLICATE_POLICIES",
    "LetorFormatError",
    "ParsedLines",
    "parse_dense_chunk",
    "parse_letor_lines",
    "warm_up_fast_path",
]


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


# The smallest magnitude that rounds to infinity in float32: the largest float32
# plus half its spacing (a tie rounds to the even mantissa, which is the infinity).
# Below it a value rounds to a finite float32, as the fast path's cast does.
_FLOAT32_OVERFLOW = 2.0**128 - 2.0**103


def _int(text: bytes) -> int:
    """``int()`` without Python's digit separators: ``1_000`` is not a LETOR number."""
    if b"_" in text:
        raise ValueError(text)
    return int(text)


def _float(text: bytes) -> float:
    """``float()`` without Python's digit separators."""
    if b"_" in text:
        raise ValueError(text)
    return float(text)


# What a line that repeats a feature index gives: an error, or the value that
# comes last (TF-Ranking's LibSVM reader) or first on the line.
DUPLICATE_POLICIES = ("error", "last", "first")


def _strip(line: bytes) -> bytes:
    """Drops a trailing ``# comment`` and surrounding whitespace (CR included)."""
    return line.partition(b"#")[0].strip()


def _parse_label(token: bytes, path: str, line_no: int) -> int:
    try:
        label = _int(token)
    except ValueError:
        raise LetorFormatError(
            path, line_no, "malformed label: expected a non-negative integer", token
        ) from None
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
    try:
        qid = _int(token[4:])
    except ValueError:
        raise LetorFormatError(
            path, line_no, "malformed qid: expected 'qid:<integer>'", token
        ) from None
    if not -(2**63) <= qid < 2**63:
        raise LetorFormatError(path, line_no, "qid does not fit in a 64-bit integer", token)
    return qid


def _parse_feature(token: bytes, num_features: int, path: str, line_no: int):
    index_text, colon, value_text = token.partition(b":")
    if not colon:
        raise LetorFormatError(
            path, line_no, "malformed feature: expected '<index>:<value>'", token
        )
    try:
        index = _int(index_text)
    except ValueError:
        raise LetorFormatError(
            path, line_no, "malformed feature index: expected a positive integer", token
        ) from None
    if index < 1:
        raise LetorFormatError(path, line_no, f"feature index {index} is not >= 1", token)
    if index > num_features:
        raise LetorFormatError(
            path, line_no, f"feature index {index} is above the feature count {num_features}", token
        )
    try:
        value = _float(value_text)
    except ValueError:
        raise LetorFormatError(path, line_no, "non-numeric feature value", token) from None
    if not math.isfinite(value):
        raise LetorFormatError(path, line_no, "feature value is NaN or infinite", token)
    if abs(value) >= _FLOAT32_OVERFLOW:
        raise LetorFormatError(path, line_no, "feature value overflows float32", token)
    return index, value


def _duplicate_error(token: bytes, index: int, path: str, line_no: int) -> LetorFormatError:
    return LetorFormatError(
        path,
        line_no,
        f"feature index {index} is duplicated on the line (pass --duplicate-features "
        "last or first to keep one of its values)",
        token,
    )


def _line_features(
    tokens: list[bytes], *, num_features: int, duplicates: str, path: str, line_no: int
) -> tuple[list[int], list[float], bool, bool]:
    """A line's ``index:value`` tokens as increasing indices and their values.

    Returns:
      ``(indices, values, in_order, repeated)``: whether the indices never
      decreased, and whether one was repeated.
    """
    pairs = [_parse_feature(t, num_features, path, line_no) for t in tokens]
    indices = [index for index, _ in pairs]
    if all(a < b for a, b in zip(indices, indices[1:])):
        return indices, [value for _, value in pairs], True, False
    kept: dict[int, float] = {}
    repeated = False
    for token, (index, value) in zip(tokens, pairs):
        if index in kept:
            if duplicates == "error":
                raise _duplicate_error(token, index, path, line_no)
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
    """Parses LETOR lines one at a time (the reference parser).

    Blank and comment-only lines are skipped; CRLF endings and trailing
    ``# comments`` are accepted. Features may come in any order (they are
    sorted and the line counted); a repeated index follows ``duplicates``.

    Args:
      lines: raw lines without their ``\\n``.
      num_features: the feature count ``d``; indices must lie in ``1..d``.
      path: file name, for error messages.
      first_line: 1-based line number of ``lines[0]``.
      duplicates: one of ``DUPLICATE_POLICIES``: a repeated feature index is an
        error, or keeps the value that comes last (as TF-Ranking's LibSVM
        reader does) or first on the line.

    Returns:
      The parsed items.

    Raises:
      LetorFormatError: on the first invalid line.
      ValueError: for an unknown ``duplicates`` policy.
    """
    if duplicates not in DUPLICATE_POLICIES:
        raise ValueError(
            f"Unknown duplicate-feature policy {duplicates!r}; choose from {DUPLICATE_POLICIES}"
        )
    labels, qids, numbers = [], [], []
    rows, cols, values = [], [], []
    unsorted = repeated = sparse = 0
    last_features = []
    for offset, raw in enumerate(lines):
        line_no = first_line + offset
        tokens = _strip(raw).split()
        if not tokens:
            continue
        labels.append(_parse_label(tokens[0], path, line_no))
        qids.append(_parse_qid(tokens[1] if len(tokens) > 1 else None, path, line_no))
        if len(tokens) < 3:
            raise LetorFormatError(path, line_no, "line has no features", tokens[-1])
        row = len(numbers)
        numbers.append(line_no)
        indices, line_values, in_order, had_duplicates = _line_features(
            tokens[2:], num_features=num_features, duplicates=duplicates, path=path, line_no=line_no
        )
        unsorted += not in_order
        repeated += had_duplicates
        sparse += len(indices) < num_features
        last_features.append(indices[-1])
        rows.extend([row] * len(indices))
        cols.extend(index - 1 for index in indices)
        values.extend(line_values)
    features = np.zeros((len(numbers), num_features), dtype=np.float64)
    features[np.asarray(rows, dtype=np.int64), np.asarray(cols, dtype=np.int64)] = values
    return ParsedLines(
        labels=np.asarray(labels, dtype=np.int64),
        qids=np.asarray(qids, dtype=np.int64),
        features=features.astype(np.float32),
        line_numbers=np.asarray(numbers, dtype=np.int64),
        unsorted_lines=unsorted,
        duplicate_lines=repeated,
        sparse_lines=sparse,
        last_features=np.asarray(last_features, dtype=np.int64),
    )


def _dense_table(data, num_features: int, use_threads: bool):
    """Reads a colon-free chunk with pyarrow; ``None`` if it is not dense and clean."""
    import pyarrow as pa
    import pyarrow.csv as pa_csv

    num_columns = 3 + 2 * num_features
    # The 'qid' column is read as binary: comparing a string column costs far more.
    types = {"f0": pa.int64(), "f1": pa.binary(), "f2": pa.int64()}
    # Narrow index columns convert faster; an index that overflows them fails the
    # conversion and the chunk goes to the reference parser.
    index_type = pa.int16() if num_features < 2**15 else pa.int32()
    for j in range(num_features):
        types[f"f{3 + 2 * j}"] = index_type
        types[f"f{4 + 2 * j}"] = pa.float64()
    try:
        table = pa_csv.read_csv(
            pa.py_buffer(data),
            read_options=pa_csv.ReadOptions(
                autogenerate_column_names=True, block_size=2 << 20, use_threads=use_threads
            ),
            parse_options=pa_csv.ParseOptions(delimiter=" ", quote_char=False),
            convert_options=pa_csv.ConvertOptions(
                column_types=types,
                null_values=[],
                strings_can_be_null=False,
                quoted_strings_can_be_null=False,
            ),
        )
    except pa.ArrowInvalid:
        return None
    if table.num_columns == num_columns + 1:
        # A trailing space on every line yields one empty last column.
        last = table.column(num_columns)
        if last.null_count != len(last) and not all(v == "" for v in last.to_pylist()):
            return None
        table = table.drop_columns([table.column_names[-1]])
    if table.num_columns != num_columns:
        return None
    return table


_COLON_TO_SPACE = bytes.maketrans(b":", b" ")
_NOT_SEPARATORS = bytes(b for b in range(256) if b not in b" :\n")


@functools.lru_cache(maxsize=8)
def _separator_rows(num_features: int) -> tuple[bytes, bytes]:
    """The separators of one clean dense line, without and with a trailing space.

    ``2 qid:7 1:0.5 2:3`` has the separators ``" : : :"`` and a newline: a space
    after the label, then a ':' in each of the ``d + 1`` tokens, spaces between.
    """
    body = b" " + (b": " * (num_features + 1))[:-1]
    return body + b"\n", body + b" \n"


def _clean_separators(data: bytes, num_features: int, num_lines: int) -> bool:
    """Whether every line has exactly the spaces and colons of a dense line, in order.

    Translating ':' to ' ' for pyarrow hides where each colon was; this check
    (deleting all other bytes, then one comparison) keeps a line such as
    ``1 qid:1:1 0.5 ...`` from passing as ``1 qid:1 1:0.5 ...``.
    """
    separators = data.translate(None, _NOT_SEPARATORS)
    return any(separators == row * num_lines for row in _separator_rows(num_features))


def _fill_column(out: np.ndarray, column) -> None:
    """Copies a chunked pyarrow column into the 1-D array ``out``, chunk by chunk."""
    start = 0
    for chunk in column.chunks:
        end = start + len(chunk)
        out[start:end] = chunk.to_numpy(zero_copy_only=True)
        start = end


def parse_dense_chunk(
    data: bytes,
    *,
    num_features: int,
    first_line: int,
    num_lines: int | None = None,
    use_threads: bool = True,
) -> ParsedLines | None:
    """Parses a chunk of whole dense LETOR lines with pyarrow, or returns ``None``.

    ``None`` means the chunk has blank or comment-only lines, sparse lines, or
    anything the reference parser must look at; it is never a verdict on
    validity.

    Args:
      data: whole lines (each ending in ``\\n`` except possibly the last).
      num_features: the feature count ``d``.
      first_line: 1-based line number of the chunk's first line.
      num_lines: the number of lines in ``data``, when the caller has counted them.
      use_threads: let pyarrow parse with its thread pool (off in worker processes,
        which already use every core between them).
    """
    import pyarrow as pa
    import pyarrow.compute as pc

    if b"#" in data:
        lines = [line.partition(b"#")[0].rstrip() for line in data.split(b"\n")]
        if lines and not lines[-1]:
            lines.pop()
        if not all(lines):
            return None
        data = b"\n".join(lines)
        num_lines = len(lines)
    # Blank lines need no search here: pyarrow skips them, and the row count
    # below then falls short of the line count.
    if num_lines is None:
        num_lines = data.count(b"\n") + (0 if data.endswith(b"\n") else 1)
    if not data.endswith(b"\n"):
        data += b"\n"  # pyarrow cannot read a lone line that lacks its newline
    if not _clean_separators(data, num_features, num_lines):
        return None
    if b"x" in data or b"X" in data:
        return None  # pyarrow reads '0x1A' as an integer; Python's int() does not
    table = _dense_table(data.translate(_COLON_TO_SPACE), num_features, use_threads)
    if table is None or table.num_rows != num_lines:
        return None
    if not pc.all(pc.equal(table.column(1), pa.scalar(b"qid", pa.binary()))).as_py():
        return None
    labels = table.column(0).to_numpy()
    if labels.size and labels.min() < 0:
        return None
    # [d, n], filled feature by feature (float64 parsed, stored as float32, as the
    # reference parser does), then transposed to [n, d].
    values = np.empty((num_features, num_lines), dtype=np.float32)
    # Values that overflow float32 become inf here and send the chunk to the
    # reference parser, which reports them.
    with np.errstate(over="ignore"):
        for j in range(num_features):
            index = table.column(3 + 2 * j)
            if pc.min_max(index).as_py() != {"min": j + 1, "max": j + 1}:
                return None
            _fill_column(values[j], table.column(4 + 2 * j))
    if not np.isfinite(values).all():
        return None
    return ParsedLines(
        labels=labels.astype(np.int64),
        qids=table.column(2).to_numpy().astype(np.int64),
        features=np.ascontiguousarray(values.T),
        line_numbers=np.arange(first_line, first_line + num_lines, dtype=np.int64),
    )


def warm_up_fast_path() -> None:
    """Runs the fast path once on a tiny chunk.

    pyarrow's first CSV read and compute calls cost about 0.2 s of one-time
    set-up; done before worker processes are forked, they inherit it.
    """
    parse_dense_chunk(
        b"1 qid:1 1:0.5 2:1\n0 qid:1 1:0 2:3\n", num_features=2, first_line=1, use_threads=False
    )
