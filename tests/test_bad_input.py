"""Bad LETOR input: tfr-convert fails cleanly, naming the file, the line and the token.

Every failing conversion must return a non-zero code, print ``tfr-convert: error:``
with ``<path>:<line>`` and the offending token, and leave neither the output
directory nor a ``.partial`` scratch directory behind. Harmless irregularities
(CRLF, trailing comments, blank lines) must convert.
"""

from __future__ import annotations

import gzip
import json
import os
import random
import re
from pathlib import Path

import pytest

from pipelines.convert_cli import main
from tfrecords_tools.convert import ConvertConfig, convert
from tfrecords_tools.letor.letor_fast_path import parse_dense_chunk
from tfrecords_tools.letor.letor_parser import LetorFormatError

NUM_FEATURES = 3
MAX_RELEVANCE = 2

# Lines 1, 2 and 4 of every single-bad-line file; the bad line is line 3.
GOOD_BEFORE = ["1 qid:1 1:0.5 2:0.1 3:0.2", "0 qid:1 1:0.4 2:0.3 3:0.9"]
GOOD_AFTER = ["2 qid:2 1:0.7 2:0.2 3:0.1"]
BAD_LINE_NO = 3


def _input_dir(tmp_path: Path) -> Path:
    return tmp_path / "in"


def _output_dir(tmp_path: Path) -> Path:
    return tmp_path / "out"


def _write(tmp_path: Path, data: bytes | str, name: str = "train.txt") -> Path:
    """Writes one split file (bytes exactly as given) into ``tmp_path/in``."""
    directory = _input_dir(tmp_path)
    directory.mkdir(exist_ok=True)
    path = directory / name
    path.write_bytes(data.encode() if isinstance(data, str) else data)
    return path


def _text(lines: list[str], newline: str = "\n") -> str:
    return "".join(line + newline for line in lines)


def _dense_lines(count: int, *, per_list: int = 10) -> list[str]:
    """``count`` valid dense lines of 3 features, ``per_list`` items per qid, labels 0..2."""
    return [
        f"{i % 3} qid:{i // per_list} 1:{(i % 97) / 97:.4f} 2:{(i % 13) / 13:.4f} 3:{i % 7}"
        for i in range(count)
    ]


def _cli(tmp_path: Path, *extra: str, max_relevance: int = MAX_RELEVANCE) -> int:
    return main(
        [
            "--input",
            str(_input_dir(tmp_path)),
            "--output",
            str(_output_dir(tmp_path)),
            "--num-features",
            str(NUM_FEATURES),
            "--max-relevance",
            str(max_relevance),
            "--no-progress",
            *extra,
        ]
    )


def _config(tmp_path: Path, **overrides) -> ConvertConfig:
    values = dict(
        input=str(_input_dir(tmp_path)),
        output=str(_output_dir(tmp_path)),
        num_features=NUM_FEATURES,
        max_relevance=MAX_RELEVANCE,
    )
    values.update(overrides)
    return ConvertConfig(**values)


def _assert_nothing_left(tmp_path: Path) -> None:
    """Neither the output nor a ``.out.partial-*`` scratch directory remains."""
    assert not _output_dir(tmp_path).exists()
    leftovers = sorted(os.listdir(tmp_path))
    assert leftovers == ["in"], f"left behind: {leftovers}"
    assert not any(".partial" in name for name in leftovers)


def _failed_cleanly(tmp_path: Path, rc: int, capsys) -> str:
    """Checks a failed CLI run and returns its stderr."""
    captured = capsys.readouterr()
    assert rc != 0
    assert "tfr-convert: error: " in captured.err
    assert "wrote " not in captured.out
    _assert_nothing_left(tmp_path)
    return captured.err


def _read_manifest(tmp_path: Path) -> dict:
    with open(_output_dir(tmp_path) / "manifest.json", encoding="utf-8") as f:
        return json.load(f)


# ---------------------------------------------------------------------------
# One bad line among good ones, through the CLI.
# ---------------------------------------------------------------------------

