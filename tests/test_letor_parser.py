"""The dense fast path against the reference parser, and what each accepts."""

from __future__ import annotations

import numpy as np
import pytest

from tfrecords_tools.letor.letor_fast_path import parse_dense_chunk
from tfrecords_tools.letor.letor_parser import LetorFormatError, parse_letor_lines


def _reference(text: bytes, d: int):
    return parse_letor_lines(text.split(b"\n"), num_features=d, path="f.txt", first_line=1)


def _assert_same(a, b):
    for field in ("labels", "qids", "features", "line_numbers"):
        np.testing.assert_array_equal(getattr(a, field), getattr(b, field), err_msg=field)
    assert a.features.dtype == b.features.dtype == np.float32


DENSE = (
    b"2 qid:10 1:0.5 2:-3.25 3:1e-05\n"
    b"0 qid:10 1:7 2:0.000000 3:-1.5E+3\n"
    b"4 qid:-11 1:123456.789 2:.5 3:5.\n"
)


@pytest.mark.parametrize(
    "variant",
    [
        DENSE,
        DENSE.replace(b"\n", b"\r\n"),
        DENSE.replace(b"\n", b" \n"),
        DENSE.replace(b"\n", b" #docid = GX1 inc = 1 prob = 0.3\n"),
        DENSE.rstrip(b"\n"),
    ],
    ids=["plain", "crlf", "trailing-space", "comments", "no-final-newline"],
)
def test_fast_path_equals_reference(variant):
    fast = parse_dense_chunk(variant, num_features=3, first_line=1)
    assert fast is not None
    _assert_same(fast, _reference(variant, 3))


def test_float_values_round_like_python():
    values = ["0.1", "0.7", "3.4028235e38", "1e-45", "123456789.123456789", "-0.0"]
    line = "1 qid:1 " + " ".join(f"{i}:{v}" for i, v in enumerate(values, start=1))
    fast = parse_dense_chunk(line.encode(), num_features=len(values), first_line=1)
    expected = np.array([[float(v) for v in values]]).astype(np.float32)
    np.testing.assert_array_equal(fast.features, expected)


@pytest.mark.parametrize(
    "text",
    [
        b"1 qid:1 1:0.5 3:0.2\n",  # sparse
        b"1 qid:1 1:0.5 2:0.1 3:0.2\n\n1 qid:2 1:0 2:0 3:0\n",  # blank line
        b"1 qid:1 1:0.5 2 0.1 3:0.2\n",  # a ':' written as ' '
        b"1 qid:1 1:0.5 2:nan 3:0.2\n",
        b"1 qid:1 1:0.5 2:NA 3:0.2\n",
        b"1 qid:1 1:0.5 2:0.1 3:0.2\n1 qid 2 1:0.5 2:0.1 3:0.2\n",
        b"1 qid:1 2:0.5 1:0.1 3:0.2\n",
    ],
    ids=["sparse", "blank", "swapped-colon", "nan", "NA", "qid-space", "order"],
)
def test_fast_path_declines_what_it_cannot_vouch_for(text):
    assert parse_dense_chunk(text, num_features=3, first_line=1) is None


def test_reference_parser_fills_missing_features_with_zero():
    parsed = _reference(b"1 qid:1 1:0.5 3:0.2\n0 qid:1 2:4\n", 3)
    np.testing.assert_array_equal(parsed.features, np.float32([[0.5, 0, 0.2], [0, 4, 0]]))
    assert parsed.line_numbers.tolist() == [1, 2]


def test_reference_parser_skips_blank_and_comment_lines_keeping_line_numbers():
    parsed = _reference(b"# header\n\n1 qid:1 1:1 2:2 3:3\n", 3)
    assert parsed.line_numbers.tolist() == [3]


def test_error_names_file_line_and_token():
    with pytest.raises(LetorFormatError) as error:
        _reference(b"1 qid:1 1:1 2:2 3:3\n1 qid:1 1:1 2:x 3:3\n", 3)
    assert (error.value.path, error.value.line, error.value.token) == ("f.txt", 2, "2:x")
    assert str(error.value).startswith("f.txt:2: non-numeric feature value")


def test_error_survives_pickling():
    import pickle

    error = LetorFormatError("a.txt", 7, "bad", b"tok")
    copy = pickle.loads(pickle.dumps(error))
    assert (copy.path, copy.line, copy.token, str(copy)) == ("a.txt", 7, "tok", str(error))


@pytest.mark.parametrize(
    "line, message",
    [
        (b"1 qid:1 1:1 2:1e39 3:3", "overflows float32"),
        (b"1 qid:99999999999999999999 1:1 2:2 3:3", "64-bit"),
    ],
)
def test_values_that_do_not_fit_are_errors_on_both_paths(line, message):
    dense = b"1 qid:1 1:1 2:2 3:3\n" + line + b"\n"
    assert parse_dense_chunk(dense, num_features=3, first_line=1) is None
    with pytest.raises(LetorFormatError, match=message) as error:
        _reference(dense, 3)
    assert error.value.line == 2
