"""The side-by-side benchmark with the authors' released code: our side, the verdicts,
and the runner's LETOR reader (the released side itself needs torch)."""

from __future__ import annotations

import argparse
import json
import math
import os
import sys

import numpy as np
import pytest

from pipelines.benchmarks.reference import parity_tables, reference_parity, reference_runner
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
    run = output / "ours" / "mlp" / "Fold1" / "seed0"
    assert '"keep_weights": "last"' in (run / "config.json").read_text()
    # A rerun reuses the finished run instead of training again.
    before = os.path.getmtime(run / "metrics.json")
    assert reference_parity.main([*args, "--output", str(output)]) == 0
    assert os.path.getmtime(run / "metrics.json") == before


FAKE_RUNNER = """\
import json, sys
if sys.argv[1] == "-c":  # the set-up check's imports
    sys.exit(0)
args = dict(zip(sys.argv[2::2], sys.argv[3::2]))
with open(LOG, "a") as f:
    f.write(json.dumps(args) + "\\n")
seed = int(args["--seed"])
for name in args["--models"].split(","):
    if name == "transformer":
        sys.exit("the transformer crashed")
    if name == "rankformer" and "KILL" in LOG:
        import os, signal
        os.kill(os.getpid(), signal.SIGKILL)
    base = {"mlp": 60.0, "rankformer": 62.0, "transformer": 61.0}[name] + seed
    print(json.dumps({"model": name, "lists_per_sec": 100.0, "ndcg_y@10": base,
                      "ndcg_r@10": base + 1, "ndcg_y@10_tmax": base + 2}))
"""


@pytest.fixture
def fake_released(tmp_path):
    """A stand-in for the released code and its Python: it logs each runner call's
    options and prints fixed metrics per model (the seed added)."""
    official = tmp_path / "official_code"
    official.mkdir()
    (official / "model.py").write_text("")
    log = tmp_path / "runner_calls.jsonl"
    python = tmp_path / "fake_python"
    python.write_text(f"#!{sys.executable}\nLOG = {str(log)!r}\n" + FAKE_RUNNER)
    python.chmod(0o755)
    return ["--official-dir", str(official), "--official-python", str(python)], log


def test_shared_lists_pair_the_sides_fold_by_fold_over_seeds(folds, tmp_path, fake_released):
    from tfr_rankformer.inputs.list_arrays import read_split
    from tfr_rankformer.inputs.manifest import load_manifest

    official, log = fake_released
    output = tmp_path / "parity"
    args = ["--dataset", str(folds), "--folds", "1", "--epochs", "1", "--models", "mlp"]
    args += ["--seeds", "2", "--output", str(output), *official]
    assert reference_parity.main(args) == 0
    calls = [json.loads(line) for line in log.read_text().splitlines()]
    assert [c["--seed"] for c in calls] == ["0", "1"]
    # The released side gets our conversion's lists, clicks and relevance as they are.
    fold = output / "data" / "Fold1"
    for split in ("train", "test"):
        assert calls[0][f"--{split}"] == str(fold / "lists" / f"{split}.npz")
        expected = read_split(str(fold), load_manifest(str(fold)), split)
        frame = reference_runner.read_lists(calls[0][f"--{split}"])
        np.testing.assert_array_equal(frame["target"], expected.label)
        np.testing.assert_array_equal(frame["explicit_target"], expected.relevance)
        np.testing.assert_allclose(frame.iloc[:, 3:].to_numpy(), expected.features, rtol=1e-6)
        assert frame["qid"].nunique() == expected.num_lists
    # Our side ran once per seed; the fold's figure is the mean over the seeds.
    for seed in (0, 1):
        assert (output / "ours" / "mlp" / "Fold1" / f"seed{seed}" / "metrics.json").is_file()
    summary = json.loads((output / "parity.json").read_text())
    assert summary["summary"]["mlp"]["released code"]["ndcg_y@10"][0] == pytest.approx(60.5)
    ours = summary["fold_means"]["mlp"]["ours"]["1"]["ndcg_y@10"]
    paired = summary["paired_differences"]["mlp"]["ndcg_y@10"]
    assert paired["mean"] == pytest.approx(ours - 60.5) and paired["n"] == 1
    table = (output / "parity.md").read_text()
    assert "same simulated lists" in table and "seeds 0-1" in table
    ahead = int(ours > 60.5)
    assert f"| mlp | {ahead}/1; {ours - 60.5:+.2f} to {ours - 60.5:+.2f} |" in table
    # A rerun reuses every finished run on both sides.
    assert reference_parity.main(args) == 0
    assert len(log.read_text().splitlines()) == 2


