"""Planning a run before its first step: the memory estimate, the refusal, progress lines."""

from __future__ import annotations

import dataclasses
import logging
import os

import pytest

from pipelines.train_cli import main as train_main  # noqa: E402
from tests.conftest import train_config as _config  # noqa: E402
from tfr_rankformer import runner  # noqa: E402
from tfr_rankformer.inputs.manifest import (
    Manifest,  # noqa: E402
    load_manifest,
)
from tfr_rankformer.model.model_config import ModelConfig  # noqa: E402
from tfr_rankformer.training.memory_estimate import model_shape, step_bytes  # noqa: E402
from tfr_rankformer.training.run_plan import (  # noqa: E402
    SAFETY_MARGIN,
    SHUFFLE_BUFFER,
    MemoryLimitError,
    check_memory,
    plan_run,
    shuffle_lists,
)


def _split(lists, items) -> Manifest:
    return Manifest.coerce({"splits": {"train": {"num_lists": lists, "num_items": items}}})


def test_the_shuffle_buffer_holds_a_bounded_number_of_items():
    # The click protocol's lists of at most 16 keep the paper's 10,000 lists.
    assert shuffle_lists(_split(189_000, 189_000 * 16)) == SHUFFLE_BUFFER
    assert shuffle_lists(_split(4_710, 4_710 * 15)) == SHUFFLE_BUFFER
    # WEB30K's mean of 120 items: 1,326 lists, about 160,000 items.
    assert shuffle_lists(_split(18_900, 2_279_173)) == 1_326
    assert shuffle_lists(_split(10, 100_000_000)) == 1


def test_step_memory_grows_with_items_and_with_attention():
    shape = model_shape("rankformer", ModelConfig().resolved("rankformer"), 136)
    short = step_bytes(shape, lists=2048, length=16, num_features=136)
    # The same items in long lists hold more: the attention entries grow with the length.
    long = step_bytes(shape, lists=32, length=1024, num_features=136)
    assert 1.3 * 2**30 < short < 1.6 * 2**30  # measured: 1.43 GiB
    assert 2.4 * 2**30 < long < 3.0 * 2**30  # measured: 2.58 GiB
    assert step_bytes(shape, lists=16, length=1024, num_features=136) * 2 == pytest.approx(
        long, rel=1e-6
    )
    mlp = model_shape("mlp", ModelConfig().resolved("mlp"), 136)
    assert step_bytes(mlp, lists=2048, length=16, num_features=136) < short / 2


def test_a_run_that_cannot_fit_is_refused_with_flags_that_fit(dataset, tmp_path):
    manifest = load_manifest(dataset)
    config = _config(dataset, tmp_path / "run", batch_size=None, batch_items=None)
    run = plan_run(config, manifest, data_dir=dataset)
    assert run.limit and run.memory.peak * SAFETY_MARGIN < run.limit
    check_memory(run, config)  # fits: no error
    memory = run.memory
    tight = int(SAFETY_MARGIN * (memory.runtime + memory.pipeline + memory.step // 3))
    small = dataclasses.replace(run, limit=tight)
    with pytest.raises(MemoryLimitError, match="--batch-items") as refused:
        check_memory(small, config)
    items = int(str(refused.value).split("--batch-items ")[1].split(",")[0].split(";")[0])
    lists, length = memory.step_batch
    assert 0 < items < lists * length / 3
    # The suggested budget fits the same limit.
    fitted = dataclasses.replace(config, batch_items=items)
    replanned = dataclasses.replace(plan_run(fitted, manifest, data_dir=dataset), limit=tight)
    check_memory(replanned, fitted)


def test_tfr_train_refuses_before_writing_anything(dataset, tmp_path, capsys):
    model_dir = tmp_path / "run"
    flags = ["--model", "mlp", "--data", dataset, "--model-dir", str(model_dir)]
    assert train_main(flags + ["--epochs", "1", "--memory-limit", "0.3"]) == 1
    message = capsys.readouterr().err
    assert "tfr-train: error: this run needs about" in message
    assert "0.30 GiB (--memory-limit)" in message
    # The runtime alone is over the limit: no smaller batch or list would fit.
    assert "No batch size makes it fit: the runtime and the input pipeline alone" in message
    assert not os.path.exists(model_dir)


def test_runs_without_a_terminal_log_progress_lines(dataset, tmp_path, caplog):
    config = _config(dataset, tmp_path / "run", epochs=2, batch_size=None, batch_items=4096)
    with caplog.at_level(logging.INFO):
        metrics = runner.train(config, verbose=1, progress_seconds=1e-6)
    lines = [r.getMessage() for r in caplog.records if r.name.endswith("training_callbacks")]
    steps = metrics["training"]["steps_per_epoch"]
    assert steps > 1
    for epoch in (1, 2):
        assert f"epoch {epoch}/2 step {steps}/{steps} (100%)" in "\n".join(lines)
        done = [line for line in lines if line.startswith(f"epoch {epoch}/2 done: {steps} steps")]
        assert len(done) == 1 and "val_ndcg_y@10" in done[0]
    assert any("epoch ETA" in line for line in lines)
    plan = [r.getMessage() for r in caplog.records if r.getMessage().startswith("plan: ")]
    assert len(plan) == 1 and "batches/epoch by length" in plan[0]
