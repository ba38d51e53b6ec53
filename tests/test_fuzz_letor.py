"""Fuzzing tfr-convert with generated LETOR files (Hypothesis).

Each generated file (random and edge-case tokens, numbers at the edges of
float32 and int64, separators, CRLF, comments, blank lines, encodings, gzip,
truncation) is read by a deliberately simple reference reading written here
from the format's definition, and converted with ``tfr-convert``. Either both
accept it and the shards hold the same lists, or the reference rejects it and
``tfr-convert`` fails with one ``tfr-convert: error: FILE:LINE: ...`` line at a
line the reference also rejects, leaving nothing behind. A traceback fails the
test. The parsers are also compared directly on many more lines.

Profiles (``tests/conftest.py``): ``default`` keeps this within about a minute;
``HYPOTHESIS_PROFILE=long`` (``make test-all``) runs many more examples.
"""

from __future__ import annotations

import contextlib
import gzip
import io
import json
import math
import os
import re
import shutil
import tempfile

import numpy as np
import pytest
from hypothesis import HealthCheck, event, example, given, settings
from hypothesis import strategies as st

from tfrecords_tools.letor.letor_fast_path import parse_dense_chunk
from tfrecords_tools.letor.letor_parser import LetorFormatError, parse_letor_lines

D = 3  # features
R = 2  # maximum relevance

# ---------------------------------------------------------------------------
# The reference reading: the format's definition, one line at a time.
# ---------------------------------------------------------------------------

_INT = re.compile(rb"[+-]?[0-9]+\Z")
_FLOAT = re.compile(rb"[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?\Z")


class Rejected(Exception):
    """The reference reading rejects the file; ``lines`` holds every bad line (1-based),
    empty when the fault is the file's (no items, broken gzip)."""

    def __init__(self, lines: set[int]):
        super().__init__(sorted(lines))
        self.lines = lines


def _line_problem(tokens: list[bytes], max_label: int) -> tuple[int, int, np.ndarray] | None:
    """``(label, qid, features)`` of a line's tokens, or ``None`` if the line is bad."""
    if len(tokens) < 3 or not _INT.match(tokens[0]) or not tokens[1].startswith(b"qid:"):
        return None
    label, qid_text = int(tokens[0]), tokens[1][4:]
    if not 0 <= label <= max_label or not _INT.match(qid_text):
        return None
    qid = int(qid_text)
    if not -(2**63) <= qid < 2**63:
        return None
    features, previous = np.zeros(D, np.float32), 0
    for token in tokens[2:]:
        index_text, colon, value_text = token.partition(b":")
        if not colon or not _INT.match(index_text) or not _FLOAT.match(value_text):
            return None
        index = int(index_text)
        if not previous < index <= D:
            return None
        with np.errstate(over="ignore"):
            value = np.float32(float(value_text))
        if not math.isfinite(value):
            return None
        features[index - 1], previous = value, index
    return label, qid, features


def reference_read(
    data: bytes, *, compressed: bool, max_label: int = R, contiguous: bool = True
) -> list[tuple[int, list[int], np.ndarray]]:
    """The lists of a LETOR file: ``(qid, labels, [n, D] float32 features)``.

    ``max_label`` bounds the labels; ``contiguous`` rejects a qid that comes back
    after other qids (both are the list writer's checks, not the line parser's).

    Raises:
      Rejected: with the set of bad lines.
    """
    if compressed:
        try:
            data = gzip.decompress(data)
        except (EOFError, OSError):
            raise Rejected(set()) from None
    lists, bad, seen = [], set(), set()
    for number, raw in enumerate(data.split(b"\n"), start=1):
        tokens = raw.partition(b"#")[0].split()
        if not tokens:
            continue
        item = _line_problem(tokens, max_label)
        if item is None:
            bad.add(number)
            continue
        label, qid, features = item
        if lists and lists[-1][0] == qid:
            lists[-1][1].append(label)
            lists[-1][2].append(features)
        elif qid in seen and contiguous:
            bad.add(number)  # a qid that reappears after other qids
        else:
            seen.add(qid)
            lists.append((qid, [label], [features]))
    if bad or not lists:
        raise Rejected(bad)
    return [(qid, labels, np.stack(rows)) for qid, labels, rows in lists]


