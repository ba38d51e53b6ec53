"""tfr-experiment: a miniature run of the paper's table, resuming, plots, bad specs."""

from __future__ import annotations

import json
import os

import pytest

from pipelines.experiment_runner import run_experiment
from pipelines.experiment_specs import ExperimentConfig, parse_folds, parse_models

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def experiment(tmp_path_factory):
    from pipelines.experiment_cli import main

    output = tmp_path_factory.mktemp("experiment") / "synthetic"
    flags = ["--dataset", "synthetic", "--synthetic-lists", "40", "--output", str(output)]
    flags += ["--models", "gbdt-1k:num_leaves=15:min_data_in_leaf=20,mlp:dropout=0.1"]
    flags += ["--folds", "1", "--epochs", "2", "--batch-size", "64", "--no-progress"]
    assert main(flags) == 0
    return str(output), flags


def test_table_json_and_plots(experiment):
    output, _ = experiment
    with open(os.path.join(output, "results.json"), encoding="utf-8") as f:
        results = json.load(f)
    assert results["models"] == ["gbdt-1k:num_leaves=15:min_data_in_leaf=20", "mlp:dropout=0.1"]
    assert results["label_kind"] == "simulated_implicit" and results["folds"] == [1]
    assert len(results["runs"]) == 2
    for run in results["runs"]:
        assert "ndcg_y@10" in run["metrics"]["test"] and run["seconds"] > 0
    assert results["versions"]["tensorflow"] == "2.15.1"
    gbdt_run = results["runs"][0]
    assert gbdt_run["metrics"]["training"]["lightgbm_params"]["num_leaves"] == 15
    assert results["runs"][1]["settings"]["architecture"]["dropout"] == 0.1
    table = open(os.path.join(output, "results.md"), encoding="utf-8").read()
    assert "| model | synthetic NDCG_y@10 | synthetic NDCG_r@10 |" in table
    mean = results["summary"]["mlp:dropout=0.1"]["ndcg_y@10"]["mean"]
    assert f"{mean:.2f}" in table
    # With two models, both are among the best two of every column.
    assert table.count("**") == 8
    (pair,) = results["paired"]
    assert pair["pair"] == results["models"][::-1] and pair["by"] == "fold, seed"
    gbdt, mlp = (run["metrics"]["test"]["ndcg_y@10"] for run in results["runs"])
    assert pair["ndcg_y@10"]["mean"] == pytest.approx(mlp - gbdt) and pair["ndcg_y@10"]["n"] == 1
    assert f"| mlp:dropout=0.1 − {results['models'][0]} | {mlp - gbdt:+.2f} (" in table
    for name in ("labels.png", "ndcg.png", "validation.png"):
        path = os.path.join(output, name)
        with open(path, "rb") as f:
            assert f.read(8) == PNG_SIGNATURE, name
        assert os.path.getsize(path) > 10_000, name
        assert path in results["plots"]


def test_rerun_skips_finished_runs_and_restarts_interrupted_ones(experiment, capsys):
    from pipelines.experiment_cli import main

    output, flags = experiment
    runs = os.path.join(output, "runs")
    finished = os.path.join(runs, "gbdt-1k_num_leaves=15_min_data_in_leaf=20", "Fold1", "seed0")
    interrupted = os.path.join(runs, "mlp_dropout=0.1", "Fold1", "seed0")
    finished_mtime = os.path.getmtime(os.path.join(finished, "metrics.json"))
    os.remove(os.path.join(interrupted, "metrics.json"))  # as if killed before the end
    assert main(flags) == 0
    assert os.path.getmtime(os.path.join(finished, "metrics.json")) == finished_mtime
    assert os.path.isfile(os.path.join(interrupted, "metrics.json"))
    with open(os.path.join(interrupted, "history.csv"), encoding="utf-8") as f:
        assert len(f.readlines()) == 3  # a fresh history of 2 epochs, not an appended one


