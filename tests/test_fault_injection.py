"""Commands killed outright (SIGKILL) at named points, then run again.

``tfr_rankformer.core.fault_points`` kills the process at a point the test names
(``TFR_RANKFORMER_KILL_AT``). Each rerun either completes, with outputs equal
to an uninterrupted run's (conversion) or continuing from the last completed
epoch (``tfr-train --resume``), or refuses with a message that says what to
do; no directory ever mixes two runs. The conversion cases and one training
case run by default; the rest are marked slow.
"""

from __future__ import annotations

import json
import os
import random
import re
import signal
import subprocess
import sys

import pytest

from tests.conftest import SMALL, letor_line, write_lines
from tfr_rankformer.core.fault_points import ENV

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _run(args: list[str], kill_at: str | None = None) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != ENV}
    if kill_at:
        env[ENV] = kill_at
    return subprocess.run(
        [sys.executable, "-m", *args],
        capture_output=True,
        text=True,
        cwd=REPO,
        env=env,
        timeout=600,
    )


def _killed(result: subprocess.CompletedProcess) -> None:
    assert result.returncode == -signal.SIGKILL, result.stderr[-2000:]


def _ok(result: subprocess.CompletedProcess) -> None:
    assert result.returncode == 0, result.stderr[-2000:]


def _hidden(directory) -> list[str]:
    return sorted(n for n in os.listdir(directory) if n.startswith("."))


# === tfr-convert ===


@pytest.fixture(scope="module")
def letor(tmp_path_factory):
    """A LETOR directory of three splits, 120 lists of 10 items each."""
    folder = tmp_path_factory.mktemp("letor")
    rng = random.Random(0)
    lines = [
        letor_line(rng.randint(0, 2), q, [round(rng.random(), 4) for _ in range(8)])
        for q in range(120)
        for _ in range(10)
    ]
    for split in ("train", "vali", "test"):
        write_lines(str(folder / f"{split}.txt"), lines)
    return folder


def _convert(letor, output, *extra, kill_at=None):
    args = ["pipelines.convert_cli", "--input", str(letor), "--output", str(output)]
    return _run([*args, "--no-progress", "--log-level", "WARNING", *extra], kill_at)


def _contents(directory) -> dict:
    """Every file's bytes, the manifest without the output path and --overwrite."""
    found = {}
    for name in sorted(os.listdir(directory)):
        path = os.path.join(directory, name)
        if name == "manifest.json":
            with open(path, encoding="utf-8") as f:
                found[name] = re.sub(r'"(output|overwrite)": [^,\n]*', "", f.read())
        elif os.path.isfile(path):
            with open(path, "rb") as f:
                found[name] = f.read()
    return found


@pytest.fixture(scope="module")
def reference(letor, tmp_path_factory):
    output = tmp_path_factory.mktemp("reference") / "data"
    _ok(_convert(letor, output))
    return _contents(output)


@pytest.mark.parametrize("point", ["convert.block", "convert.shard"])
def test_a_killed_conversion_leaves_nothing_and_the_rerun_equals_an_uninterrupted_one(
    letor, reference, tmp_path, point
):
    output = tmp_path / "data"
    _killed(_convert(letor, output, kill_at=point))
    assert not output.exists()  # only the hidden scratch directory
    assert len(_hidden(tmp_path)) == 1
    _ok(_convert(letor, output))
    assert _hidden(tmp_path) == []  # the killed run's scratch is gone
    assert _contents(output) == reference


def test_a_killed_overwrite_keeps_the_old_output_whole(letor, reference, tmp_path):
    output = tmp_path / "data"
    _ok(_convert(letor, output))
    before = _contents(output)
    _killed(_convert(letor, output, "--overwrite", kill_at="convert.shard"))
    assert _contents(output) == before
    _ok(_convert(letor, output, "--overwrite"))
    assert _contents(output) == reference and _hidden(tmp_path) == []


# === tfr-train ===


def _train(dataset, model_dir, config, *extra, kill_at=None):
    args = ["pipelines.train_cli", "--data", dataset, "--model-dir", str(model_dir)]
    args += ["--config", str(config), "--epochs", "3", "--batch-size", "16", "--quiet"]
    return _run([*args, "--log-level", "WARNING", *extra], kill_at)


@pytest.fixture
def config(tmp_path):
    path = tmp_path / "train.json"
    path.write_text(json.dumps({"architecture": SMALL, "seed": 1, "patience": 50}))
    return path


def _epochs(model_dir) -> list[int]:
    with open(model_dir / "history.csv", encoding="utf-8") as f:
        return [int(line.split(",")[0]) for line in f.read().splitlines()[1:]]


def _state(model_dir) -> str:
    return json.loads((model_dir / "run_state.json").read_text())["state"]


def _check_resumed(model_dir, result) -> None:
    _ok(result)
    metrics = json.loads((model_dir / "metrics.json").read_text())
    assert metrics["training"]["epochs_completed"] == 3
    assert _epochs(model_dir) == [0, 1, 2]
    assert _state(model_dir) == "complete"
    assert sorted(os.listdir(model_dir / "export")) == ["1"]  # no temporary left beside it
    assert _hidden(model_dir.parent) == []


@pytest.mark.slow
def test_training_killed_mid_epoch_is_refused_then_resumed(dataset, config, tmp_path):
    model_dir = tmp_path / "run"
    # The click protocol's 900 training lists in batches of 16: 57 steps an
    # epoch; the 70th is in the second epoch.
    _killed(_train(dataset, model_dir, config, kill_at="train.batch:70"))
    assert _epochs(model_dir) == [0]
    assert _state(model_dir) == "running" and not (model_dir / "metrics.json").exists()
    again = _train(dataset, model_dir, config)
    assert again.returncode == 1
    assert re.search(r"holds a running rankformer run .*pass --resume", again.stderr)
    resumed = _train(dataset, model_dir, config, "--resume")
    _check_resumed(model_dir, resumed)
    # Epoch 0 was backed up: the resumed run trained epochs 1 and 2 only.
    metrics = json.loads((model_dir / "metrics.json").read_text())
    assert metrics["training"]["epochs_this_run"] == 2
    # Its standard error holds no native start-up lines (absl's banner, XLA's notice).
    assert "absl::InitializeLog" not in resumed.stderr
    assert not re.search(r"^I\d{4} ", resumed.stderr, re.MULTILINE), resumed.stderr


@pytest.mark.slow
def test_training_killed_while_checkpointing_resumes(dataset, config, tmp_path):
    model_dir = tmp_path / "run"
    _killed(_train(dataset, model_dir, config, kill_at="train.checkpoint"))
    _check_resumed(model_dir, _train(dataset, model_dir, config, "--resume"))


@pytest.mark.slow
def test_training_killed_while_exporting_exports_on_resume(dataset, config, tmp_path):
    model_dir = tmp_path / "run"
    _killed(_train(dataset, model_dir, config, kill_at="export.saved"))
    assert _state(model_dir) == "complete" and os.listdir(model_dir / "export") == ["1.partial"]
    again = _train(dataset, model_dir, config)
    assert again.returncode == 1 and "complete rankformer run" in again.stderr
    resumed = _train(dataset, model_dir, config, "--resume")
    _check_resumed(model_dir, resumed)
    assert "exported" in resumed.stdout
