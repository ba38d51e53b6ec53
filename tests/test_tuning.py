"""tfr-tune: a tiny study, reproducing its best config, resuming, search spaces, --tuned."""

from __future__ import annotations

import csv
import json
import os
import re

import pytest

from tfr_rankformer.tuning import optuna_search as tuning
from tfr_rankformer.tuning import search_space

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
# Small trees and budgets: a trial takes a second or two.
SMALL_GBDT = {
    "num_iterations": {"low": 10, "high": 40},
    "num_leaves": {"low": 4, "high": 16},
    "min_data_in_leaf": {"low": 5, "high": 40},
    "cegb_tradeoff": None,
}


def _space_file(tmp_path, values, name="space.json") -> str:
    path = tmp_path / name
    path.write_text(json.dumps(values))
    return str(path)


def _flags(dataset, output, space, trials=3):
    return [
        "--model",
        "gbdt",
        "--data",
        dataset,
        "--output",
        str(output),
        "--trials",
        str(trials),
        "--search-space",
        space,
        "--num-threads",
        "1",
        "--no-progress",
    ]


def _trials(output) -> list[dict]:
    with open(os.path.join(output, "trials.csv"), encoding="utf-8") as f:
        return list(csv.DictReader(f))


@pytest.fixture(scope="module")
def study(dataset, tmp_path_factory):
    from pipelines.tune_cli import main

    root = tmp_path_factory.mktemp("tune")
    space = _space_file(root, SMALL_GBDT)
    output = root / "gbdt"
    assert main(_flags(dataset, output, space)) == 0
    return str(output), space


def test_a_tiny_study_writes_its_records(study):
    output, _ = study
    rows = _trials(output)
    assert [r["number"] for r in rows] == ["0", "1", "2"]
    assert {r["state"] for r in rows} == {"complete"}
    for row in rows:
        assert 10 <= int(row["num_iterations"]) <= 40 and 4 <= int(row["num_leaves"]) <= 16
        assert "cegb_tradeoff" not in row  # dropped from the search by the file
    for name in ("optimization_history.png", "param_importances.png"):
        with open(os.path.join(output, name), "rb") as f:
            assert f.read(8) == PNG_SIGNATURE, name
    with open(os.path.join(output, "search_space.json"), encoding="utf-8") as f:
        assert json.load(f)["num_leaves"] == {"low": 4, "high": 16, "log": False}


def test_best_config_trains_the_same_model_through_tfr_train(study, tmp_path):
    from pipelines.train_cli import main

    output, _ = study
    rows = _trials(output)
    best = max(rows, key=lambda r: float(r["value"]))
    with open(os.path.join(output, "best_config.json"), encoding="utf-8") as f:
        config = json.load(f)
    assert config["model"] == "gbdt" and "model_dir" not in config
    assert config["params"]["num_leaves"] == int(best["num_leaves"])
    model_dir = tmp_path / "again"
    flags = ["--config", os.path.join(output, "best_config.json"), "--model-dir", str(model_dir)]
    assert main([*flags, "--log-level", "WARNING"]) == 0
    with open(model_dir / "metrics.json", encoding="utf-8") as f:
        metrics = json.load(f)
    assert metrics["vali"]["ndcg_y@10"] == pytest.approx(float(best["value"]), abs=1e-9)
    assert metrics["training"]["trees"] == int(best["num_iterations"])


