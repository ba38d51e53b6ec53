"""Seeds in the side-by-side benchmark: independent per fold, and the noise they put
in its figures measured apart from the folds'."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from pipelines.benchmarks.reference import reference_parity
from pipelines.benchmarks.reference.parity_tables import (
    METRICS,
    noise_difference,
    over_runs,
    seed_noise,
)
from pipelines.benchmarks.reference.reference_parity import run_seeds


def test_fold_seeds_differ_per_fold_and_the_record_gives_every_seed(tmp_path, capsys):
    assert run_seeds(0, 2, 3, per_fold=False) == [0, 1]
    assert run_seeds(2, 4, 3, per_fold=True) == [3002, 3003, 3004, 3005]
    assert not set(run_seeds(0, 4, 3, per_fold=True)) & set(run_seeds(0, 4, 5, per_fold=True))
    # A record of seeds 0-1 on both folds and per-fold seeds after them, printed whole.
    identity = {"dataset": "MQ2008", "labels": "shared", "data_seed": 0, "epochs": 200}
    rng = np.random.default_rng(0)
    lines = []
    for fold in (3, 5):
        for seed in [0, 1, *run_seeds(2, 4, fold, per_fold=True)]:
            for side, shift in (("ours", -1.0), ("released code", 0.0)):
                y = 60 + fold + shift + rng.normal(0, 0.3)
                metrics = {"ndcg_y@10": y, "ndcg_r@10": y, "ndcg_y@10_tmax": y}
                run = dict(identity, side=side, model="mlp", fold=fold, seed=seed, **metrics)
                lines.append(json.dumps(dict(run, lists_per_sec=1.0)) + "\n")
    record = tmp_path / "record.jsonl"
    record.write_text("".join(lines))
    args = ["--dataset", "MQ2008", "--folds", "3,5", "--seeds", "all", "--epochs", "200"]
    args += ["--models", "mlp", "--output", str(tmp_path / "out"), "--record", str(record)]
    assert reference_parity.main([*args, "--recorded-only"]) == 0
    printed = capsys.readouterr().out
    assert "Left out" not in printed and "every seed the record holds" in printed
    # Six runs per fold and side; the folds differ by 2, the seeds by about 0.3.
    row = next(line for line in printed.splitlines() if line.startswith("| mlp | ours | 12 (2)"))
    share = float(row.split("seed share ")[1].split("%")[0])
    assert share < 20
    difference = next(line for line in printed.splitlines() if "| mlp | ours − released |" in line)
    assert difference.split("|")[4].strip().startswith("-1.") and "beyond seed noise" in difference
    # Per-fold seeds are no seed-by-seed rows; seeds 0 and 1 (on both folds) are.
    assert "| mlp | 3002 |" not in printed and "| mlp | 0 | 3,5 |" in printed
    with pytest.raises(SystemExit):
        reference_parity.main([*args])  # "all" reads the record only


def test_seed_noise_separates_seeds_from_folds():
    found = seed_noise({1: [60.0, 62.0, 61.0], 2: [70.0, 72.0, 71.0]})
    assert found["mean"] == 66.0 and found["sd"] == 1.0 and found["runs"] == 6
    # Each fold's mean has variance 1/3 from its seeds; the mean of two folds 1/6.
    assert math.isclose(found["se"], math.sqrt(1 / 6))
    assert found["share"] < 0.05
    same_folds = noise_difference(
        {1: [61.0, 63.0], 2: [71.0, 73.0]}, {1: [60.0, 62.0], 2: [70.0, 72.0]}
    )
    assert same_folds["mean"] == 1.0 and math.isclose(same_folds["se"], 1.0)
    assert math.isclose(same_folds["z"], 1.0)
    # One run per fold: no seed noise to measure, no table.
    assert math.isnan(seed_noise({1: [60.0], 2: [70.0]})["se"])
    assert over_runs({"mlp": {"ours": {(1, 0): {k: 60.0 for k in METRICS}}}}) == ""