def test_a_record_keeps_finished_runs_for_another_machine(folds, tmp_path, fake_released, capsys):
    official, log = fake_released
    record = tmp_path / "record.jsonl"
    args = ["--dataset", str(folds), "--folds", "1", "--epochs", "1", "--models", "mlp"]
    args += ["--record", str(record)]
    assert reference_parity.main([*args, "--output", str(tmp_path / "a"), *official]) == 0
    lines = [json.loads(line) for line in record.read_text().splitlines()]
    assert [(r["side"], r["model"], r["fold"], r["seed"]) for r in lines] == [
        ("ours", "mlp", 1, 0),
        ("released code", "mlp", 1, 0),
    ]
    assert lines[1]["dataset"] == "TinyFolds" and lines[1]["ndcg_y@10"] == 60.0
    assert lines[0]["epochs"] == 1 and lines[0]["labels"] == "shared" and "cpu" in lines[0]
    table = (tmp_path / "a" / "parity.md").read_text()
    # Elsewhere, without the released code: nothing is trained or run again, the
    # released side comes from the record, and the table is the same.
    capsys.readouterr()
    assert reference_parity.main([*args, "--output", str(tmp_path / "b")]) == 0
    printed = capsys.readouterr().out
    assert f"Every run comes from {record}" in printed and "not set up" not in printed
    assert len(log.read_text().splitlines()) == 1
    # Not even the folds are converted again.
    assert not (tmp_path / "b" / "ours").exists() and not (tmp_path / "b" / "data").exists()
    assert (tmp_path / "b" / "parity.md").read_text() == table
    assert len(record.read_text().splitlines()) == 2
    # Other epochs are other runs: the record does not stand in for them.
    assert (
        reference_parity.main(
            [
                "--epochs",
                "2",
                *args[6:],
                *args[:4],
                "--output",
                str(tmp_path / "c"),
                "--side",
                "ours",
            ]
        )
        == 0
    )
    assert (tmp_path / "c" / "ours" / "mlp" / "Fold1" / "seed0" / "metrics.json").is_file()
    assert len(record.read_text().splitlines()) == 3


def test_recorded_only_pairs_what_both_sides_hold_and_lists_the_rest(tmp_path, capsys):
    record = tmp_path / "record.jsonl"
    identity = {"dataset": "MQ2008", "labels": "shared", "data_seed": 0, "epochs": 200}
    runs = {
        ("ours", 1, 0): 60.0,
        ("ours", 1, 1): 62.0,
        ("ours", 2, 0): 64.0,
        ("ours", 2, 1): 66.0,
        ("released code", 1, 0): 61.0,
        ("released code", 1, 1): 63.0,
        ("released code", 2, 0): 65.0,
    }
    lines = [
        dict(
            identity,
            side=side,
            model="mlp",
            fold=fold,
            seed=seed,
            lists_per_sec=1.0,
            **{"ndcg_y@10": y, "ndcg_r@10": y, "ndcg_y@10_tmax": y},
        )
        for (side, fold, seed), y in runs.items()
    ]
    record.write_text("".join(json.dumps(line) + "\n" for line in lines))
    args = ["--dataset", "MQ2008", "--folds", "1-2", "--seeds", "2", "--epochs", "200"]
    args += ["--models", "mlp", "--output", str(tmp_path / "out"), "--record", str(record)]
    assert reference_parity.main([*args, "--recorded-only"]) == 0
    printed = capsys.readouterr().out
    assert "nothing is trained or run" in printed
    assert "Left out, not in it (1;" in printed and "released code mlp Fold2 seed 1" in printed
    # Fold 2 keeps seed 0 alone on both sides: ours 61 and 64, theirs 62 and 65.
    assert "| mlp | ours | 62.50 ± 1.50 |" in printed
    assert "| mlp | released code | 63.50 ± 1.50 |" in printed
    assert "| mlp | Δ | -1.00 ± 0.00 ✓ |" in printed
    assert not (tmp_path / "out" / "data").exists()
    assert "released code mlp Fold2 seed 1" in (tmp_path / "out" / "parity.md").read_text()
    assert len(record.read_text().splitlines()) == 7
    # Without a record there is nothing to print from.
    with pytest.raises(SystemExit):
        reference_parity.main([*args[:-2], "--recorded-only"])
    assert "--recorded-only needs --record" in capsys.readouterr().err


