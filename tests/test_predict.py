"""tfr-predict on LETOR text and ELWC shards, TREC and CSV output, errors."""

from __future__ import annotations

import csv
import json
import os

import pytest

from pipelines.predict_cli import main as predict_main  # noqa: E402
from tests.conftest import letor_line, write_lines  # noqa: E402


def test_letor_text_gives_a_trec_run_with_comment_docids(exported, tmp_path, capsys):
    model_dir, _ = exported
    values = [0.5] * 136
    path = write_lines(
        tmp_path / "q.txt",
        [
            letor_line(1, 5, values, "docid = GX-A inc = 1"),
            letor_line(0, 5, [0.1] * 136, "docid = GX-B inc = 0"),
            letor_line(2, 6, [0.9] * 136),
        ],
    )
    out = tmp_path / "run.txt"
    assert (
        predict_main(
            [
                "--model",
                model_dir,
                "--input",
                path,
                "--output",
                str(out),
                "--no-progress",
                "--tag",
                "mine",
            ]
        )
        == 0
    )
    rows = [line.split() for line in out.read_text().splitlines()]
    assert [r[0] for r in rows] == ["5", "5", "6"]
    assert sorted(r[2] for r in rows[:2]) == ["GX-A", "GX-B"] and rows[2][2] == "3"
    assert [r[3] for r in rows] == ["1", "2", "1"] and all(r[1] == "Q0" for r in rows)
    assert float(rows[0][4]) >= float(rows[1][4]) and rows[0][5] == "mine"
    assert "scored 2 lists" in capsys.readouterr().out


def test_converted_split_gives_csv_with_list_quality(exported, dataset, tmp_path):
    _, path = exported
    out = tmp_path / "scores.csv"
    assert (
        predict_main(
            [
                "--model",
                path,
                "--input",
                dataset,
                "--output",
                str(out),
                "--format",
                "csv",
                "--no-progress",
            ]
        )
        == 0
    )
    with open(out, newline="") as f:
        rows = list(csv.DictReader(f))
    manifest = json.loads(open(os.path.join(dataset, "manifest.json")).read())
    assert len(rows) == manifest["splits"]["test"]["num_items"]
    assert {"expected_list_label", "p_t_ge_1", "p_t_ge_2"} <= set(rows[0])
    p1, p2 = float(rows[0]["p_t_ge_1"]), float(rows[0]["p_t_ge_2"])
    assert float(rows[0]["expected_list_label"]) == pytest.approx(p1 + p2, abs=2e-6)


def test_bad_input_fails_cleanly(exported, tmp_path, capsys):
    model_dir, _ = exported
    path = write_lines(tmp_path / "bad.txt", ["1 qid:1 1:0.5 2:x\n"])
    out = tmp_path / "run.txt"
    assert (
        predict_main(["--model", model_dir, "--input", path, "--output", str(out), "--no-progress"])
        == 1
    )
    assert "bad.txt:1" in capsys.readouterr().err and not out.exists()
    assert not os.path.exists(str(out) + ".partial")
    assert predict_main(["--model", str(tmp_path), "--input", path, "--output", str(out)]) == 1
    assert "tfr-export writes one" in capsys.readouterr().err


def test_unsorted_and_repeated_indices_score_like_the_sorted_line(exported, tmp_path, capsys):
    model_dir, _ = exported
    # Each line gives the last feature: the model's training data gave every one.
    sorted_line = "1 qid:3 1:0.25 7:0.5 40:-1.0 136:0\n"
    shuffled = "1 qid:3 136:0 40:-1.0 7:9.0 1:0.25 7:0.5\n"  # 7 twice: the last value counts
    other = "0 qid:3 2:0.75 136:0\n"
    runs = {}
    for name, first in (("sorted", sorted_line), ("shuffled", shuffled)):
        path = write_lines(tmp_path / f"{name}.txt", [first, other])
        out = tmp_path / f"{name}.run"
        flags = ["--model", model_dir, "--input", path, "--output", str(out), "--no-progress"]
        if name == "shuffled":
            assert predict_main(flags) == 1
            assert "--duplicate-features" in capsys.readouterr().err
            flags += ["--duplicate-features", "last"]
        assert predict_main(flags) == 0
        runs[name] = [line.split()[2:5] for line in out.read_text().splitlines()]
    assert runs["shuffled"] == runs["sorted"]


def test_an_output_in_a_missing_directory_is_refused_before_the_model_loads(tmp_path, capsys):
    source = write_lines(tmp_path / "q.txt", [letor_line(1, 1, [0.5] * 3)])
    missing = tmp_path / "missing"
    (tmp_path / "file").write_text("not a directory")
    cases = {
        missing / "run.txt": f"the directory {missing} does not exist",
        tmp_path / "file" / "run.txt": f"the directory {tmp_path / 'file'} is not a directory",
    }
    for out, reason in cases.items():
        # The model does not exist either: the output is checked first.
        argv = ["--model", str(tmp_path / "no-model"), "--input", source, "--output", str(out)]
        assert predict_main(argv + ["--no-progress"]) == 1
        assert capsys.readouterr().err == f"tfr-predict: error: --output {out}: {reason}\n"
    assert predict_main(["--model", "m", "--input", source, "--output", str(tmp_path)]) == 1
    assert capsys.readouterr().err == (
        f"tfr-predict: error: --output {tmp_path} is a directory; give a file name\n"
    )
    assert sorted(os.listdir(tmp_path)) == ["file", "q.txt"]


def test_a_docid_that_is_not_utf8_is_refused_with_its_line_and_bytes(tmp_path):
    from tfrecords_tools.letor.letor_lists import load_letor_lists
    from tfrecords_tools.letor.letor_parser import LetorFormatError

    path = tmp_path / "q.txt"
    good = letor_line(1, 1, [0.5] * 3, "docid = caf\u00e9-1").encode("utf-8")
    # cp1252's é: decoded leniently, caf\xe9 and caf\xe8 would both become 'caf\ufffd'.
    path.write_bytes(good + b"0 qid:1 1:0.1 2:0.2 3:0.3 #docid = caf\xe9 inc = 0\n")
    with pytest.raises(LetorFormatError) as info:
        load_letor_lists(str(path), 3)
    assert str(info.value) == (
        f"{path}:2: docid b'caf\\xe9' is not UTF-8 (unexpected end of data); re-encode the "
        "file as UTF-8"
    )
    path.write_bytes(good)
    assert load_letor_lists(str(path), 3).lists[0][1] == ["caf\u00e9-1"]