BAD_LINES = [
    # (bad line 3, offending token, part of the message)
    pytest.param("x qid:1 1:0.5", "x", "malformed label", id="malformed-label"),
    pytest.param("-1 qid:1 1:0.5 2:0.3 3:0.1", "-1", "non-negative", id="negative-label"),
    pytest.param("1 1:0.5 2:0.3", "1:0.5", "missing qid", id="missing-qid"),
    pytest.param("1 qid:abc 1:0.5", "qid:abc", "malformed qid", id="malformed-qid"),
    pytest.param("1 qid:1 1:abc 2:0.3", "1:abc", "non-numeric", id="non-numeric-value"),
    pytest.param("1 qid:1 1:nan 2:0.3 3:0.1", "1:nan", "NaN or infinite", id="nan-value"),
    pytest.param("1 qid:1 1:0.5 2:inf 3:0.1", "2:inf", "NaN or infinite", id="inf-value"),
    pytest.param("1 qid:1 0:0.5 1:0.3", "0:0.5", "is not >= 1", id="index-zero"),
    pytest.param("1 qid:1 -1:0.5 2:0.3", "-1:0.5", "is not >= 1", id="negative-index"),
    pytest.param("1 qid:1 1:0.1 1:0.2", "1:0.2", "duplicated", id="duplicated-index"),
    pytest.param(
        "1 qid:1 2:0.1 1:0.2 2:0.3", "2:0.3", "--duplicate-features", id="unsorted-duplicate"
    ),
    pytest.param("1 qid:1 1:0.1 4:0.5", "4:0.5", "above the feature count 3", id="index-too-big"),
    pytest.param("1 qid:1", "qid:1", "no features", id="no-features"),
]


@pytest.mark.parametrize("bad_line, token, message", BAD_LINES)
def test_bad_line_is_reported_and_nothing_is_written(tmp_path, capsys, bad_line, token, message):
    path = _write(tmp_path, _text(GOOD_BEFORE + [bad_line] + GOOD_AFTER))

    err = _failed_cleanly(tmp_path, _cli(tmp_path), capsys)

    assert f"{path}:{BAD_LINE_NO}: " in err
    assert message in err
    assert f"(offending token: {token!r})" in err


@pytest.mark.parametrize("bad_line, token, message", BAD_LINES)
def test_bad_line_error_attributes(tmp_path, bad_line, token, message):
    """The library raises LetorFormatError whose parts match its message."""
    path = _write(tmp_path, _text(GOOD_BEFORE + [bad_line] + GOOD_AFTER))

    with pytest.raises(LetorFormatError) as info:
        convert(_config(tmp_path, workers=1), progress=False)

    error = info.value
    assert error.path == str(path)
    assert error.line == BAD_LINE_NO
    assert error.token == token
    assert str(error) == f"{path}:{BAD_LINE_NO}: {error.message} (offending token: {token!r})"
    _assert_nothing_left(tmp_path)


def test_label_above_max_relevance(tmp_path, capsys):
    lines = GOOD_BEFORE + ["3 qid:1 1:0.5 2:0.1 3:0.2"] + GOOD_AFTER
    path = _write(tmp_path, _text(lines))

    err = _failed_cleanly(tmp_path, _cli(tmp_path, max_relevance=2), capsys)

    assert f"{path}:{BAD_LINE_NO}: " in err
    assert "maximum relevance 2" in err
    assert "(offending token: '3')" in err


def test_label_within_raised_max_relevance_is_accepted(tmp_path, capsys):
    """Control for the case above: the same file converts once the maximum allows label 3."""
    _write(tmp_path, _text(GOOD_BEFORE + ["3 qid:1 1:0.5 2:0.1 3:0.2"] + GOOD_AFTER))

    assert _cli(tmp_path, max_relevance=3) == 0
    capsys.readouterr()
    manifest = _read_manifest(tmp_path)
    assert manifest["max_relevance"] == 3
    assert manifest["splits"]["train"]["label_histogram"] == {"0": 1, "1": 1, "2": 1, "3": 1}


