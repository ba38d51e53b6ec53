"""The merged benchmark programs: each study or variant is an option of one program."""

from __future__ import annotations

from pipelines.benchmarks import synthetic_ceiling


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
