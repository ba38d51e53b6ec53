"""BM25 (bm25s) as a first stage and as a baseline on the text lists."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from pipelines.bm25_cli import main as bm25_main
from pipelines.convert_cli import main as convert_main
from tests.test_text_synthetic import list_aware, ndcg
from tfr_rankformer.text.bm25 import Bm25Config, Bm25Index
from tfrecords_tools.text.bm25_run import evaluate_bm25_splits, write_bm25_run
from tfrecords_tools.text.text_elwc import read_text_split
from tfrecords_tools.text.trec_files import TrecFormatError, read_run

COLLECTION = (
    "d1\tthe cat sat on the mat\n"
    "d2\tjaguar cars are fast cars\n"
    "d3\ta jaguar is a big cat that runs fast\n"
    "d4\tnothing to see here\n"
)


def write(path, text) -> str:
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)
    return str(path)


def test_index_ranks_the_document_holding_the_query_terms_first():
    documents = [["a", "b", "c"], ["jaguar", "speed", "x"], ["jaguar", "y", "z"], ["q"]]
    scores = Bm25Index(documents).scores(["jaguar", "speed"])
    assert scores.argmax() == 1 and scores[2] > 0 and scores[0] == scores[3] == 0
    assert not Bm25Index(documents).scores(["unknown"]).any()


def test_run_lists_matching_documents_by_score(tmp_path, capsys):
    queries = write(tmp_path / "q.tsv", "1\tFast jaguar?\n2\tcat\n3\tzebra\n")
    collection = write(tmp_path / "c.tsv", COLLECTION)
    out = str(tmp_path / "run.txt")
    code = bm25_main(
        ["run", "--queries", queries, "--collection", collection, "--output", out,
         "--top-k", "2", "--no-progress"]
    )  # fmt: skip
    assert code == 0
    assert "wrote" in capsys.readouterr().out
    lines = list(read_run(out))
    by_query = {}
    for _, qid, docid, rank, score, _ in lines:
        by_query.setdefault(qid, []).append((rank, docid, score))
    # d3 holds both terms ("jaguar" and "fast"); d2 holds both too but is longer in "cars".
    assert [d for _, d, _ in by_query["1"]][0] in ("d2", "d3")
    assert {d for _, d, _ in by_query["1"]} == {"d2", "d3"}
    assert [d for _, d, _ in by_query["2"]] == ["d1", "d3"]
    assert "3" not in by_query  # no document shares a term with "zebra"
    scores = [s for _, _, s in by_query["1"]]
    assert scores == sorted(scores, reverse=True)


def test_run_counts_and_refusals(tmp_path):
    queries = write(tmp_path / "q.tsv", "1\tjaguar\n2\tzebra\n")
    collection = write(tmp_path / "c.tsv", COLLECTION)
    out = str(tmp_path / "run.txt")
    counts = write_bm25_run([queries], [collection], out, top_k=5, progress=False)
    assert counts == {
        "queries": 2,
        "documents": 4,
        "run_lines": 2,
        "queries_short_of_top_k": 2,
        "queries_without_match": 1,
    }
    bad = write(tmp_path / "bad.tsv", COLLECTION + "d2\tagain\n")
    with pytest.raises(TrecFormatError, match=r"bad.tsv: line 5: document 'd2' given twice"):
        write_bm25_run([queries], [bad], str(tmp_path / "never.txt"), progress=False)
    assert not any(name.startswith("never") for name in os.listdir(tmp_path))


def test_config_validation():
    with pytest.raises(ValueError, match="`b` must be in"):
        Bm25Config(b=1.5)
    with pytest.raises(ValueError, match="Unknown BM25 method"):
        Bm25Config(method="okapi")


@pytest.fixture(scope="module")
def synthetic_text(tmp_path_factory):
    out = str(tmp_path_factory.mktemp("text") / "data")
    args = ["--input", "synthetic-text", "--synthetic-lists", "150", "--seed", "2"]
    assert convert_main([*args, "--output", out, "--no-progress"]) == 0
    return out


def test_bm25_ndcg_on_synthetic_text_is_below_the_list_aware_oracle(synthetic_text):
    metrics = evaluate_bm25_splits(synthetic_text, ("test",))["test"]
    assert metrics["num_lists"] == 50 and metrics["index_documents"] > 2000
    lists = [
        (t.query_tokens, t.document_tokens, np.array(t.relevance))
        for t in read_text_split(synthetic_text, "test")
    ]
    oracle = ndcg(lists, list_aware, ks=(1, 5, 10))
    for k in (1, 5, 10):
        assert 30 < metrics[f"ndcg@{k}"] < oracle[k] - 1, (k, metrics, oracle)
    # BM25 knows the query terms: it beats a random order by far.
    rng = np.random.default_rng(0)
    random_order = ndcg(lists, lambda q, d: rng.random(len(d)), ks=(10,))
    assert metrics["ndcg@10"] > random_order[10] + 15


def test_cli_eval_prints_and_writes_the_metrics(synthetic_text, tmp_path, capsys):
    out = str(tmp_path / "bm25.json")
    assert bm25_main(["eval", "--data", synthetic_text, "--output", out]) == 0
    printed = capsys.readouterr().out
    with open(out) as f:
        metrics = json.load(f)
    assert f"NDCG@10 {metrics['ndcg@10']:.2f}" in printed
    assert metrics["bm25"] == {"k1": 0.9, "b": 0.4, "method": "lucene"}
    assert bm25_main(["eval", "--data", synthetic_text, "--split", "nope"]) == 1
    assert "has no 'nope' split" in capsys.readouterr().err


def test_cli_eval_refuses_a_numeric_dataset(tmp_path, capsys):
    (tmp_path / "manifest.json").write_text(json.dumps({"splits": {}}))
    assert bm25_main(["eval", "--data", str(tmp_path)]) == 1
    assert "not a text dataset" in capsys.readouterr().err


def test_text_conversion_and_bm25_import_no_tensorflow(tmp_path):
    code = f"""
import sys
from pipelines.bm25_cli import main as bm25
from pipelines.convert_cli import main as convert
out = {str(tmp_path / "data")!r}
assert convert(["--input", "synthetic-text", "--synthetic-lists", "6", "--output", out,
                "--no-progress"]) == 0
assert bm25(["eval", "--data", out]) == 0
print(sorted(m for m in ("tensorflow", "tensorflow_ranking") if m in sys.modules))
"""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=root, timeout=300
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[-1] == "[]"
