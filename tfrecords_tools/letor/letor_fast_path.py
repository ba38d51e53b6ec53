"""The fast path for dense LETOR chunks, parsed by pyarrow's CSV reader; any other chunk
gives ``None`` and goes to the reference parser."""

from __future__ import annotations

import numpy as np

from tfrecords_tools.letor.letor_parser import ParsedLines


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


def _clean_separators(data: bytes, num_features: int, num_lines: int) -> bool:
    """Whether every line has exactly a dense line's spaces and colons (``" : : :"`` for
    ``2 qid:7 1:0.5 2:3``, maybe a trailing space); pyarrow reads ':' as ' ', which would
    pass ``1 qid:1:1 0.5``."""
    separators = data.translate(None, _NOT_SEPARATORS)
    body = b" " + (b": " * (num_features + 1))[:-1]
    return any(separators == row * num_lines for row in (body + b"\n", body + b" \n"))


def parse_dense_chunk(
    data: bytes,
    *,
    num_features: int,
    first_line: int,
    num_lines: int | None = None,
    use_threads: bool = True,
) -> ParsedLines | None:
    """Parses whole dense LETOR lines with pyarrow, or returns ``None`` for the reference
    parser to look at (never a verdict on validity)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    prepared = _prepared_chunk(data, num_features, num_lines)
    if prepared is None:
        return None
    data, num_lines = prepared
    table = _dense_table(data.translate(_COLON_TO_SPACE), num_features, use_threads)
    if table is None or table.num_rows != num_lines:
        return None
    if not pc.all(pc.equal(table.column(1), pa.scalar(b"qid", pa.binary()))).as_py():
        return None
    labels = table.column(0).to_numpy()
    if labels.size and labels.min() < 0:
        return None
    values = _feature_values(table, num_features, num_lines)
    if values is None:
        return None
    return ParsedLines(
        labels=labels.astype(np.int64),
        qids=table.column(2).to_numpy().astype(np.int64),
        features=np.ascontiguousarray(values.T),  # [d, n] -> [n, d]
        line_numbers=np.arange(first_line, first_line + num_lines, dtype=np.int64),
    )


def _prepared_chunk(
    data: bytes, num_features: int, num_lines: int | None
) -> tuple[bytes, int] | None:
    """The chunk without comments, ending in a newline, and its line count; ``None`` for
    blank lines or anything pyarrow would read differently from the reference parser."""
    if b"#" in data:
        lines = [line.partition(b"#")[0].rstrip() for line in data.split(b"\n")]
        if lines and not lines[-1]:
            lines.pop()
        if not all(lines):
            return None
        data = b"\n".join(lines)
        num_lines = len(lines)
    # Blank lines need no search here: pyarrow skips them, and the row count
    # then falls short of the line count.
    if num_lines is None:
        num_lines = data.count(b"\n") + (0 if data.endswith(b"\n") else 1)
    if not data.endswith(b"\n"):
        data += b"\n"  # pyarrow cannot read a lone line that lacks its newline
    if not _clean_separators(data, num_features, num_lines):
        return None
    if b"x" in data or b"X" in data:
        return None  # pyarrow reads '0x1A' as an integer; Python's int() does not
    return data, num_lines


def _feature_values(table, num_features: int, num_lines: int) -> np.ndarray | None:
    """``[d, n]`` float32 values; ``None`` unless every line's ``j``-th index is ``j + 1``
    and every value is a finite float32 (the reference parser reports the others)."""
    import pyarrow.compute as pc

    values = np.empty((num_features, num_lines), dtype=np.float32)
    # Values that overflow float32 become inf here.
    with np.errstate(over="ignore"):
        for j in range(num_features):
            index = table.column(3 + 2 * j)
            if pc.min_max(index).as_py() != {"min": j + 1, "max": j + 1}:
                return None
            start = 0  # chunk by chunk, without joining the column first
            for chunk in table.column(4 + 2 * j).chunks:
                values[j, start : start + len(chunk)] = chunk.to_numpy(zero_copy_only=True)
                start += len(chunk)
    if not np.isfinite(values).all():
        return None
    return values


def warm_up_fast_path() -> None:
    """Pays pyarrow's one-time set-up, so that workers forked afterwards inherit it."""
    parse_dense_chunk(
        b"1 qid:1 1:0.5 2:1\n0 qid:1 1:0 2:3\n", num_features=2, first_line=1, use_threads=False
    )