def test_a_broken_record_line_is_named(tmp_path, capsys):
    record = tmp_path / "record.jsonl"
    record.write_text('{"dataset": "MQ2008"}\n')
    with pytest.raises(SystemExit) as exit_:
        reference_parity.main(["--output", str(tmp_path / "out"), "--record", str(record)])
    assert exit_.value.code == 2
    assert f"{record}, line 1: not a run record" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_own_labels_give_the_released_code_the_letor_files(folds, tmp_path, fake_released):
    official, log = fake_released
    output = tmp_path / "parity"
    args = ["--dataset", str(folds), "--folds", "1", "--epochs", "1", "--models", "mlp"]
    args += ["--labels", "own", "--side", "released", "--output", str(output), *official]
    assert reference_parity.main(args) == 0
    (call,) = [json.loads(line) for line in log.read_text().splitlines()]
    assert call["--train"] == str(folds / "Fold1" / "train.txt")
    table = (output / "parity.md").read_text()
    assert "simulating its own clicks" in table and "| mlp | ours |" not in table


def test_a_crash_keeps_the_models_finished_before_it(folds, tmp_path, fake_released, capsys):
    official, log = fake_released
    output = tmp_path / "parity"
    args = ["--dataset", str(folds), "--folds", "1", "--epochs", "1"]
    args += ["--models", "mlp,transformer", "--side", "released", "--output", str(output)]
    assert reference_parity.main([*args, *official]) == 1
    err = capsys.readouterr().err
    assert "failed on Fold1 (seed 0, transformer)" in err and "the transformer crashed" in err
    cache = output / "official" / "shared" / "seed0" / "Fold1.jsonl"
    assert [json.loads(line)["model"] for line in cache.read_text().splitlines()] == ["mlp"]
    # Each model ran in a process of its own.
    assert [json.loads(line)["--models"] for line in log.read_text().splitlines()] == [
        "mlp",
        "transformer",
    ]
    assert not (output / "parity.md").exists()


def test_a_killed_released_run_says_so(folds, tmp_path, fake_released, capsys):
    official, log = fake_released
    python = official[3]
    with open(python, encoding="utf-8") as f:
        text = f.read()
    with open(python, "w", encoding="utf-8") as f:  # the stand-in kills itself
        f.write(text.replace("runner_calls.jsonl", "runner_calls_KILL.jsonl"))
    args = ["--dataset", str(folds), "--folds", "1", "--epochs", "1", "--models", "rankformer"]
    args += ["--side", "released", "--output", str(tmp_path / "parity"), *official]
    assert reference_parity.main(args) == 1
    err = capsys.readouterr().err
    assert "failed on Fold1 (seed 0, rankformer)" in err
    assert "killed by SIGKILL (out of memory?)" in err


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
    args = argparse.Namespace(
        dataset="MQ2008", folds="1-5", epochs=30, seed=0, seeds=1, labels="own"
    )
    text = parity_tables.table(rows, "some CPU; avx2", args)
    delta = [line for line in text.splitlines() if "| Δ |" in line]
    assert delta[0] == "| rankformer | Δ | +0.20 ✓ | +0.20 ✓ | +0.20 ✓ | 2.00x |"
    assert delta[1].startswith("| mlp | Δ | -2.30 ✗ |")
    # One fold has no standard error: no verdict, whatever the difference.
    one = {"mlp": {"ours": _side(66.0, math.nan, 3000), "released code": _side(68.3, math.nan, 1)}}
    text = parity_tables.table(one, "some CPU; avx2", args)
    assert "| mlp | Δ | -2.30 (one fold) | -2.30 (one fold) |" in text
    assert "✗" not in text.split("|---|")[-1]


