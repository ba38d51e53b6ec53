"""The conversion benchmark runs end to end on a small file (its figures are not checked)."""

from __future__ import annotations

import pytest

from pipelines.benchmarks import convert_bench


def test_benchmark_reports_both_rates_and_memory(tmp_path, capsys):
    assert convert_bench.main(["--items", "3000", "--workdir", str(tmp_path), "--repeat", "2"]) == 0
    out = capsys.readouterr().out
    for label in ("(a) naive", "(b) tfr-convert", "ratio (b) / (a)", "peak RSS", "2 rounds"):
        assert label in out


@pytest.mark.slow
def test_against_beam_reports_both_converters(tmp_path, capsys):
    argv = ["--against", "beam", "--items", "2000", "--workdir", str(tmp_path), "--repeat", "1"]
    assert convert_bench.main(argv) == 0
    out = capsys.readouterr().out
    for label in ("(a) tfr-convert", "(b) ... --runner DirectRunner", "local converter is"):
        assert label in out