@pytest.mark.parametrize(
    "qids, reappears_at, began_at",
    [
        pytest.param([1, 2, 1], 3, 1, id="1-2-1"),
        pytest.param([1, 1, 2, 2, 1, 3], 5, 1, id="1-1-2-2-1-3"),
        pytest.param([5, 6, 6, 7, 6], 5, 2, id="5-6-6-7-6"),
    ],
)
def test_qid_that_reappears(tmp_path, capsys, qids, reappears_at, began_at):
    lines = [f"{i % 3} qid:{qid} 1:0.{i} 2:0.5 3:0.25" for i, qid in enumerate(qids)]
    path = _write(tmp_path, _text(lines))
    qid = qids[reappears_at - 1]

    err = _failed_cleanly(tmp_path, _cli(tmp_path), capsys)

    assert f"{path}:{reappears_at}: " in err
    assert f"qid {qid} reappears" in err
    assert f"began at line {began_at}" in err
    assert f"(offending token: 'qid:{qid}')" in err


@pytest.mark.parametrize(
    "content",
    [
        pytest.param("", id="zero-bytes"),
        pytest.param("\n\n   \n", id="blank-lines-only"),
        pytest.param("# a header\n\n#another comment\n", id="comments-only"),
    ],
)
def test_empty_file(tmp_path, capsys, content):
    path = _write(tmp_path, content)

    err = _failed_cleanly(tmp_path, _cli(tmp_path), capsys)

    assert f"{path}: " in err
    assert "empty" in err


def _gzip_of_valid_lines(num_lines: int = 600) -> bytes:
    rng = random.Random(0)
    lines = [
        f"{rng.randint(0, 2)} qid:{i // 20} 1:{rng.random():.6f} 2:{rng.random():.6f} "
        f"3:{rng.random():.6f}"
        for i in range(num_lines)
    ]
    return gzip.compress(_text(lines).encode())


