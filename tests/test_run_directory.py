"""Run directories: a run never writes into another's, --resume and --overwrite, run state."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tfr_rankformer.core.run_directory import (
    RunExistsError,
    check_run_directory,
    inspect_run,
    run_session,
)
from tfr_rankformer.core.run_layout import RUN_STATE_NAME

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SETTINGS = {"model": "mlp", "epochs": 2, "seed": 0, "architecture": {"num_layers": 1}}


def _state(path) -> dict:
    return json.loads((path / RUN_STATE_NAME).read_text())


def _complete_run(path, settings=SETTINGS):
    with run_session(str(path), settings) as start:
        assert start == "new"
        (path / "config.json").write_text(json.dumps(settings))
        (path / "metrics.json").write_text("{}")
        (path / "export").mkdir()
        (path / "export" / "1").mkdir()


def test_a_new_run_records_running_then_complete(tmp_path):
    run = tmp_path / "run"
    with run_session(str(run), SETTINGS):
        assert _state(run)["state"] == "running"
        assert _state(run)["pid"] == os.getpid()
    assert _state(run)["state"] == "complete"


def test_a_failing_run_is_recorded_as_failed_with_its_error(tmp_path):
    run = tmp_path / "run"
    with pytest.raises(RuntimeError):
        with run_session(str(run), SETTINGS):
            raise RuntimeError("out of disk")
    assert _state(run)["state"] == "failed"
    assert "out of disk" in _state(run)["error"]
    assert inspect_run(str(run)).state == "failed"


def test_another_run_is_refused_naming_what_the_directory_holds(tmp_path):
    run = tmp_path / "run"
    _complete_run(run)
    with pytest.raises(RunExistsError, match=r"holds a complete mlp run \(.*export/.*--overwrite"):
        check_run_directory(str(run), {**SETTINGS, "model": "rankformer"})
    # An unfinished one is offered --resume as well.
    (run / RUN_STATE_NAME).write_text(json.dumps({"state": "failed"}))
    with pytest.raises(RunExistsError, match="pass --resume to continue it or --overwrite"):
        check_run_directory(str(run), SETTINGS)


def test_files_a_run_never_writes_are_refused_even_with_overwrite(tmp_path):
    run = tmp_path / "run"
    _complete_run(run)
    for name in ("notes.txt", "a", "b", "c", "d", "e"):
        (run / name).write_text("mine")
    with pytest.raises(RunExistsError, match=r"\(a, b, c, d, e and 1 more\)"):
        with run_session(str(run), SETTINGS, existing="overwrite"):
            pass
    assert (run / "notes.txt").read_text() == "mine"


def test_resume_needs_the_same_settings_and_names_the_ones_that_differ(tmp_path):
    run = tmp_path / "run"
    with pytest.raises(RuntimeError):
        with run_session(str(run), SETTINGS):
            (run / "config.json").write_text(json.dumps(SETTINGS))
            raise RuntimeError("killed")
    other = {**SETTINGS, "architecture": {"num_layers": 3}}
    with pytest.raises(RunExistsError, match=r"architecture.num_layers 1 -> 3"):
        check_run_directory(str(run), other, existing="resume")
    # More epochs are allowed, and a setting the model no longer has is left out.
    assert check_run_directory(str(run), {**SETTINGS, "epochs": 9}, existing="resume") == "resume"
    (run / "config.json").write_text(json.dumps({**SETTINGS, "width": 128}))
    assert check_run_directory(str(run), SETTINGS, existing="resume") == "resume"
    with run_session(str(run), SETTINGS, existing="resume") as start:
        assert start == "resume"
    assert _state(run)["state"] == "complete"


def test_resume_of_a_complete_run_has_nothing_to_train_and_cannot_extend_it(tmp_path):
    run = tmp_path / "run"
    _complete_run(run)
    with run_session(str(run), SETTINGS, existing="resume") as start:
        assert start == "complete"
    with pytest.raises(RunExistsError, match="cannot extend it"):
        check_run_directory(str(run), {**SETTINGS, "epochs": 5}, existing="resume")


def test_runs_that_cannot_resume_say_so(tmp_path):
    run = tmp_path / "run"
    (run / "backup").mkdir(parents=True)
    (run / "config.json").write_text(json.dumps(SETTINGS))
    with pytest.raises(RunExistsError, match="cannot resume"):
        check_run_directory(str(run), SETTINGS, existing="resume", resumable=False)


def test_overwrite_keeps_the_old_run_until_the_new_one_is_complete(tmp_path):
    run = tmp_path / "run"
    _complete_run(run)
    with run_session(str(run), {**SETTINGS, "model": "rankformer"}, existing="overwrite") as start:
        assert start == "new"
        assert not (run / "export").exists()  # the new run starts empty
        asides = [n for n in os.listdir(tmp_path) if ".replaced-" in n]
        assert len(asides) == 1 and (tmp_path / asides[0] / "old" / "export" / "1").is_dir()
    assert sorted(os.listdir(tmp_path)) == ["run"]
    assert "replaces" not in _state(run)


def test_a_failed_overwrite_puts_the_old_run_back(tmp_path):
    run = tmp_path / "run"
    _complete_run(run)
    with pytest.raises(RuntimeError):
        with run_session(str(run), SETTINGS, existing="overwrite"):
            (run / "history.csv").write_text("epoch\n0\n")
            raise RuntimeError("diverged")
    assert sorted(os.listdir(tmp_path)) == ["run"]
    assert (run / "export" / "1").is_dir() and not (run / "history.csv").exists()
    assert _state(run)["state"] == "complete"


def test_an_interrupted_overwrite_is_reported_then_cleaned_up_by_the_next(tmp_path):
    run = tmp_path / "run"
    _complete_run(run)
    # Killed inside the block: the session never ends, the old run stays aside.
    code = (
        "import os, sys; from tfr_rankformer.core.run_directory import run_session\n"
        "with run_session(sys.argv[1], {'model': 'mlp'}, existing='overwrite'):\n"
        "    os._exit(9)\n"
    )
    killed = subprocess.run([sys.executable, "-c", code, str(run)], cwd=REPO)
    assert killed.returncode == 9
    with pytest.raises(RunExistsError, match="an interrupted --overwrite left the run"):
        check_run_directory(str(run), SETTINGS)
    with run_session(str(run), SETTINGS, existing="overwrite"):
        assert len([n for n in os.listdir(tmp_path) if ".replaced-" in n]) == 2
    assert sorted(os.listdir(tmp_path)) == ["run"]


def test_a_run_that_is_still_training_is_never_touched(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    (run / RUN_STATE_NAME).write_text(
        json.dumps({"state": "running", "pid": os.getppid(), "host": os.uname().nodename})
    )
    with pytest.raises(RunExistsError, match=f"process {os.getppid()} is still training"):
        check_run_directory(str(run), SETTINGS, existing="overwrite")


def test_runs_older_than_the_state_file_are_recognised(tmp_path):
    run = tmp_path / "run"
    (run / "checkpoints").mkdir(parents=True)
    (run / "config.json").write_text(json.dumps(SETTINGS))
    assert inspect_run(str(run)).state == "interrupted"
    (run / "metrics.json").write_text("{}")
    assert inspect_run(str(run)).state == "complete"
    assert inspect_run(str(tmp_path / "absent")) is None


# === tfr-train ===


def test_config_errors_name_the_flag_typed_and_exit_2(tmp_path, capsys):
    from pipelines.train_cli import main

    with pytest.raises(SystemExit) as stop:
        main(["--data", str(tmp_path), "--model-dir", str(tmp_path / "r"), "--epochs", "0"])
    assert stop.value.code == 2
    assert "tfr-train: error: --epochs must be a positive int, got 0" in capsys.readouterr().err


@pytest.mark.slow
def test_training_into_another_runs_directory_is_refused_and_overwrite_replaces_it(
    dataset, tmp_path, capsys
):
    from pipelines.train_cli import main

    run = tmp_path / "x"
    base = ["--data", dataset, "--model-dir", str(run), "--epochs", "1", "--quiet"]
    assert main(["--model", "mlp", *base, "--log-level", "WARNING"]) == 0
    assert (run / "export" / "1").is_dir()
    before = (run / "config.json").read_text()
    capsys.readouterr()
    assert main(["--model", "transformer", *base, "--num-layers", "1", "--no-export"]) == 1
    err = capsys.readouterr().err
    assert "already holds a complete mlp run" in err and "--overwrite" in err
    assert (run / "config.json").read_text() == before  # nothing was written
    flags = ["--model", "transformer", *base, "--num-layers", "1", "--ff-dim", "16"]
    assert main([*flags, "--overwrite", "--log-level", "WARNING"]) == 0
    assert json.loads((run / "config.json").read_text())["model"] == "transformer"
    assert os.listdir(run / "export") == ["1"]  # the mlp's export went with its run
    assert sorted(os.listdir(tmp_path)) == ["x"]
    assert json.loads((run / RUN_STATE_NAME).read_text())["state"] == "complete"