def test_seed_by_seed_pairs_each_seed_over_the_folds_both_sides_ran():
    def run(y):
        return {"ndcg_y@10": y, "ndcg_r@10": y + 1, "ndcg_y@10_tmax": y + 2}

    # Seed 0 on folds 1 and 2 on both sides; seed 1 on fold 2 only on the released
    # side, on both folds on ours; seed 2 on ours only.
    by_seed = {
        "rankformer": {
            "ours": {
                (1, 0): run(70),
                (2, 0): run(66),
                (1, 1): run(71),
                (2, 1): run(65),
                (1, 2): run(60),
            },
            "released code": {(1, 0): run(71), (2, 0): run(68), (2, 1): run(64)},
        },
        "mlp": {"ours": {(1, 0): run(60), (1, 1): run(61)}, "released code": {(1, 0): run(60)}},
    }
    text = parity_tables.seed_by_seed(by_seed)
    # Seed 0: ours 68, theirs 69.5; differences -1 and -2: mean -1.5, standard error 0.5.
    assert "| rankformer | 0 | 1,2 | 68.00 / 69.50; -1.50 ± 0.50 (0/2) |" in text
    # Seed 1 is compared on fold 2 alone, where both ran it.
    assert "| rankformer | 1 | 2 | 65.00 / 64.00; +1.00 (1/1) |" in text
    assert "| rankformer | 2 |" not in text
    # The MLP has one seed both sides ran: nothing to set side by side.
    assert "| mlp |" not in text
    assert parity_tables.seed_by_seed({"mlp": by_seed["mlp"]}) == ""


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


def test_runner_reads_npz_lists_one_list_id_per_list(tmp_path):
    path = tmp_path / "lists.npz"
    np.savez(
        path,
        features=np.array([[0.5, 1.0], [0.25, 2.0], [1.5, 0.0]], np.float32),
        label=np.array([4.0, 0.0, 1.0], np.float32),
        relevance=np.array([2.0, 0.0, 1.0], np.float32),
        offsets=np.array([0, 2, 3]),
    )
    frame = reference_runner.read_lists(str(path))
    assert list(frame.columns[:3]) == ["target", "explicit_target", "qid"]
    assert list(frame["target"]) == [4, 0, 1] and list(frame["explicit_target"]) == [2, 0, 1]
    assert list(frame["qid"]) == [0, 0, 1]
    np.testing.assert_array_equal(frame.iloc[:, 3:].to_numpy(), [[0.5, 1.0], [0.25, 2.0], [1.5, 0]])