def test_truncated_gzip(tmp_path, capsys):
    data = _gzip_of_valid_lines()
    path = _write(tmp_path, data[: len(data) // 2], name="train.txt.gz")

    err = _failed_cleanly(tmp_path, _cli(tmp_path), capsys)

    assert re.search(re.escape(str(path)) + r":\d+: ", err), err
    assert "gzip" in err
    assert "truncated" in err


def test_complete_gzip_converts(tmp_path, capsys):
    """Control for the truncated case: the whole gzip converts."""
    _write(tmp_path, _gzip_of_valid_lines(), name="train.txt.gz")

    assert _cli(tmp_path) == 0
    capsys.readouterr()
    train = _read_manifest(tmp_path)["splits"]["train"]
    assert (train["num_lists"], train["num_items"]) == (30, 600)


# ---------------------------------------------------------------------------
# Irregular but valid input converts.
# ---------------------------------------------------------------------------

ACCEPTED_LINES = [
    "2 qid:10 1:0.5 2:0.1 3:0.2",
    "0 qid:10 1:0.4 2:0.3 3:0.9",
    "1 qid:10 1:0.1 2:0.0 3:0.7",
    "0 qid:11 1:0.9 2:0.8 3:0.1",
    "2 qid:11 1:0.2 2:0.6 3:0.3",
    "1 qid:12 1:0.3 2:0.3 3:0.3",
]
ACCEPTED_LABELS = {"0": 2, "1": 2, "2": 2}


def _with_comments(lines: list[str]) -> list[str]:
    return [
        f"{line} #docid = GX{i:03d}-00-{i} inc = 1 prob = 0.0{i}" for i, line in enumerate(lines)
    ]


def _with_blank_lines(lines: list[str]) -> list[str]:
    return lines[:2] + ["", "   "] + lines[2:4] + ["", "\t"] + lines[4:]


@pytest.mark.parametrize(
    "text, num_lines",
    [
        pytest.param(_text(ACCEPTED_LINES, "\r\n"), 6, id="crlf"),
        pytest.param(_text(_with_comments(ACCEPTED_LINES)), 6, id="trailing-comments"),
        pytest.param(_text(_with_blank_lines(ACCEPTED_LINES)), 10, id="blank-lines"),
        pytest.param(
            _text(_with_blank_lines(_with_comments(ACCEPTED_LINES)), "\r\n"),
            10,
            id="crlf-comments-blank-lines",
        ),
        pytest.param(_text(ACCEPTED_LINES)[:-1], 6, id="no-final-newline"),
    ],
)
def test_irregular_but_valid_input_converts(tmp_path, capsys, text, num_lines):
    _write(tmp_path, text)

    rc = _cli(tmp_path)

    captured = capsys.readouterr()
    assert rc == 0, captured.err
    assert "train 3 lists / 6 items" in captured.out
    train = _read_manifest(tmp_path)["splits"]["train"]
    assert train["num_lists"] == 3
    assert train["num_items"] == 6
    assert train["label_histogram"] == ACCEPTED_LABELS
    assert train["input"]["lines"] == num_lines
    assert not any(".partial" in name for name in os.listdir(tmp_path))


# ---------------------------------------------------------------------------
# Several blocks, parsing workers, and the dense fast path.
# ---------------------------------------------------------------------------

BIG_LINES = 2000
BIG_BAD_AT = 1990  # 1-based line number of the bad line
BIG_BAD_QID = (BIG_BAD_AT - 1) // 10  # the qid of the line it replaces

BLOCK_CASES = [
    # (bad line, offending token)
    pytest.param(f"1 qid:{BIG_BAD_QID} 1:nan 2:0.1 3:0.2", "1:nan", id="nan"),
    pytest.param(f"x qid:{BIG_BAD_QID} 1:0.5 2:0.1 3:0.2", "x", id="malformed-label"),
    pytest.param(f"1 qid:{BIG_BAD_QID} 1:0.5 1:0.1 3:0.2", "1:0.1", id="duplicated-index"),
    pytest.param(f"1 qid:{BIG_BAD_QID} 1:0.5 2:0.1 4:0.2", "4:0.2", id="index-too-big"),
    pytest.param(f"3 qid:{BIG_BAD_QID} 1:0.5 2:0.1 3:0.2", "3", id="label-above-max"),
    # qid 3 belongs to lines 31..40: it comes back many blocks later.
    pytest.param("1 qid:3 1:0.5 2:0.1 3:0.2", "qid:3", id="qid-reappears"),
]


def _big_file_with(bad_line: str) -> str:
    lines = _dense_lines(BIG_LINES)
    lines[BIG_BAD_AT - 1] = bad_line
    return _text(lines)


@pytest.mark.parametrize("bad_line, token", BLOCK_CASES)
def test_same_line_number_with_one_and_two_workers(tmp_path, bad_line, token):
    chunk_bytes = 4096
    path = _write(tmp_path, _big_file_with(bad_line))
    assert path.stat().st_size > 10 * chunk_bytes  # the file spans many blocks

    errors = {}
    for workers in (1, 2):
        with pytest.raises(LetorFormatError) as info:
            convert(_config(tmp_path, workers=workers, chunk_bytes=chunk_bytes), progress=False)
        errors[workers] = info.value
        _assert_nothing_left(tmp_path)

    for error in errors.values():
        assert error.path == str(path)
        assert error.line == BIG_BAD_AT
        assert error.token == token
    assert str(errors[1]) == str(errors[2])


def test_many_blocks_of_valid_lines_convert_with_two_workers(tmp_path):
    """Control for the workers test: without the bad line the same file converts."""
    _write(tmp_path, _text(_dense_lines(BIG_LINES)))

    manifests = convert(_config(tmp_path, workers=2, chunk_bytes=4096), progress=False)

    train = manifests[0].splits["train"]
    assert (train.num_lists, train.num_items) == (BIG_LINES // 10, BIG_LINES)
    assert _read_manifest(tmp_path)["splits"]["train"]["num_items"] == BIG_LINES


DENSE_LINES = 3000
DENSE_BAD_AT = 1777


def test_dense_file_takes_the_fast_path():
    """The premise of the next test: valid dense lines are parsed by pyarrow, not rejected."""
    data = _text(_dense_lines(DENSE_LINES)).encode()
    parsed = parse_dense_chunk(data, num_features=NUM_FEATURES, first_line=1)
    assert parsed is not None
    assert len(parsed) == DENSE_LINES
    assert parsed.line_numbers[DENSE_BAD_AT - 1] == DENSE_BAD_AT


@pytest.mark.parametrize(
    "bad_line, token",
    [
        pytest.param("1 qid:177 1:nan 2:0.1 3:0.2", "1:nan", id="nan"),
        pytest.param("1 qid:177 1:0.5 2:abc 3:0.2", "2:abc", id="non-numeric"),
        pytest.param("1 qid:177 1:0.5 2:0.1 4:0.2", "4:0.2", id="index-too-big"),
        pytest.param("1 qid:177 2:0.5 1:0.1 2:0.2", "2:0.2", id="unsorted-duplicate"),
        pytest.param("-1 qid:177 1:0.5 2:0.1 3:0.2", "-1", id="negative-label"),
        pytest.param("1 177 1:0.5 2:0.1 3:0.2", "177", id="missing-qid"),
    ],
)
def test_bad_line_in_dense_file(tmp_path, capsys, bad_line, token):
    lines = _dense_lines(DENSE_LINES)
    lines[DENSE_BAD_AT - 1] = bad_line
    path = _write(tmp_path, _text(lines))

    err = _failed_cleanly(tmp_path, _cli(tmp_path), capsys)

    assert f"{path}:{DENSE_BAD_AT}: " in err
    assert f"(offending token: {token!r})" in err


@pytest.mark.parametrize(
    "bad_line, token",
    [
        pytest.param("1 qid:177:1 0.5 2:0.1 3:0.2", "qid:177:1", id="colon-moved-into-qid"),
        pytest.param("1 qid:177 1:0.5:2 0.1 3:0.2", "1:0.5:2", id="colon-moved-into-value"),
    ],
)
def test_colon_moved_to_another_token_is_rejected(tmp_path, bad_line, token):
    lines = _dense_lines(DENSE_LINES)
    lines[DENSE_BAD_AT - 1] = bad_line
    _write(tmp_path, _text(lines))

    with pytest.raises(LetorFormatError) as info:
        convert(_config(tmp_path, workers=1), progress=False)

    assert info.value.line == DENSE_BAD_AT
    assert info.value.token == token


# === Settings files and the one error path of every command ===


@pytest.mark.parametrize(
    "text, message",
    [
        ("[1, 2]", "{path}: must hold a JSON object of settings"),
        ('{"seed": 1,\n "shards": }', "{path}:2:12: not valid JSON: Expecting value"),
        ('{"seed": "1"}', "{path}: `seed` must be an int, got '1'"),
        ('{"seed": 1, "sheeds": 2}', "{path}: unknown settings 'sheeds'"),
        ('{"clicks": {"bootstraps": "3"}}', "{path}: `bootstraps` must be an int, got '3'"),
        (b"\xff{}", "{path}: not UTF-8 text"),
    ],
)
def test_a_bad_settings_file_is_named_with_what_is_wrong(tmp_path, text, message):
    from tfr_rankformer.core.config_io import load_settings

    path = tmp_path / "settings.json"
    path.write_bytes(text if isinstance(text, bytes) else text.encode())
    with pytest.raises(ValueError) as info:
        load_settings(str(path), ConvertConfig)
    assert str(info.value).startswith(message.format(path=path)), info.value


def test_settings_of_nested_sections_may_stand_flat_or_be_named_extra(tmp_path):
    from tfr_rankformer.core.config_io import load_settings
    from tfr_rankformer.training.train_config import TrainConfig

    path = tmp_path / "settings.json"
    path.write_text('{"epochs": 2, "dropout": 0.1, "note": "mine"}')
    values = load_settings(str(path), TrainConfig, flat=True, extra=("note",))
    assert values == {"epochs": 2, "dropout": 0.1, "note": "mine"}
    with pytest.raises(ValueError, match="unknown settings 'note'"):
        load_settings(str(path), TrainConfig, flat=True)


def _export_main_raising(error: BaseException, argv: list[str]) -> int:
    from unittest import mock

    from pipelines.export_cli import main
    from tfr_rankformer import runner

    with mock.patch.object(runner, "export_run", side_effect=error):
        return main(argv)


def test_an_unexpected_error_is_one_line_naming_the_command(tmp_path, capsys):
    rc = _export_main_raising(KeyError("boom"), ["--model-dir", str(tmp_path)])
    err = capsys.readouterr().err
    assert rc == 1 and "Traceback" not in err
    assert err.strip().splitlines()[-1] == (
        "tfr-export: error: unexpected KeyError: 'boom' (run again with --verbose to see where)"
    )


def test_verbose_shows_the_traceback(tmp_path, capsys):
    assert _export_main_raising(KeyError("boom"), ["--model-dir", str(tmp_path), "--verbose"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("Traceback (most recent call last):") and "KeyError: 'boom'" in err
    assert err.splitlines()[-1].startswith("tfr-export: error: unexpected KeyError: 'boom'")


def test_ctrl_c_is_one_line_and_status_130(tmp_path, capsys):
    assert _export_main_raising(KeyboardInterrupt(), ["--model-dir", str(tmp_path)]) == 130
    assert capsys.readouterr().err.strip() == "tfr-export: interrupted"


@pytest.mark.parametrize(
    "error, argv, line",
    [
        (
            OSError(28, "No space left on device", "out/train.partial/x"),
            ["--output", "out"],
            "--output out: No space left on device: out/train/x",
        ),
        (
            OSError(13, "Permission denied", "run"),
            ["--model-dir=run"],
            "--model-dir run: Permission denied",
        ),
        (
            OSError(30, "Read-only file system", "/elsewhere/f"),
            ["--output", "o"],
            "/elsewhere/f: Read-only file system",
        ),
        (
            FileNotFoundError("data: no manifest.json"),
            ["--data", "data"],
            "--data data: no manifest.json",
        ),
        (
            ValueError("`top_k` must be a positive int, got 0"),
            ["--top-k", "0"],
            "--top-k must be a positive int, got 0",
        ),
        (
            ValueError("`top_k` must be a positive int, got 0"),
            ["--config", "c.json"],
            "`top_k` must be a positive int, got 0",
        ),
    ],
)
def test_error_lines_name_the_option_as_the_user_wrote_it(error, argv, line):
    from pipelines.tf_log_level import error_line

    assert error_line(error, argv) == line


def test_a_tensorflow_write_error_names_the_path_and_option():
    import tensorflow as tf

    from pipelines.tf_log_level import error_line

    message = (
        "{{function_node SaveV2}} run/checkpoints/best_temp/p0; No space left on device [Op:SaveV2]"
    )
    error = tf.errors.ResourceExhaustedError(None, None, message)
    assert error_line(error, ["--model-dir", "run"]) == (
        "--model-dir run: No space left on device: run/checkpoints/best_temp/p0"
    )


def test_a_flag_checked_by_the_library_is_named_as_written(tmp_path, capsys):
    from pipelines.bm25_cli import main as bm25_main

    (tmp_path / "q.tsv").write_text("1\tcoffee\n")
    (tmp_path / "c.tsv").write_text("d1\tcoffee shop\n")
    argv = ["run", "--queries", str(tmp_path / "q.tsv"), "--collection", str(tmp_path / "c.tsv")]
    assert bm25_main([*argv, "--output", str(tmp_path / "r.txt"), "--top-k", "0"]) == 1
    assert capsys.readouterr().err == "tfr-bm25: error: --top-k must be a positive int, got 0\n"
    assert not (tmp_path / "r.txt").exists()


def test_the_installed_command_prints_one_line_for_a_bad_settings_file(tmp_path):
    import subprocess
    import sys

    config = tmp_path / "settings.json"
    config.write_text('{"learning_rate": "0.01"}')
    argv = ["--model", "mlp", "--data", str(tmp_path), "--model-dir", str(tmp_path / "run")]
    done = subprocess.run(
        [sys.executable, "-m", "pipelines.train_cli", *argv, "--config", str(config)],
        capture_output=True,
        text=True,
        cwd=Path(__file__).resolve().parent.parent,
    )
    assert done.returncode == 1
    assert done.stderr == (
        f"tfr-train: error: {config}: `learning_rate` must be a number or null, got '0.01'\n"
    )
    assert not (tmp_path / "run").exists()
