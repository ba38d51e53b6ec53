"""The TFRecord framing check and the record reader name the file and the record."""

from __future__ import annotations

import pytest
import tensorflow as tf

from tfr_rankformer.inputs.record_checks import (  # noqa: E402
    RecordFileError,
    check_tfrecord_file,
    read_records,
)


def _write(path, count: int = 4) -> bytes:
    with tf.io.TFRecordWriter(str(path)) as writer:
        for i in range(count):
            writer.write(bytes([i]) * (10 + i))
    return path.read_bytes()


def test_a_whole_file_passes_with_its_count(tmp_path):
    path = tmp_path / "a.tfrecord"
    _write(path)
    assert check_tfrecord_file(str(path), expected_records=4) == 4
    assert [n for n, _ in read_records(str(path))] == [1, 2, 3, 4]


@pytest.mark.parametrize("cut", [1, 5, 16])
def test_a_file_cut_short_names_its_last_record(tmp_path, cut):
    path = tmp_path / "a.tfrecord"
    data = _write(path)
    path.write_bytes(data[:-cut])

    with pytest.raises(RecordFileError) as info:
        check_tfrecord_file(str(path))
    assert (info.value.path, info.value.record) == (str(path), 4)
    assert "truncated" in str(info.value)
    # tf.data's own error, met while reading, is named the same way.
    with pytest.raises(RecordFileError) as info:
        list(read_records(str(path)))
    assert (info.value.path, info.value.record) == (str(path), 4)


def test_a_flipped_byte_fails_its_records_checksum(tmp_path):
    path = tmp_path / "a.tfrecord"
    data = bytearray(_write(path))
    data[12 + 10 + 4 + 12 + 3] ^= 1  # inside the second record's data
    path.write_bytes(bytes(data))

    with pytest.raises(RecordFileError, match="record 2: corrupt TFRecord data: bad data"):
        check_tfrecord_file(str(path))


def test_another_count_than_the_manifests_is_an_error(tmp_path):
    path = tmp_path / "a.tfrecord"
    _write(path, 3)
    with pytest.raises(RecordFileError, match="holds 3 records; its manifest lists 4"):
        check_tfrecord_file(str(path), expected_records=4)
