"""tfr-experiment without a terminal: a line when each stage starts and ends, and the
runs' own progress lines in between."""

from __future__ import annotations

import doctest
import logging
import re
import types

import pytest

from pipelines.experiment_runner import run_experiment
from pipelines.experiment_specs import ExperimentConfig
from pipelines.experiment_stages import StageLog, format_duration

STAGES = "pipelines.experiment_stages"
GBDT = "gbdt-1k:num_leaves=7:min_data_in_leaf=20"


class TickingClock:
    """A clock that moves one second each time it is read."""

    def __init__(self):
        self.now = 100.0

    def __call__(self) -> float:
        self.now += 1.0
        return self.now


def _messages(caplog, start: int = 0) -> list[tuple[str, str]]:
    return [(r.name, r.getMessage()) for r in caplog.records[start:]]


def _between(messages, first: str, last: str) -> list[tuple[str, str]]:
    """The records after the stage line ``first`` and before ``last``."""
    lines = [m for _, m in messages]
    return messages[lines.index(first) + 1 : lines.index(last)]


@pytest.fixture
def no_terminal(monkeypatch):
    """Training sees no terminal, as under ``make demo > log`` or CI."""
    from tfr_rankformer.training import loop as training

    monkeypatch.setattr(training, "attached_to_terminal", lambda: False)


def test_each_stage_logs_its_start_and_end_with_progress_between(tmp_path, caplog, no_terminal):
    caplog.set_level(logging.INFO)
    output = tmp_path / "exp"
    config = ExperimentConfig(
        dataset="synthetic",
        output=str(output),
        models=f"{GBDT},mlp",
        folds="1",
        epochs=2,
        batch_size=64,
        synthetic_lists=40,
    )
    run_experiment(config, progress=True, progress_seconds=1e-3, clock=TickingClock())
    messages = _messages(caplog)
    stages = [m for name, m in messages if name == STAGES]
    convert = f"convert synthetic into {output / 'data'}"
    # The clock moves a second a reading, and the stage log reads it once a line.
    assert stages == [
        f"[0:00:01] {convert}: started",
        f"[0:00:02] {convert}: done in 1 s",
        f"[0:00:03] run 1/2 {GBDT} Fold1 seed0: started",
        f"[0:00:04] run 1/2 {GBDT} Fold1 seed0: done in 1 s",
        "[0:00:05] run 2/2 mlp Fold1 seed0: started",
        "[0:00:06] run 2/2 mlp Fold1 seed0: done in 1 s",
        "[0:00:07] results.md, results.json and plots: started",
        "[0:00:08] results.md, results.json and plots: done in 1 s",
    ]
    # Each run's own lines come between its two stage lines.
    gbdt = [m for _, m in _between(messages, stages[2], stages[3])]
    assert gbdt[0].startswith("training LightGBM lambdarank")
    assert gbdt[-2].endswith("evaluating every split") and gbdt[-1].startswith("evaluated in ")
    mlp = _between(messages, stages[4], stages[5])
    progress = [m for name, m in mlp if name == "tfr_rankformer.training.training_callbacks"]
    # With no terminal and a line due after every step: step lines, then each epoch's.
    assert re.match(r"epoch 1/2 step 1/\d+ \(\d+%\)", progress[0])
    assert [m.split(":")[0] for m in progress if " done: " in m] == [
        "epoch 1/2 done",
        "epoch 2/2 done",
    ]
    assert [m for _, m in mlp][-2].endswith("evaluating train, vali, test")
    assert [m for _, m in mlp][-1].startswith("evaluated in ")

    # A rerun keeps the data and the finished runs, and says so.
    start = len(caplog.records)
    run_experiment(config, progress=True, clock=TickingClock())
    again = [m for name, m in _messages(caplog, start) if name == STAGES]
    assert again[:3] == [
        f"[0:00:01] using the data converted before in {output / 'data'}",
        f"[0:00:02] run 1/2 {GBDT} Fold1 seed0: finished before, kept "
        f"({output / 'runs' / 'gbdt-1k_num_leaves=7_min_data_in_leaf=20' / 'Fold1' / 'seed0'})",
        f"[0:00:03] run 2/2 mlp Fold1 seed0: finished before, kept "
        f"({output / 'runs' / 'mlp' / 'Fold1' / 'seed0'})",
    ]


def test_a_failed_stage_says_how_long_it_ran(caplog):
    caplog.set_level(logging.INFO, logger=STAGES)
    stages = StageLog(clock=iter([0.0, 10.0, 75.0]).__next__)
    with pytest.raises(ValueError, match="bad data"), stages.stage("convert"):
        raise ValueError("bad data")
    assert [m for _, m in _messages(caplog)] == [
        "[0:00:10] convert: started",
        "[0:01:15] convert: stopped by ValueError after 1 min 05 s",
    ]


def test_durations_read_as_seconds_minutes_and_hours():
    from pipelines import experiment_stages

    results = doctest.testmod(experiment_stages)
    assert results.attempted >= 1 and results.failed == 0
    assert format_duration(0.4) == "0 s"
    assert format_duration(59.6) == "1 min 00 s"
    assert format_duration(7322) == "2 h 02 min 02 s"


def test_slow_trees_get_a_line_when_the_interval_has_passed(caplog):
    from tfr_rankformer.gbdt.gbdt_booster import _History

    caplog.set_level(logging.INFO, logger="tfr_rankformer.gbdt.gbdt_booster")
    now = [0.0]
    history = _History(50, every_seconds=30.0, clock=lambda: now[0])
    for tree in range(1, 121):
        now[0] += 30.0 if tree == 7 else 1.0  # tree 7 ends 36 s after the start
        # Validation every 10 trees, NaN in between (as _validation_ndcg scores them).
        value = 60.0 + tree / 100 if tree % 10 == 0 else float("nan")
        env = types.SimpleNamespace(
            iteration=tree - 1,
            end_iteration=120,
            evaluation_result_list=[("vali", "ndcg_y@10", value, True)],
        )
        history(env)
    lines = [m for _, m in _messages(caplog)]
    # Every 50 trees, after the 30 s gaps (trees 7 and 37, unscored), and the last.
    assert [int(line.split()[1].split("/")[0]) for line in lines] == [7, 37, 50, 80, 100, 120]
    assert lines[0] == "tree 7/120 (0.2 trees/s)"  # no validation score yet
    assert lines[1] == "tree 37/120: validation ndcg_y@10 60.3000 at tree 30 (0.6 trees/s)"
    assert lines[2] == "tree 50/120: validation ndcg_y@10 60.5000 (0.6 trees/s)"
    assert history.rows[:2] == [(10, 60.1), (20, 60.2)]


def test_the_command_logs_stages_by_default_and_refuses_a_bad_interval(capsys):
    from pipelines.experiment_cli import build_parser, main
    from pipelines.tf_log_level import Display
    from tfr_rankformer.core.config_io import from_args

    args = build_parser().parse_args(["--dataset", "synthetic", "--output", "x"])
    display = from_args(args, Display)
    assert display.log_level == "INFO" and display.progress_seconds == 30.0
    with pytest.raises(SystemExit):
        main(["--dataset", "synthetic", "--output", "x", "--progress-seconds", "0"])
    assert "--progress-seconds must be > 0, got 0.0" in capsys.readouterr().err
