"""LightGBM GBDT runs: presets, training-list policy, shared evaluation, tfr-eval, tfr-predict."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest

from tfr_rankformer.gbdt.gbdt_booster import evaluate_arrays, load_booster, score_arrays
from tfr_rankformer.gbdt.gbdt_config import GBDTConfig
from tfr_rankformer.gbdt.lightgbm_ranker import train_gbdt
from tfr_rankformer.inputs.list_arrays import read_split
from tfr_rankformer.inputs.manifest import load_manifest
from tfr_rankformer.ranking.ranking_metrics import evaluate_rankings

# Small trees for 900 lists of about 15 items; everything else is the preset's.
FAST = {"num_leaves": 15, "min_data_in_leaf": 20, "num_iterations": 60}


@pytest.fixture(scope="module")
def gbdt_run(dataset, tmp_path_factory):
    from pipelines.train_cli import main

    model_dir = tmp_path_factory.mktemp("gbdt")
    flags = ["--model", "gbdt-1k", "--data", dataset, "--model-dir", str(model_dir)]
    flags += [f"--lgb-param={k}={v}" for k, v in FAST.items() if k != "num_iterations"]
    flags += ["--trees", str(FAST["num_iterations"]), "--log-level", "WARNING"]
    assert main(flags) == 0
    with open(model_dir / "metrics.json", encoding="utf-8") as f:
        return str(model_dir), json.load(f)


def test_presets_are_the_papers_table_5():
    small = GBDTConfig(model="gbdt-1k", data="d", model_dir="m").lightgbm_params()
    large = GBDTConfig(model="gbdt-10k", data="d", model_dir="m").lightgbm_params()
    assert (small["num_iterations"], small["num_leaves"], small["min_data_in_leaf"]) == (
        1000,
        507,
        255,
    )
    assert (small["learning_rate"], small["cegb_tradeoff"]) == (0.46, 0.13)
    assert (large["num_iterations"], large["num_leaves"], large["min_data_in_leaf"]) == (
        10000,
        271,
        376,
    )
    assert (large["learning_rate"], large["cegb_tradeoff"]) == (0.32, 1.65)
    assert small["objective"] == "lambdarank"
    assert small["num_threads"] == (os.cpu_count() or 1)
    usual = GBDTConfig(model="gbdt", data="d", model_dir="m").lightgbm_params()
    assert (usual["num_iterations"], usual["num_leaves"], usual["min_data_in_leaf"]) == (
        1000,
        63,
        50,
    )
    assert usual["learning_rate"] == 0.05 and "cegb_tradeoff" not in usual
    # Early stopping is off unless asked for: a named budget is the model's size.
    assert GBDTConfig(model="gbdt-10k", data="d", model_dir="m").early_stopping_rounds == 0


def _trees_in(model_dir) -> int:
    with open(os.path.join(model_dir, "model.txt"), encoding="utf-8") as f:
        return sum(line.startswith("Tree=") for line in f)


def test_gbdt_1k_holds_1000_trees_and_early_stopping_only_when_asked(dataset, tmp_path):
    from pipelines.train_cli import main

    whole = tmp_path / "whole"
    flags = ["--data", dataset, "--log-level", "WARNING", "--no-export", "--num-threads", "1"]
    assert main(["--model", "gbdt-1k", "--model-dir", str(whole), *flags]) == 0
    metrics = json.loads((whole / "metrics.json").read_text())
    assert _trees_in(whole) == 1000
    assert metrics["training"]["trees"] == metrics["training"]["trees_budget"] == 1000
    # On this small set the validation score peaks long before tree 1,000, so
    # early stopping, when asked, keeps fewer trees and says so.
    stopped = tmp_path / "stopped"
    assert (
        main(
            [
                "--model",
                "gbdt-1k",
                "--model-dir",
                str(stopped),
                *flags,
                "--early-stopping-rounds",
                "20",
            ]
        )
        == 0
    )
    metrics = json.loads((stopped / "metrics.json").read_text())
    assert _trees_in(stopped) == metrics["training"]["trees"] < 1000
    assert metrics["training"]["trees_grown"] == metrics["training"]["trees"] + 20


def test_params_override_the_preset_through_aliases_and_typos_are_refused():
    config = GBDTConfig(
        model="gbdt-10k", data="d", model_dir="m", params={"n_estimators": 7, "max_leaves": 9}
    )
    params = config.lightgbm_params()
    assert (params["num_iterations"], params["num_leaves"]) == (7, 9)
    assert "n_estimators" not in params and "max_leaves" not in params
    with pytest.raises(ValueError, match="unknown LightGBM parameter 'num_leafs'"):
        GBDTConfig(data="d", model_dir="m", params={"num_leafs": 3})
    with pytest.raises(ValueError, match="given twice"):
        GBDTConfig(data="d", model_dir="m", params={"num_trees": 3, "n_estimators": 4})
    with pytest.raises(ValueError, match="Unknown preset"):
        GBDTConfig(data="d", model_dir="m", preset="gbdt-5k")


def test_gbdt_beats_random_ranking_and_uses_the_shared_metrics(gbdt_run, dataset):
    model_dir, metrics = gbdt_run
    manifest = load_manifest(dataset)
    test = read_split(dataset, manifest, "test")
    scores = score_arrays(load_booster(model_dir), test)
    # The reported figures are the shared evaluation of the saved model's scores.
    expected = evaluate_arrays(scores, test, max_label=manifest.label_levels)
    assert metrics["test"] == pytest.approx(expected, nan_ok=True)
    assert metrics["test"]["convention"] == expected["convention"]
    rng = np.random.default_rng(0)
    random = np.mean(
        [
            evaluate_rankings(
                test.padded(rng.normal(size=len(test.label)).astype(np.float32), 0.0),
                test.padded(test.label, 0.0),
                test.padded(test.relevance, 0.0),
                test.mask(),
            )["ndcg_y@10"]
            for _ in range(20)
        ]
    )
    assert metrics["test"]["ndcg_y@10"] > random + 5
    assert metrics["test"]["ndcg_r@10"] > 0


def test_training_follows_the_list_policy_and_writes_the_run(gbdt_run, dataset):
    model_dir, metrics = gbdt_run
    manifest = load_manifest(dataset)
    with_clicks = manifest.splits["train"].num_lists - manifest.splits["train"].empty_lists
    assert metrics["training"]["lists"] == with_clicks < manifest.splits["train"].num_lists
    assert 1 <= metrics["training"]["trees"] <= FAST["num_iterations"]
    assert metrics["training"]["lightgbm_params"]["num_leaves"] == FAST["num_leaves"]
    for name in ("model.txt", "config.json", "history.csv", "metrics.json"):
        assert os.path.isfile(os.path.join(model_dir, name)), name
    with open(os.path.join(model_dir, "history.csv"), encoding="utf-8") as f:
        header, first = f.readline().strip(), f.readline().split(",")
    # Without early stopping the validation score is taken every eval_every (10) trees.
    assert header == "trees,val_ndcg_y@10" and first[0] == "10"
    assert set(metrics) >= {"train", "vali", "test", "training", "settings"}


def test_same_seed_gives_the_same_trees(gbdt_run, dataset, tmp_path):
    model_dir, _ = gbdt_run
    with open(os.path.join(model_dir, "config.json"), encoding="utf-8") as f:
        settings = json.load(f)
    again = train_gbdt(GBDTConfig.from_json({**settings, "model_dir": str(tmp_path)}))
    assert again["test"] == pytest.approx(gbdt_run[1]["test"], nan_ok=True)
    a = open(os.path.join(model_dir, "model.txt"), encoding="utf-8").read()
    b = open(tmp_path / "model.txt", encoding="utf-8").read()
    assert a.split("parameters:")[0] == b.split("parameters:")[0]  # the trees


def test_tfr_eval_on_a_gbdt_run(gbdt_run, capsys):
    from pipelines.eval_cli import main

    model_dir, metrics = gbdt_run
    assert main(["--model-dir", model_dir, "--split", "test"]) == 0
    out = capsys.readouterr().out
    assert f"{metrics['test']['ndcg_y@10']:.2f}" in out


def test_tfr_predict_scores_letor_and_elwc_with_a_gbdt(gbdt_run, dataset, tmp_path):
    import lightgbm as lgb

    from pipelines.predict_cli import main
    from tfrecords_tools.letor.letor_parser import parse_letor_lines

    model_dir, _ = gbdt_run
    source = os.path.join(dataset, "source", "test.txt")
    out = tmp_path / "run.txt"
    assert main(["--model", model_dir, "--input", source, "--output", str(out)]) == 0
    rows = [line.split() for line in out.read_text().splitlines()]
    with open(source, "rb") as f:
        lines = f.read().split(b"\n")
    parsed = parse_letor_lines(lines, num_features=136, path=source, first_line=1)
    booster = lgb.Booster(model_file=os.path.join(model_dir, "model.txt"))
    expected = booster.predict(parsed.features)
    assert len(rows) == len(expected)
    by_line = {int(r[2]): float(r[4]) for r in rows}  # docid: the line number
    for number, score in zip(parsed.line_numbers, expected):
        assert by_line[number] == pytest.approx(score, abs=1e-5)

    csv_out = tmp_path / "elwc.csv"
    flags = ["--model", model_dir, "--input", dataset, "--output", str(csv_out)]
    assert main([*flags, "--format", "csv"]) == 0
    lines_out = csv_out.read_text().splitlines()
    assert lines_out[0] == "qid,docid,rank,score"
    assert len(lines_out) - 1 == load_manifest(dataset).splits["test"].num_items


def test_cli_refuses_flags_of_the_other_model_family(dataset, tmp_path, capsys):
    from pipelines.train_cli import main

    base = ["--data", dataset, "--model-dir", str(tmp_path / "r")]
    # Usage errors: argparse's exit status 2.
    for flags, message in [
        (["--model", "gbdt", "--epochs", "3"], "--epochs: for the neural models only"),
        (["--model", "mlp", "--trees", "3"], "--trees: for the GBDT models only"),
        (["--model", "gbdt", "--lgb-param", "oops"], "KEY=VALUE"),
    ]:
        with pytest.raises(SystemExit) as stop:
            main([*flags, *base])
        assert stop.value.code == 2
        assert message in capsys.readouterr().err
    assert not (tmp_path / "r").exists()


def test_missing_model_file_is_a_clear_error(tmp_path):
    with pytest.raises(FileNotFoundError, match="holds no model.txt"):
        load_booster(str(tmp_path))
    (tmp_path / "model.txt").write_text("not a model\n")
    with pytest.raises(ValueError, match="is not a LightGBM model"):
        load_booster(str(tmp_path))