def test_click_parity_draws_our_clicks_as_the_conversion_does(folds, tmp_path, capsys):
    from pipelines.benchmarks.reference import click_parity
    from pipelines.convert_cli import main as convert_main
    from tfr_rankformer.inputs.list_arrays import read_split
    from tfr_rankformer.inputs.manifest import load_manifest

    out = tmp_path / "converted"
    flags = ["--input", str(folds), "--output", str(out), "--simulate-clicks"]
    flags += ["--purchase-label", "4", "--seed", "3", "--no-progress", "--log-level", "WARNING"]
    assert convert_main(flags) == 0
    arrays = read_split(str(out), load_manifest(str(out)), "train")
    converted = reference_runner.list_stats(arrays.label, arrays.relevance, arrays.offsets)
    path = str(folds / "Fold1" / "train.txt")
    draws = click_parity.our_draws(path, split="train", max_relevance=2, draws=2, seed=3)
    assert [d.pop("seed") for d in draws] == [3, 4]
    assert draws[0] == pytest.approx(converted) and draws[1] != draws[0]
    # Lists of 3 to 8 items are kept whole (16 are seen): a list's mean size is the fold's.
    items = len(reference_runner.read_letor(path))
    assert 0 < converted["t=0"] < 1 and converted["items/list"] == pytest.approx(items / 40)

    args = ["--dataset", str(folds), "--fold", "1", "--draws", "2", "--seed", "3"]
    assert click_parity.main(args) == 0
    printed = capsys.readouterr().out
    assert "not set up" in printed and "| t=0 | " in printed
    assert "released code (mean" not in printed


def test_click_parity_table_weighs_differences_by_their_standard_error():
    from pipelines.benchmarks.reference import click_parity

    ours = [{"seed": 0, "clicks/list": 1.0}, {"seed": 1, "clicks/list": 3.0}]
    theirs = [{"seed": 0, "clicks/list": 0.0}, {"seed": 1, "clicks/list": 2.0}]
    text = click_parity.table({"ours": ours, "released code": theirs}, "title")
    # Means 2 and 1, standard deviations sqrt(2): the difference's standard error is
    # sqrt(2/2 + 2/2) = sqrt(2), so z = 1 / sqrt(2).
    assert "| clicks/list | 2.0000 ± 1.4142 | 1.0000 ± 1.4142 | +0.7 |" in text


def test_between_models_pairs_folds_and_pools_the_seed_spread():
    def run(y):
        return {"ndcg_y@10": y, "ndcg_r@10": y + 1, "ndcg_y@10_tmax": y + 2}

    # Two folds, two seeds on our side: rankformer leads by 1 and by 3 (fold means).
    # The released side ran one seed on fold 1 only: no spread of its own.
    results = {
        "rankformer": {
            "ours": {1: [run(70), run(72)], 2: [run(66), run(68)]},
            "released code": {1: [run(69)]},
        },
        "mlp": {"ours": {1: [run(70), run(70)], 2: [run(64), run(64)]}, "released code": {}},
    }
    fold_means = {
        label: {"ours": {f: run(sum(r["ndcg_y@10"] for r in runs) / 2) for f, runs in by.items()}}
        for label, sides in results.items()
        for by in [sides["ours"]]
    }
    text = parity_tables.between_models(fold_means, results)
    # Differences 1 and 3: mean 2, standard error 1, ahead on both folds.
    assert "| ours | rankformer − mlp | +2.00 ± 1.00 (2/2) |" in text
    # rankformer's seeds differ by 2 on each fold (variance 2), the mlp's not at all.
    assert "| ours | rankformer | 1.41 | 1.41 | 1.41 |" in text
    assert "| ours | mlp | 0.00 |" in text
    assert "| released code |" not in text.split("Seed spread")[1]


def test_the_seed_spread_covers_the_released_side_too():
    def run(y):
        return {"ndcg_y@10": y, "ndcg_r@10": y, "ndcg_y@10_tmax": y}

    # The released code ran seeds 0 and 1 on one fold, 4 apart (variance 8).
    results = {"rankformer": {"ours": {4: [run(70)]}, "released code": {4: [run(71), run(67)]}}}
    fold_means = {"rankformer": {"ours": {4: run(70)}, "released code": {4: run(69)}}}
    text = parity_tables.between_models(fold_means, results)
    assert "| released code | rankformer | 2.83 | 2.83 | 2.83 |" in text
    assert "Between models" not in text  # one model: no pairs, no empty table
    assert "| ours | rankformer |" not in text