def test_an_interrupted_study_resumes_without_repeating_finished_trials(
    dataset, tmp_path, monkeypatch
):
    import optuna

    space = _space_file(tmp_path, SMALL_GBDT)
    output = str(tmp_path / "resumed")
    config = tuning.TuneConfig(
        model="gbdt",
        data=dataset,
        output=output,
        trials=4,
        search_space=space,
        settings={"num_threads": 1},
    )
    real = tuning._run_trial
    calls = []

    def interrupted(config, space, trial):
        calls.append(trial.number)
        if len(calls) == 3:
            raise KeyboardInterrupt  # the user stops the search during trial 2
        return real(config, space, trial)

    monkeypatch.setattr(tuning, "_run_trial", interrupted)
    with pytest.raises(KeyboardInterrupt):
        tuning.run_tuning(config, progress=False)
    assert not os.path.exists(os.path.join(output, "trials.csv"))  # no records yet
    storage = f"sqlite:///{os.path.join(output, 'study.db')}"
    before = optuna.load_study(study_name=tuning.STUDY_NAME, storage=storage)
    finished = {t.number: t.params for t in before.trials if t.state.name == "COMPLETE"}
    assert sorted(finished) == [0, 1]
    # A process killed outright leaves its trial RUNNING; a resume marks it failed.
    before.ask()
    metrics_0 = os.path.join(output, "trials", "0000", "metrics.json")
    mtime = os.path.getmtime(metrics_0)

    calls.clear()
    summary = tuning.run_tuning(config, progress=False)
    assert len(calls) == 2  # only the two missing trials ran
    assert summary["trials"] == {"complete": 4, "fail": 2}
    after = optuna.load_study(study_name=tuning.STUDY_NAME, storage=storage)
    for number, params in finished.items():
        assert after.trials[number].params == params
    assert os.path.getmtime(metrics_0) == mtime  # not trained again
    new = [t.params for t in after.trials if t.number > 3 and t.state.name == "COMPLETE"]
    assert all(p not in finished.values() for p in new)
    # Done: running the command again runs nothing.
    calls.clear()
    tuning.run_tuning(config, progress=False)
    assert calls == []


@pytest.mark.parametrize(
    "content, message",
    [
        ("{not json", "not valid JSON"),
        ("[1, 2]", "must hold a JSON object"),
        ('{"num_leafs": {"low": 2, "high": 8}}', "'num_leafs' is not searched for gbdt"),
        ('{"num_leaves": {"low": 64, "high": 8}}', "'num_leaves': `low` \\(64\\) must be below"),
        ('{"num_leaves": {"low": 2.5, "high": 8}}', "'num_leaves': this setting takes integers"),
        ('{"learning_rate": {"low": 0, "high": 0.1, "log": true}}', "log scale needs"),
        ('{"learning_rate": {"low": 0.1}}', "needs `low` and `high`"),
        ('{"learning_rate": [0.1, 0.2]}', "must be an object or null"),
        ('{"learning_rate": {"choices": []}}', "non-empty `choices`"),
    ],
)
def test_a_bad_search_space_file_is_a_clear_error(dataset, tmp_path, capsys, content, message):
    from pipelines.tune_cli import main

    path = tmp_path / "bad.json"
    path.write_text(content)
    output = tmp_path / "out"
    assert main(_flags(dataset, output, str(path))) == 1
    err = capsys.readouterr().err
    assert str(path) in err
    assert re.search(message, err), err
    assert not output.exists()  # nothing written


def test_default_spaces_follow_the_model():
    rankformer = search_space.default_space("rankformer", gbdt=False, width=46)
    assert rankformer["num_heads"].choices == (1, 2)  # the divisors of 46 up to 8
    assert rankformer["alpha"].low == 0 and rankformer["alpha"].high == 4
    assert set(search_space.default_space("mlp", gbdt=False)) == {
        "learning_rate",
        "weight_decay",
        "dropout",
    }
    assert "alpha" not in search_space.default_space("transformer", gbdt=False, width=8)
    gbdt = search_space.default_space("gbdt-1k", gbdt=True)
    assert set(gbdt) == {
        "num_leaves",
        "min_data_in_leaf",
        "learning_rate",
        "cegb_tradeoff",
        "num_iterations",
    }
    for low, high, name in ((507, 271, "num_leaves"), (0.46, 0.32, "learning_rate")):
        assert gbdt[name].low <= min(low, high) and max(low, high) <= gbdt[name].high


def test_help_prints_the_default_ranges(capsys):
    from pipelines.tune_cli import main

    with pytest.raises(SystemExit):
        main(["--help"])
    out = capsys.readouterr().out
    assert "num_leaves [8, 1024] log" in out and "alpha [0.0, 4.0]" in out


def test_another_study_in_the_output_is_refused(study, dataset, tmp_path, capsys):
    from pipelines.tune_cli import main

    output, _ = study
    other = _space_file(tmp_path, {**SMALL_GBDT, "num_leaves": {"low": 4, "high": 8}})
    assert main(_flags(dataset, output, other)) == 1
    assert "another search space" in capsys.readouterr().err


