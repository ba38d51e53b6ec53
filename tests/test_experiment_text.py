"""tfr-experiment on text data: BM25 and the Listformer in one table, kinds checked."""

from __future__ import annotations

import json
import os

import pytest

from pipelines.experiment_cli import main
from pipelines.experiment_runner import run_experiment
from pipelines.experiment_specs import ExperimentConfig, parse_models
from tests.conftest import TEXT_EXPERIMENT_LISTFORMER as LISTFORMER


def test_bm25_and_the_listformer_share_one_table(text_experiment):
    output, results = text_experiment
    assert results["kind"] == "text"
    assert results["reported"] == ["ndcg_y@1", "ndcg_y@5", "ndcg_y@10"]
    runs = {(r["model"], r["seed"]) for r in results["runs"]}
    # BM25 is deterministic: one run per fold; the Listformer runs every seed.
    assert runs == {("bm25", 0), ("bm25:k1=1.2:b=0.75", 0), (LISTFORMER, 0), (LISTFORMER, 1)}
    by_model = {r["model"]: r for r in results["runs"]}
    assert by_model["bm25:k1=1.2:b=0.75"]["settings"]["k1"] == 1.2
    assert by_model[LISTFORMER]["settings"]["text"]["max_document_tokens"] == 16
    assert by_model[LISTFORMER]["settings"]["architecture"]["width"] == 16
    for run in results["runs"]:
        test = run["metrics"]["test"]
        assert test["num_lists"] == 8, run["model"]
        assert 0 <= test["ndcg_y@1"] <= 100 and 0 <= test["ndcg_y@10"] <= 100
        assert "ndcg_y@10" in run["metrics"]["vali"]
    assert results["summary"][LISTFORMER]["runs"] == 2
    table = open(os.path.join(output, "results.md"), encoding="utf-8").read()
    assert "# synthetic-text (text, relevance judgements)" in table
    assert (
        "| model | synthetic-text NDCG@1 | synthetic-text NDCG@5 | synthetic-text NDCG@10 |"
        in table
    )
    bm25 = results["summary"]["bm25"]["ndcg_y@10"]["mean"]
    assert f"{bm25:.2f}" in table
    for name in ("labels.png", "ndcg.png", "validation.png"):
        assert os.path.join(output, name) in results["plots"], name


def test_bm25_matches_tfr_bm25_eval(text_experiment, capsys):
    from pipelines.bm25_cli import main as bm25_main

    output, results = text_experiment
    path = os.path.join(output, "bm25_eval.json")
    data = os.path.join(output, "data")
    assert bm25_main(["eval", "--data", data, "--split", "test", "--output", path]) == 0
    with open(path, encoding="utf-8") as f:
        direct = json.load(f)
    bm25 = next(r for r in results["runs"] if r["model"] == "bm25")["metrics"]["test"]
    assert bm25["ndcg_y@10"] == pytest.approx(direct["ndcg@10"])
    assert bm25["ndcg_y@1"] == pytest.approx(direct["ndcg@1"])


def test_a_converted_text_dataset_is_used_as_it_is(text_experiment, tmp_path):
    output, _ = text_experiment
    config = ExperimentConfig(
        dataset=os.path.join(output, "data"), output=str(tmp_path / "again"), models="bm25"
    )
    results = run_experiment(config, progress=False)
    assert not os.path.exists(tmp_path / "again" / "data")
    assert results["folds"] == [1] and results["models"] == ["bm25"]


def test_models_must_take_the_datasets_kind_of_lists(text_experiment, dataset, tmp_path):
    output, _ = text_experiment
    text_data = os.path.join(output, "data")
    config = ExperimentConfig(dataset=text_data, output=str(tmp_path / "a"), models="bm25,mlp")
    with pytest.raises(ValueError, match="holds text lists: mlp cannot run on it"):
        run_experiment(config, progress=False)
    config = ExperimentConfig(dataset=dataset, output=str(tmp_path / "b"), models="gbdt,bm25")
    with pytest.raises(ValueError, match="holds feature vectors: bm25 cannot run on it"):
        run_experiment(config, progress=False)
    # Refused before anything is written or converted.
    assert not os.path.exists(tmp_path / "a") and not os.path.exists(tmp_path / "b")


def test_text_only_mistakes_are_clear_errors(tmp_path, capsys):
    with pytest.raises(ValueError, match="'k3' is not a BM25 setting"):
        parse_models("bm25:k3=1")
    with pytest.raises(ValueError, match="`b` must be in"):
        parse_models("bm25:b=2")
    with pytest.raises(ValueError, match="not a tfr-train setting"):
        parse_models("mlp:max_document_tokens=8")  # a text setting on a numeric model
    assert parse_models("listformer:max_document_tokens=8")[0].is_text
    flags = ["--dataset", "synthetic-text", "--no-simulation", "--output", str(tmp_path / "x")]
    assert main(flags + ["--models", "bm25", "--no-progress"]) == 1
    assert "--no-simulation does not apply to synthetic-text" in capsys.readouterr().err
    assert main(["--dataset", "trec", "--output", str(tmp_path / "y"), "--no-progress"]) == 1
    assert "trec:DIR" in capsys.readouterr().err
