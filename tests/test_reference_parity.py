"""The side-by-side benchmark with the authors' released code: our side, the verdicts,
and the runner's LETOR reader (the released side itself needs torch)."""

from __future__ import annotations

import os

import numpy as np
import pytest

pytest.importorskip("tensorflow")

from pipelines.benchmarks import reference_parity, reference_runner  # noqa: E402
from tests.conftest import letor_line, write_lines  # noqa: E402


def _fold(root, queries: int, seed: int):
    rng = np.random.default_rng(seed)
    lines = []
    for qid in range(queries):
        for _ in range(int(rng.integers(3, 9))):
            values = rng.random(4).round(3)
            label = int(min(2, (values[0] * 3) // 1))  # relevance follows feature 1
            lines.append(letor_line(label, qid + 1, values))
    return lines


@pytest.fixture
def folds(tmp_path):
    root = tmp_path / "TinyFolds"
    for split, queries, seed in (("train", 40, 0), ("vali", 10, 1), ("test", 10, 2)):
        write_lines(root / "Fold1" / f"{split}.txt", _fold(root, queries, seed))
    return root


def test_our_side_runs_without_the_released_code(folds, tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("RANKFORMER_OFFICIAL_DIR", raising=False)
    output = tmp_path / "parity"
    args = ["--dataset", str(folds), "--folds", "1", "--epochs", "2", "--models", "mlp"]
    assert reference_parity.main([*args, "--output", str(output)]) == 0
    printed = capsys.readouterr().out
    assert "not set up" in printed and "--official-dir" in printed
    table = (output / "parity.md").read_text()
    assert "| mlp | ours |" in table and "released code" not in table.split("\n", 2)[2]
    # The converted fold simulates clicks with purchase label 4, as the released code.
    manifest = (output / "data" / "Fold1" / "manifest.json").read_text()
    assert '"purchase_label": 4' in manifest
    run = output / "ours" / "mlp" / "Fold1"
    assert '"keep_weights": "last"' in (run / "config.json").read_text()
    # A rerun reuses the finished run instead of training again.
    before = os.path.getmtime(run / "metrics.json")
    assert reference_parity.main([*args, "--output", str(output)]) == 0
    assert os.path.getmtime(run / "metrics.json") == before


def test_models_without_a_released_counterpart_are_refused(tmp_path):
    with pytest.raises(SystemExit):
        reference_parity.main(["--models", "context_aware", "--output", str(tmp_path)])


def _side(ndcg, se, speed):
    return {
        "ndcg_y@10": (ndcg, se),
        "ndcg_r@10": (ndcg + 3, se),
        "ndcg_y@10_tmax": (ndcg - 10, se),
        "lists_per_sec": (speed, float("nan")),
    }


def test_the_table_marks_differences_beyond_one_standard_error():
    rows = {
        "rankformer": {"ours": _side(68.5, 0.8, 3000), "released code": _side(68.3, 0.85, 1500)},
        "mlp": {"ours": _side(66.0, 0.8, 3000), "released code": _side(68.3, 0.85, 1500)},
    }
    args = reference_parity.argparse.Namespace(dataset="MQ2008", folds="1-5", epochs=30, seed=0)
    text = reference_parity.table(rows, "some CPU; avx2", args)
    delta = [line for line in text.splitlines() if "| Δ |" in line]
    assert delta[0] == "| rankformer | Δ | +0.20 ✓ | +0.20 ✓ | +0.20 ✓ | 2.00x |"
    assert delta[1].startswith("| mlp | Δ | -2.30 ✗ |")


def test_runner_reads_sparse_letor_lines(tmp_path):
    path = write_lines(
        tmp_path / "train.txt",
        ["2 qid:7 1:0.5 3:2.0 #docid = a\n", "0 qid:7 2:1.5\n", "\n", "1 qid:9 1:1 2:2 3:3\n"],
    )
    frame = reference_runner.read_letor(path)
    assert list(frame["target"]) == [2, 0, 1] and list(frame["qid"]) == [7, 7, 9]
    np.testing.assert_array_equal(
        frame.iloc[:, 2:].to_numpy(), [[0.5, 0.0, 2.0], [0.0, 1.5, 0.0], [1.0, 2.0, 3.0]]
    )