# ---------------------------------------------------------------------------
# Generated files.
# ---------------------------------------------------------------------------

INT_EDGES = [0, 1, 2, 3, -1, -0, 2**31 - 1, 2**31, 2**63 - 1, 2**63, -(2**63), -(2**63) - 1, 10**30]
FLOAT_EDGES = [
    "3.4028235e38",  # the largest float32, as numpy prints it
    "-3.4028235e38",
    "3.4028235677973366e38",  # just below the midpoint to infinity: rounds to the largest
    "3.4028235677973367e38",  # above it: overflows
    "3.4028236e38",
    "1.4e-45",  # the smallest float32 subnormal
    "1e-46",  # underflows to 0
    "1e308",
    "1e400",
    "-0",
    "-0.0",
    "nan",
    "inf",
    "-inf",
    "Infinity",
    "0x10",
    "1_0",
    "+.5",
    "5.",
    ".5",
    "1e",
    "",
    "abc",
    "1,5",
    "1.5f",
]
JUNK = [b"", b"x", b"qid:", b"QID:1", b"1:2:3", b"\xff\xfe", b"\xc3\xa9", b"\x00", b"#", b":"]

ints = st.one_of(st.integers(-(2**70), 2**70), st.sampled_from(INT_EDGES)).map(
    lambda v: str(v).encode()
)
hex_or_sep = st.sampled_from([b"0x1", b"0X2", b"1_0", b"+1", b"01", b"1.0", b"1e0"])
valid_labels = st.integers(0, R).map(lambda v: str(v).encode())
# Hypothesis picks a branch of one_of uniformly: repeated branches weigh more.
labels = st.one_of(valid_labels, valid_labels, valid_labels, valid_labels, ints, hex_or_sep)
plain_floats = st.floats(width=32, allow_nan=False, allow_infinity=False).map(
    lambda v: repr(v).encode()
)
# Valid in every way: float32 values, and the accepted spellings at float32's edges.
clean_floats = st.one_of(
    plain_floats,
    plain_floats,
    plain_floats,
    st.sampled_from(FLOAT_EDGES[:3] + FLOAT_EDGES[5:7] + FLOAT_EDGES[9:11]).map(str.encode),
    st.sampled_from([b"+.5", b"5.", b".5", b"1E+05", b"007"]),
)
floats = st.one_of(
    plain_floats,
    st.floats(width=32).map(lambda v: repr(v).encode()),
    st.floats().map(lambda v: repr(v).encode()),
    st.floats(allow_nan=False, allow_infinity=False).map(lambda v: f"{v:.9g}".encode()),
    st.sampled_from(FLOAT_EDGES).map(str.encode),
    st.integers(-(2**64), 2**64).map(lambda v: str(v).encode()),
)
separators = st.sampled_from([b" ", b" ", b" ", b"\t", b"  ", b" \t"])


@st.composite
def feature_tokens(draw, wild: bool) -> list[bytes]:
    kinds = ["dense"] * 6 + ["sparse", "sparse"] + (["indices"] if wild else [])
    kind = draw(st.sampled_from(kinds))
    if kind == "dense":
        indices = list(range(1, D + 1))
    elif kind == "sparse":
        indices = sorted(draw(st.sets(st.integers(1, D), min_size=1)))
    else:  # out of order, duplicated or out of range
        odd = st.sampled_from([0, 1, 2, 3, 4, -1, 2**40])
        indices = draw(st.lists(odd, min_size=1, max_size=4))
    values = floats if wild else clean_floats
    return [str(i).encode() + b":" + draw(values) for i in indices]