def test_tfr_experiment_trains_the_tuned_config(study, dataset, tmp_path):
    from pipelines.experiment_runner import run_experiment
    from pipelines.experiment_specs import ExperimentConfig

    output, _ = study
    config = ExperimentConfig(
        dataset=dataset,
        output=str(tmp_path / "exp"),
        models="gbdt:num_leaves=4:num_iterations=5:num_threads=1",
        folds="1",
        tuned=output,
    )
    results = run_experiment(config, progress=False)
    assert results["models"][-1] == "tuned gbdt"
    with open(os.path.join(output, "best_config.json"), encoding="utf-8") as f:
        best = json.load(f)
    run = results["runs"][-1]
    assert (
        run["metrics"]["training"]["lightgbm_params"]["num_leaves"]
        == (best["params"]["num_leaves"])
    )
    assert "tuned gbdt" in open(tmp_path / "exp" / "results.md", encoding="utf-8").read()


class _Trial:
    """An Optuna trial stand-in that records reports and prunes from step ``prune_at``."""

    def __init__(self, prune_at: int):
        self.prune_at = prune_at
        self.reports: list[tuple[float, int]] = []

    def report(self, value, step):
        self.reports.append((value, step))

    def should_prune(self):
        return self.reports[-1][1] >= self.prune_at


def test_pruning_callbacks_report_the_validation_score_and_stop():
    import types

    import optuna

    trial = _Trial(prune_at=20)
    callback = tuning._GBDTPruning(trial)

    def env(trees, value):
        return types.SimpleNamespace(
            iteration=trees - 1, evaluation_result_list=[("vali", "ndcg_y@10", value, True)]
        )

    callback(env(9, float("nan")))  # a tree between two evaluations: nothing reported
    callback(env(10, 50.0))
    with pytest.raises(optuna.TrialPruned, match="tree 20"):
        callback(env(20, 40.0))
    assert trial.reports == [(50.0, 10), (40.0, 20)]

    trial = _Trial(prune_at=2)
    keras_callback = tuning._keras_pruning(trial)
    keras_callback.on_epoch_end(0, {"loss": 1.0, "val_ndcg_y@10": 61.5})
    with pytest.raises(optuna.TrialPruned, match="epoch 2"):
        keras_callback.on_epoch_end(1, {"loss": 0.9, "val_ndcg_y@10": 60.0})
    assert trial.reports == [(61.5, 1), (60.0, 2)]


@pytest.mark.slow  # three short TensorFlow trainings: minutes on a busy 2-core machine
def test_a_small_neural_study_reproduces_through_tfr_train(dataset, tmp_path):
    from pipelines.train_cli import main

    space = _space_file(
        tmp_path,
        {
            "num_layers": {"low": 1, "high": 2},
            "ff_dim": {"choices": [16, 32]},
            "num_heads": {"choices": [1]},
        },
    )
    config = tuning.TuneConfig(
        model="rankformer",
        data=dataset,
        output=str(tmp_path / "tune"),
        trials=2,
        search_space=space,
        settings={"epochs": 2, "batch_size": 64, "architecture": {"head_hidden": 16}},
    )
    summary = tuning.run_tuning(config, progress=False)
    assert summary["trials"] == {"complete": 2}
    best = summary["best_config"]
    assert best["epochs"] == 2 and best["architecture"]["head_hidden"] == 16
    assert best["alpha"] == summary["best_params"]["alpha"] and 0 <= best["alpha"] <= 4
    model_dir = tmp_path / "again"
    flags = ["--config", str(tmp_path / "tune" / "best_config.json"), "--model-dir"]
    assert main([*flags, str(model_dir), "--no-export", "--quiet", "--log-level", "WARNING"]) == 0
    with open(model_dir / "metrics.json", encoding="utf-8") as f:
        metrics = json.load(f)
    assert metrics["vali"]["ndcg_y@10"] == pytest.approx(summary["best_value"], abs=0.01)


def test_head_counts_must_divide_the_width(dataset, tmp_path):
    space = _space_file(tmp_path, {"num_heads": {"choices": [1, 5]}})
    config = tuning.TuneConfig(
        model="rankformer", data=dataset, output=str(tmp_path / "o"), search_space=space
    )
    width = json.load(open(os.path.join(dataset, "manifest.json")))["num_features"]
    assert width % 5  # the synthetic data's feature count
    with pytest.raises(ValueError, match=r"'num_heads' \[5\] do not divide"):
        tuning.resolve_space(config)


def test_neural_searches_run_one_trial_at_a_time():
    with pytest.raises(ValueError, match="`jobs` > 1 is for GBDTs"):
        tuning.TuneConfig(model="mlp", data="d", output="o", jobs=2)
