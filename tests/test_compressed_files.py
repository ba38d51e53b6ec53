"""Plain and gzip files are told apart by their first bytes, whatever their names."""

from __future__ import annotations

import gzip
import io

import pytest

from tfrecords_tools.compressed_files import (
    GZIP_READ_ERRORS,
    is_gzip,
    open_maybe_gzip,
)

TEXT = b"2 qid:1 1:0.5 2:0.25\n0 qid:1 1:0 2:1\n"


@pytest.mark.parametrize(
    "name, stored, compressed",
    [
        ("train.txt", TEXT, False),
        ("train.txt.gz", gzip.compress(TEXT, mtime=0), True),
        ("train.txt", gzip.compress(TEXT, mtime=0), True),  # gzip data without a .gz name
        ("train.gz", TEXT, False),  # a .gz name on plain text
    ],
)
def test_the_first_bytes_decide_not_the_name(tmp_path, name, stored, compressed):
    path = tmp_path / name
    path.write_bytes(stored)
    assert is_gzip(str(path)) is compressed
    with open_maybe_gzip(str(path)) as stream:
        assert stream.read() == TEXT


@pytest.mark.parametrize("stored", [b"", b"\x1f"])
def test_files_shorter_than_the_magic_bytes_are_plain(tmp_path, stored):
    path = tmp_path / "short.txt"
    path.write_bytes(stored)
    assert not is_gzip(str(path))
    with open_maybe_gzip(str(path)) as stream:
        assert stream.read() == stored


def test_an_opener_supplies_the_stored_bytes():
    stored = {"remote/a": gzip.compress(TEXT, mtime=0), "remote/b": TEXT}

    def opener(path):
        return io.BytesIO(stored[path])

    assert is_gzip("remote/a", opener=opener)
    assert not is_gzip("remote/b", opener=opener)
    for path in stored:
        raw = opener(path)
        stream = gzip.GzipFile(fileobj=raw) if is_gzip(path, opener=opener) else raw
        assert stream.read() == TEXT


def test_truncated_gzip_raises_one_of_the_listed_errors(tmp_path):
    path = tmp_path / "cut.txt"
    path.write_bytes(gzip.compress(TEXT * 50, mtime=0)[:-12])
    with pytest.raises(GZIP_READ_ERRORS), open_maybe_gzip(str(path)) as stream:
        stream.read()


def test_a_missing_file_is_not_found(tmp_path):
    with pytest.raises(FileNotFoundError):
        is_gzip(str(tmp_path / "absent.txt"))