@st.composite
def letor_line(draw, qid: int, wild: bool = True) -> bytes:
    """One line of list ``qid``; ``wild`` lines may hold anything, the others are valid."""
    label = draw(labels if wild else valid_labels)
    tokens = [label, b"qid:" + str(qid).encode(), *draw(feature_tokens(wild))]
    if wild and draw(st.integers(0, 3)) == 0:  # one token replaced by junk or an edge value
        position = draw(st.integers(0, len(tokens) - 1))
        qids = ints.map(lambda v: b"qid:" + v)
        tokens[position] = draw(st.one_of(st.sampled_from(JUNK), ints, qids))
    separator = draw(separators)
    line = separator.join(tokens)
    if draw(st.booleans()):
        line += draw(st.sampled_from([b" ", b"\t", b" #docid = GX-1", b"#\xe9t\xe9 ", b" # a#b"]))
    return line


@st.composite
def letor_file(draw) -> tuple[bytes, str]:
    """``(bytes, file name)``: contiguous lists of valid lines, in half the files one
    line drawn from every token's whole range, maybe re-encoded, compressed or cut."""
    qids = draw(st.lists(st.integers(-3, 6), min_size=1, max_size=4, unique=True))
    if draw(st.integers(0, 5)) == 0:
        qids.append(draw(st.sampled_from(qids)))  # may reappear after other qids
    lines = []
    for qid in qids:
        for _ in range(draw(st.integers(1, 4))):
            lines.append(draw(letor_line(qid, wild=False)))
            if draw(st.integers(0, 7)) == 0:
                lines.append(draw(st.sampled_from([b"", b"   ", b"# comment", b"\t#x"])))
    if draw(st.booleans()):
        position = draw(st.integers(0, len(lines) - 1))
        lines[position] = draw(letor_line(draw(st.sampled_from(qids)), wild=True))
    if draw(st.integers(0, 9)) == 0:
        junk = draw(st.binary(max_size=12)).replace(b"\n", b"")
        lines.insert(draw(st.integers(0, len(lines))), junk)
    newline = draw(st.sampled_from([b"\n", b"\n", b"\r\n"]))
    data = newline.join(lines) + draw(st.sampled_from([newline, b""]))
    name = "train.txt"
    encoding = draw(st.sampled_from(["plain"] * 12 + ["bom", "utf16", "gzip", "gzip-cut", "cut"]))
    if encoding == "bom":
        data = b"\xef\xbb\xbf" + data
    elif encoding == "utf16":
        data = data.decode("latin-1").encode("utf-16")
    elif encoding in ("gzip", "gzip-cut"):
        data, name = gzip.compress(data, mtime=0), "train.txt.gz"
    if encoding in ("gzip-cut", "cut") and len(data) > 1:
        data = data[: draw(st.integers(1, len(data) - 1))]
    return data, name


# ---------------------------------------------------------------------------
# The properties.
# ---------------------------------------------------------------------------


def _converted_lists(out_dir: str) -> list[tuple[int, list[int], np.ndarray]]:
    import tensorflow as tf
    from tensorflow_serving.apis import input_pb2

    with open(os.path.join(out_dir, "manifest.json"), encoding="utf-8") as f:
        files = json.load(f)["splits"]["train"]["files"]
    lists = []
    for name in files:
        for record in tf.data.TFRecordDataset(os.path.join(out_dir, name)):
            elwc = input_pb2.ExampleListWithContext.FromString(record.numpy())
            items = [e.features.feature for e in elwc.examples]
            lists.append(
                (
                    elwc.context.features.feature["qid"].int64_list.value[0],
                    [int(f["relevance"].float_list.value[0]) for f in items],
                    np.array([f["features"].float_list.value for f in items], np.float32),
                )
            )
    return lists


def _convert(data: bytes, name: str) -> tuple[int, str, str, str, list]:
    """Runs tfr-convert on the file; returns ``(rc, stderr, path, root, lists or [])``."""
    from pipelines.convert_cli import main

    root = tempfile.mkdtemp(prefix="fuzz-letor-")
    try:
        os.makedirs(os.path.join(root, "in"))
        path = os.path.join(root, "in", name)
        with open(path, "wb") as f:
            f.write(data)
        err, out = io.StringIO(), io.StringIO()
        argv = ["--input", os.path.join(root, "in"), "--output", os.path.join(root, "out")]
        argv += ["--num-features", str(D), "--max-relevance", str(R), "--workers", "1"]
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(out):
            rc = main(argv + ["--no-progress", "--log-level", "ERROR"])
        lists = _converted_lists(os.path.join(root, "out")) if rc == 0 else []
        leftovers = sorted(os.listdir(root))
        return rc, err.getvalue(), path, leftovers, lists
    finally:
        shutil.rmtree(root)


