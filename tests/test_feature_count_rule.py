"""The feature count read from the files: where it came from, and the rule against a stray
wide line (``tfrecords_tools.letor.feature_count``)."""

from __future__ import annotations

import collections
import gzip
import json
import logging
import os

import pytest

from pipelines.convert_cli import main
from tests.conftest import REAL_DATA
from tfrecords_tools.letor.feature_count import FeatureScan, inferred_num_features, scan_letor_file
from tfrecords_tools.letor.letor_parser import LetorFormatError
from tfrecords_tools.synthetic import NUM_FEATURES, SyntheticConfig, generate_letor

HIGHEST = "the highest feature index, first reached at"


def _scan(widths: dict[int, int], *, path: str = "train.txt", widest_line: int = 7):
    return FeatureScan(path, 2, collections.Counter(widths), widest_line)


def _lines(count: int, width: int, *, qid_from: int = 0) -> list[str]:
    values = " ".join(f"{j}:0.5" for j in range(1, width + 1))
    return [f"{i % 3} qid:{qid_from + i // 5} {values}\n" for i in range(count)]


def _run(argv: list[str], capsys) -> tuple[int, str]:
    code = main([*argv, "--no-progress", "--workers", "1", "--log-level", "ERROR"])
    return code, capsys.readouterr().err


# === The rule ===


def test_one_wide_line_among_many_is_refused_naming_it():
    with pytest.raises(LetorFormatError) as info:
        inferred_num_features([_scan({46: 299, 100_000: 1}, widest_line=58)])
    message = str(info.value)
    assert message.startswith("train.txt:58: feature index 100000 on this line, while 297 of ")
    assert "the 300 lines (all but the widest 1%, at least one) reach at most index 46" in message
    assert message.endswith("pass --num-features 100000; otherwise fix this line")


@pytest.mark.parametrize(
    "widths, count",
    [
        ({46: 1000}, 46),  # dense
        ({46: 99, 184: 1}, 184),  # exactly 4 x
        ({3: 10, 100: 1}, 100),  # small counts: up to 100 is always fine
        ({46: 98, 5000: 2}, 5000),  # 2 % of the lines are wide: the data is wide
        ({10: 40, 30: 50, 46: 10}, 46),  # sparse lines that stop early
        ({5000: 1}, 5000),  # a single line
    ],
)
def test_counts_the_rule_accepts(widths, count):
    assert inferred_num_features([_scan(widths)])[0] == count


@pytest.mark.parametrize(
    "widths",
    [{46: 99, 185: 1}, {3: 10, 101: 1}, {46: 298, 5000: 2}],
)
def test_counts_the_rule_refuses(widths):
    with pytest.raises(LetorFormatError, match="--num-features"):
        inferred_num_features([_scan(widths)])


def test_the_lines_of_every_file_count_and_the_first_widest_line_is_named(tmp_path):
    scans = [_scan({46: 150}, path="a.txt"), _scan({46: 100, 999: 1}, path="b.txt", widest_line=3)]
    with pytest.raises(LetorFormatError, match=r"^b\.txt:3: .* 248 of the 251 lines"):
        inferred_num_features(scans)
    scans = [_scan({46: 10, 60: 1}, path="a.txt", widest_line=4), _scan({60: 2}, path="b.txt")]
    assert inferred_num_features(scans) == (60, f"{os.path.abspath('a.txt')}:4")


def test_no_feature_at_all_asks_for_the_count():
    with pytest.raises(
        ValueError, match="no feature index found in the files; pass --num-features"
    ):
        inferred_num_features([_scan({})])


def test_the_scan_reads_gzip_and_skips_what_does_not_parse(tmp_path):
    path = tmp_path / "train.txt.gz"
    text = "1 qid:1 1:0.5 3:0.1\n# comment\nx qid:1 9:1\n2 qid:2 2:0.5 7:0.1 # 99:1\n"
    path.write_bytes(gzip.compress(text.encode()))
    scan = scan_letor_file(str(path))
    assert (scan.max_label, dict(scan.widths), scan.widest_line) == (2, {3: 1, 7: 1}, 4)