def test_a_converted_dataset_is_used_as_it_is(dataset, tmp_path):
    config = ExperimentConfig(
        dataset=dataset,
        output=str(tmp_path / "exp"),
        models="gbdt-1k:num_leaves=7:min_data_in_leaf=20:num_iterations=20",
        folds="1-5",  # a dataset without folds runs its only set
    )
    results = run_experiment(config, progress=False)
    assert not os.path.exists(tmp_path / "exp" / "data")
    assert results["folds"] == [1] and results["runs"][0]["metrics"]["test"]["num_lists"] > 0


def test_bad_model_and_fold_specs_are_clear_errors():
    with pytest.raises(ValueError, match="Unknown model 'rankformr'"):
        parse_models("mlp,rankformr")
    with pytest.raises(ValueError, match="not a tfr-train setting"):
        parse_models("rankformer:alhpa=1")
    with pytest.raises(ValueError, match="KEY=VALUE"):
        parse_models("rankformer:alpha")
    with pytest.raises(ValueError, match="distinct"):
        parse_models("mlp,mlp")
    assert parse_folds("1-3,5") == [1, 2, 3, 5]
    with pytest.raises(ValueError, match="--folds"):
        parse_folds("one")
    specs = parse_models("rankformer:alpha=0.25:loss=lambdarank,gbdt-10k")
    assert specs[0].settings == (("alpha", 0.25), ("loss", "lambdarank"))
    assert specs[1].is_gbdt and not specs[0].is_gbdt


def _run(model, fold, seed, y, r=None):
    metrics = {"ndcg_y@10": y, "ndcg_r@10": y if r is None else r, "ndcg_y@10_tmax": y + 1}
    return {"model": model, "fold": fold, "seed": seed, "metrics": {"test": metrics}}


def test_models_are_paired_run_by_run():
    from pipelines.experiment_summary import PAIRED, format_pairs, paired_runs

    # Two folds x two seeds: b leads a by 1, 2, 3 and 6 (mean 3, sd sqrt(14/3)).
    runs = [_run("a", f, s, 60 + 10 * f + s) for f in (1, 2) for s in (0, 1)]
    runs += [
        _run("b", f, s, 60 + 10 * f + s + d)
        for (f, s), d in zip([(1, 0), (1, 1), (2, 0), (2, 1)], [1, 2, 3, 6])
    ]
    # c ran once per fold (seed 0): paired with the others' fold means.
    runs += [_run("c", 1, 0, 70.0, r=50.0), _run("c", 2, 0, 85.0, r=50.0)]
    pairs = paired_runs(runs, ["a", "b", "c"], PAIRED)
    # The later model minus the earlier: baselines come first.
    assert [p["pair"] for p in pairs] == [["b", "a"], ["c", "a"], ["c", "b"]]
    b_a = pairs[0]
    assert b_a["by"] == "fold, seed" and b_a["ndcg_y@10"]["n"] == 4
    assert b_a["ndcg_y@10"]["mean"] == pytest.approx(3.0)
    assert b_a["ndcg_y@10"]["se"] == pytest.approx((14 / 3) ** 0.5 / 2)
    assert b_a["ndcg_y@10"]["ahead"] == 4
    assert (b_a["ndcg_y@10"]["low"], b_a["ndcg_y@10"]["high"]) == (1, 6)
    # c's 70 and 85 against a's fold means, 70.5 and 80.5.
    c_a = pairs[1]
    assert c_a["by"] == "fold" and c_a["ndcg_y@10"]["n"] == 2
    assert c_a["ndcg_y@10"]["mean"] == pytest.approx((-0.5 + 4.5) / 2)
    assert c_a["ndcg_y@10"]["ahead"] == 1 and c_a["ndcg_r@10"]["ahead"] == 0
    text = format_pairs(pairs, PAIRED, ["y", "r", "t"])
    assert (
        "| b − a | +3.00 ± 1.08 (4/4) | +3.00 ± 1.08 (4/4) | +3.00 ± 1.08 (4/4) | fold, seed |"
        in text
    )
    assert "| c − a | +2.00 ± 2.50 (1/2) |" in text