def _check_against_reference(data: bytes, name: str) -> None:
    rc, err, path, leftovers, lists = _convert(data, name)
    try:
        expected = reference_read(data, compressed=name.endswith(".gz"))
    except Rejected as rejected:
        event("rejected at a line" if rejected.lines else "rejected as a whole")
        assert rc != 0, f"tfr-convert accepted a file the reference rejects at {rejected}"
        assert leftovers == ["in"], f"left behind: {leftovers}"
        assert err.count("\n") == 1 and "Traceback" not in err, err
        found = re.fullmatch(re.escape(f"tfr-convert: error: {path}") + r"(?::(\d+))?: .+\n", err)
        assert found, err
        if rejected.lines:
            assert found.group(1) and int(found.group(1)) in rejected.lines, (err, rejected)
        return
    event("converted")
    assert rc == 0, f"tfr-convert rejected a file the reference accepts: {err}"
    assert [(q, labels) for q, labels, _ in lists] == [(q, labels) for q, labels, _ in expected]
    for (_, _, got), (_, _, want) in zip(lists, expected):
        np.testing.assert_array_equal(got, want)


FUZZ_SETTINGS = dict(deadline=None, suppress_health_check=[HealthCheck.too_slow])
# The profile's example count (tests/conftest.py) for the CLI; the parsers alone are
# cheap enough for three times as many.
CLI_EXAMPLES = settings.default.max_examples


@pytest.mark.filterwarnings("ignore")
@settings(**FUZZ_SETTINGS, max_examples=CLI_EXAMPLES)
@given(letor_file())
@example((b"1 qid:1 1:3.4028235e38 2:0 3:1\n", "train.txt"))
@example((b"1 qid:1 1:3.4028236e38 2:0 3:1\n", "train.txt"))
@example((b"0x1 qid:1 1:0 2:0 3:1\n", "train.txt"))
@example((b"99999999999999999999999 qid:1 1:0\n", "train.txt"))
@example((gzip.compress(b"1 qid:1 1:0 2:0 3:1\n" * 50, mtime=0)[:40], "train.txt.gz"))
def test_generated_files_convert_like_the_reference_or_fail_with_file_and_line(file):
    _check_against_reference(*file)


lines_only = st.lists(letor_line(1), min_size=1, max_size=6)


@settings(**FUZZ_SETTINGS, max_examples=3 * CLI_EXAMPLES)
@given(lines_only)
def test_parsers_agree_with_the_reference_line_by_line(lines):
    """Many more lines than the CLI test: the fast path and the reference parser agree
    with the reference reading, and reject exactly what it rejects."""
    data = b"\n".join(lines) + b"\n"
    unbounded = dict(compressed=False, max_label=2**63 - 1, contiguous=False)
    try:
        expected = reference_read(data, **unbounded)
    except Rejected as rejected:
        with pytest.raises(LetorFormatError) as info:
            parse_letor_lines(data.split(b"\n"), num_features=D, path="f", first_line=1)
        assert info.value.line in rejected.lines, (info.value, rejected)
        assert parse_dense_chunk(data, num_features=D, first_line=1) is None
        return
    parsed = parse_letor_lines(data.split(b"\n"), num_features=D, path="f", first_line=1)
    want = np.concatenate([x for _, _, x in expected])
    np.testing.assert_array_equal(parsed.features, want)
    fast = parse_dense_chunk(data, num_features=D, first_line=1)
    if fast is not None:
        np.testing.assert_array_equal(fast.features, want)
        np.testing.assert_array_equal(fast.labels, parsed.labels)
        np.testing.assert_array_equal(fast.qids, parsed.qids)