# === Real and generated data pass ===


def test_mq2008_passes():
    root = os.path.join(REAL_DATA, "MQ2008", "Fold1")
    if not os.path.isdir(root):
        pytest.skip("MQ2008 is not in ../shared/data")
    scans = [scan_letor_file(os.path.join(root, f"{s}.txt")) for s in ("train", "vali", "test")]
    count, where = inferred_num_features(scans)
    assert count == 46 and where.endswith("Fold1/train.txt:1")


def test_generated_data_passes(tmp_path):
    generate_letor(str(tmp_path), SyntheticConfig(train_queries=20, vali_queries=5, test_queries=5))
    scans = [scan_letor_file(str(tmp_path / f"{s}.txt")) for s in ("train", "vali", "test")]
    assert inferred_num_features(scans)[0] == NUM_FEATURES


# === tfr-convert ===


@pytest.fixture
def wide_dir(tmp_path):
    """300 lines of 46 features, line 58 reaching feature 1000."""
    lines = _lines(300, 46)
    lines[57] = _lines(1, 1000, qid_from=11)[0]
    (tmp_path / "wide").mkdir()
    (tmp_path / "wide" / "train.txt").write_text("".join(lines))
    return tmp_path / "wide"


def test_tfr_convert_refuses_the_wide_line(wide_dir, tmp_path, capsys):
    code, err = _run(["--input", str(wide_dir), "--output", str(tmp_path / "out")], capsys)
    assert code == 1 and err.startswith(
        f"tfr-convert: error: {wide_dir / 'train.txt'}:58: feature index 1000 on this line"
    )
    assert not (tmp_path / "out").exists()


def test_an_explicit_count_keeps_todays_behaviour(wide_dir, tmp_path, capsys):
    code, err = _run(
        ["--input", str(wide_dir), "--output", str(tmp_path / "a"), "--num-features", "46"], capsys
    )
    assert code == 1 and "train.txt:58: feature index 47 is above the feature count 46" in err
    argv = ["--input", str(wide_dir), "--output", str(tmp_path / "b"), "--num-features", "1000"]
    assert _run(argv, capsys)[0] == 0
    manifest = json.loads((tmp_path / "b" / "manifest.json").read_text())
    assert (manifest["num_features"], manifest["num_features_source"]) == (1000, "given")


def test_the_inferred_count_is_logged_and_recorded(tmp_path, caplog):
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "train.txt").write_text("".join(_lines(8, 4) + _lines(4, 6, qid_from=2)))
    argv = ["--input", str(tmp_path / "in"), "--output", str(tmp_path / "out"), "--no-progress"]
    with caplog.at_level(logging.INFO, logger="tfrecords_tools.letor.feature_count"):
        assert main(argv) == 0
    where = f"{tmp_path / 'in' / 'train.txt'}:9"
    assert f"feature count 6 inferred from the files: {HIGHEST} {where}" in caplog.text
    manifest = json.loads((tmp_path / "out" / "manifest.json").read_text())
    assert (manifest["num_features"], manifest["num_features_source"]) == (6, where)


def test_a_known_count_is_recorded_as_the_datasets(tmp_path, capsys):
    argv = ["--input", "synthetic", "--synthetic-lists", "3", "--output", str(tmp_path / "out")]
    assert _run(argv, capsys)[0] == 0
    manifest = json.loads((tmp_path / "out" / "manifest.json").read_text())
    assert manifest["num_features_source"] == "dataset"


def test_the_beam_converter_applies_the_same_rule(wide_dir, tmp_path):
    from tfrecords_tools.beam.beam_config import BeamConfig
    from tfrecords_tools.beam.beam_convert import convert_on_beam
    from tfrecords_tools.convert import ConvertConfig

    config = ConvertConfig(input=str(wide_dir), output=str(tmp_path / "out"))
    with pytest.raises(LetorFormatError, match=r"train\.txt:58: feature index 1000 on this line"):
        convert_on_beam(BeamConfig(convert=config))
    assert os.listdir(tmp_path) == ["wide"]
