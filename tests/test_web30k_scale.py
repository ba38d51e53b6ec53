"""The WEB30K-scale benchmark end to end on a tiny dataset: stages as child processes,
their wall time and peak memory recorded, the report naming its command line."""

from __future__ import annotations

import argparse
import json
import os

import pytest

from pipelines.benchmarks import bench_support, web30k_scale
from tfr_rankformer.inputs.manifest import Manifest


def test_tiny_run_records_every_stage(tmp_path, monkeypatch, capsys):
    monkeypatch.delenv("RANKFORMER_OFFICIAL_DIR", raising=False)
    monkeypatch.delenv("RANKFORMER_OFFICIAL_PYTHON", raising=False)
    argv = ["--output", str(tmp_path), "--lists", "60", "--models", "mlp", "--protocols", "clicks"]
    assert web30k_scale.main(argv + ["--click-epochs", "2"]) == 0
    with open(tmp_path / "web30k_scale.jsonl", encoding="utf-8") as f:
        run, *records = [json.loads(line) for line in f]
    assert run["stage"] == "run" and run["lists"] == 60
    stages = {(r["stage"], r["model"]): r for r in records}
    for key in (("convert", "-"), ("train", "mlp")):
        record = stages[key]
        assert record["returncode"] == 0, record.get("tail")
        assert record["wall_seconds"] > 0 and record["peak_rss_bytes"] > 0
        assert record["lists_per_sec"] > 0 and record["items_per_sec"] > 0
        assert os.path.isfile(record["log"])
    assert stages["train", "mlp"]["training"]["lists_per_epoch"] == 600  # 10 bootstraps a query
    # Two epochs on clicks; the rate shown is the median of the epochs' rates.
    epochs = stages["train", "mlp"]["epoch_lists_per_sec"]
    assert len(epochs) == 2 and stages["train", "mlp"]["training"]["epochs_completed"] == 2
    assert stages["train", "mlp"]["lists_per_sec"] == pytest.approx(sum(epochs) / 2)
    markdown = (tmp_path / "web30k_scale.md").read_text(encoding="utf-8")
    assert "python -m pipelines.benchmarks.web30k_scale --output" in markdown
    assert "--models mlp --protocols clicks" in markdown
    # A rerun reuses the data, keeping the conversion's figures; --reprint runs nothing.
    args = argparse.Namespace(output=str(tmp_path), lists=60)
    earlier = {("convert", "clicks", "-"): stages["convert", "-"]}
    reused = web30k_scale.convert(args, "clicks", earlier)
    assert reused["reused"] and reused["wall_seconds"] == stages["convert", "-"]["wall_seconds"]
    capsys.readouterr()
    assert web30k_scale.main(["--output", str(tmp_path), "--reprint"]) == 0
    out = capsys.readouterr().out
    assert "| clicks | convert | - |" in out and "| clicks | train | mlp |" in out


def test_bad_names_are_refused(tmp_path):
    with pytest.raises(SystemExit):
        web30k_scale.main(["--output", str(tmp_path), "--models", "mlp,forest"])
    with pytest.raises(SystemExit):
        web30k_scale.main(["--output", str(tmp_path), "--quick", "--lists", "60"])
    with pytest.raises(SystemExit):
        web30k_scale.main(["--output", str(tmp_path), "--quick", "--click-epochs", "0"])


def test_stage_peak_memory_is_its_own_and_failures_are_named(tmp_path):
    held = bytearray(600 << 20)  # this process's peak must not show in a stage's
    held[:: 1 << 12] = b"1" * len(held[:: 1 << 12])
    record = bench_support.run_stage(["true"], str(tmp_path / "true.log"))
    assert record["returncode"] == 0 and 0 < record["peak_rss_bytes"] < 200 << 20
    record = bench_support.run_stage(
        ["sh", "-c", "echo going; kill -9 $$"], str(tmp_path / "k.log")
    )
    assert record["failure"].startswith("does not fit in memory") and "going" in record["tail"]
    record = bench_support.run_stage(["sleep", "30"], str(tmp_path / "s.log"), timeout=1)
    assert record["failure"] == "timed out after 1 s" and record["wall_seconds"] < 10
    record = bench_support.run_stage(["sh", "-c", "exit 3"], str(tmp_path / "e.log"))
    assert record["failure"] == "exit code 3" and "$ sh -c" in record["tail"]


def test_released_batches_fit_half_the_memory_unless_listed():
    manifest = Manifest.coerce({"num_features": 136, "splits": {"train": {"longest_list": 16}}})
    memory = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    (auto,) = web30k_scale.released_batches("auto", manifest)
    assert web30k_scale.released_estimate(manifest, auto) <= memory / 2
    assert auto == 2048 or web30k_scale.released_estimate(manifest, 2 * auto) > memory / 2
    # 2048 lists of 16 with 136 features: about 34 GiB.
    assert 33 < web30k_scale.released_estimate(manifest, 2048) / 2**30 < 35
    assert web30k_scale.released_batches("128,1024", manifest) == [128, 1024]
