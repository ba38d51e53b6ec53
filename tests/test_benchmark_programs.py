"""The merged benchmark programs: each study or variant is an option of one program."""

from __future__ import annotations

import pytest

from pipelines.benchmarks import mq2008, synthetic_ceiling


def test_the_mq2008_gbdt_study_keeps_its_defaults():
    parser = mq2008.build_parser()
    gbdt = parser.parse_args(["gbdt", "--early-stopping-rounds", "100"])
    assert (gbdt.output, gbdt.batch_size, gbdt.trees, gbdt.early_stopping_rounds) == (
        "results/mq2008",
        256,
        2000,
        100,
    )
    with pytest.raises(SystemExit):
        parser.parse_args(["losses"])  # tfr-experiment runs each loss
    with pytest.raises(SystemExit):
        parser.parse_args([])


def test_synthetic_text_baselines_rank_by_bm25_and_the_oracles(capsys):
    synthetic_ceiling.main(["--text", "--lists", "30", "--seed", "1"])
    out = capsys.readouterr().out
    rows = {line.split(" | ")[0][2:]: line for line in out.splitlines() if line.startswith("| ")}
    assert set(rows) >= {"random", "bm25", "oracle, document at a time", "oracle, list-aware"}
    assert "10 test lists" in out


def test_help_states_each_default(capsys):
    from pipelines.benchmarks import train_bench

    help_text = train_bench.build_parser().format_help()
    assert "(default: 2048)" in help_text and "--compare-plain" in help_text
    assert "(default: None)" not in help_text and "(default: False)" not in help_text
