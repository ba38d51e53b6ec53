"""tfr-distill: a LightGBM student of the RankFormer, compared with its teacher and a label GBDT."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest

from tfr_rankformer.core.command_names import DISTILL_ROWS
from tfr_rankformer.distill.distillation import DistillConfig, distill, list_spearman
from tfr_rankformer.distill.distillation_targets import centred_scores, graded_targets
from tfr_rankformer.gbdt.gbdt_booster import evaluate_arrays
from tfr_rankformer.inputs.list_arrays import ListArrays, read_split
from tfr_rankformer.inputs.manifest import load_manifest


def _arrays(sizes) -> ListArrays:
    n = sum(sizes)
    return ListArrays(
        features=np.zeros((n, 1), np.float32),
        label=np.zeros(n, np.float32),
        relevance=np.zeros(n, np.float32),
        qid=np.arange(len(sizes)),
        offsets=np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64),
    )


@pytest.fixture(scope="module")
def distilled(trained, tmp_path_factory):
    from pipelines.distill_cli import main

    teacher, _ = trained
    output = tmp_path_factory.mktemp("distill") / "student"
    flags = ["--teacher", teacher, "--output", str(output), "--trees", "300"]
    assert main([*flags, "--log-level", "WARNING"]) == 0
    with open(output / "metrics.json", encoding="utf-8") as f:
        return str(output), json.load(f)


def test_centred_scores_and_graded_targets_by_hand():
    arrays = _arrays([3, 1, 5])
    scores = np.array([1.0, 3.0, 2.0, 7.0, 0.5, 0.1, 0.9, 0.3, 0.7], np.float32)
    np.testing.assert_allclose(
        centred_scores(scores, arrays), [-1, 1, 0, 0, 0.0, -0.4, 0.4, -0.2, 0.2], atol=1e-6
    )
    # Rank r of n gets floor(G (n - 1 - r) / n); with G = 3, ranks 0, 1, 2 of n = 3 get
    # 2, 1, 0 and ranks 0..4 of n = 5 get 2, 1, 1, 0, 0.
    np.testing.assert_array_equal(graded_targets(scores, arrays, 3), [0, 2, 1, 0, 1, 0, 2, 0, 1])


def test_list_spearman_skips_lists_it_cannot_rank():
    arrays = _arrays([3, 1, 3])
    a = np.array([1, 2, 3, 5, 4, 4, 4], np.float32)
    b = np.array([3, 2, 1, 1, 1, 2, 3], np.float32)
    assert list_spearman(a, b, arrays) == pytest.approx(-1.0)  # one list counts
    assert list_spearman(a, a, arrays) == pytest.approx(1.0)


def test_student_follows_the_teacher_and_the_table_has_three_rows(distilled, trained, capsys):
    output, metrics = distilled
    for split in ("vali", "test"):
        assert set(metrics["comparison"][split]) == set(DISTILL_ROWS)
        for row in metrics["comparison"][split].values():
            assert {"ndcg_y@10", "ndcg_r@10", "training_seconds", "scoring_ms_per_list"} <= set(row)
    # The teacher also uses each list's majority intent (see the synthetic data),
    # which a pointwise student cannot see, so it follows only partly; but it
    # follows more closely than a GBDT trained on the labels.
    fidelity = metrics["fidelity"]["test"]
    assert fidelity["spearman_student_teacher"] > 0.6
    assert fidelity["spearman_student_teacher"] > fidelity["spearman_label_gbdt_teacher"] + 0.05
    # The teacher's row is the shared evaluation of the teacher's checkpoint.
    _, teacher_metrics = trained
    teacher_row = metrics["comparison"]["test"]["teacher"]
    assert teacher_row["ndcg_y@10"] == pytest.approx(teacher_metrics["test"]["ndcg_y@10"], abs=1e-4)
    # The student's own metrics per split, as in every model directory.
    assert metrics["test"] == pytest.approx(
        {k: v for k, v in metrics["comparison"]["test"]["student"].items() if k in metrics["test"]},
        nan_ok=True,
    )
    for path in ("model.txt", "config.json", "gbdt_labels/model.txt", "gbdt_labels/config.json"):
        assert os.path.isfile(os.path.join(output, path)), path
    assert not os.path.exists(output + ".partial")


def test_the_student_is_a_plain_lightgbm_model(distilled, dataset):
    import lightgbm as lgb

    output, metrics = distilled
    manifest = load_manifest(dataset)
    test = read_split(dataset, manifest, "test")
    booster = lgb.Booster(model_file=os.path.join(output, "model.txt"))
    scores = booster.predict(test.features).astype(np.float32)
    again = evaluate_arrays(scores, test, max_label=manifest.label_levels)
    assert again["ndcg_y@10"] == pytest.approx(metrics["test"]["ndcg_y@10"])


def test_a_saved_model_teacher_needs_data_and_scores_like_the_checkpoint(
    trained, dataset, distilled, tmp_path
):
    from tfr_rankformer.serving.export import save_servable
    from tfr_rankformer.training.training_setup import load_run

    model_dir, _ = trained
    config, manifest, model = load_run(model_dir)
    path = str(tmp_path / "saved")
    save_servable(model, path, num_features=manifest.num_features, list_head=True, warmup=[])
    settings = dict(teacher=path, output=str(tmp_path / "s"), trees=20)
    with pytest.raises(ValueError, match="give --data"):
        distill(DistillConfig(**settings))
    assert not os.path.exists(tmp_path / "s") and not os.path.exists(tmp_path / "s.partial")
    metrics = distill(DistillConfig(**settings, data=dataset, target="graded"))
    _, reference = distilled
    assert metrics["comparison"]["test"]["teacher"]["ndcg_y@10"] == pytest.approx(
        reference["comparison"]["test"]["teacher"]["ndcg_y@10"], abs=1e-4
    )
    assert metrics["training"]["student_lightgbm_params"]["objective"] == "lambdarank"


def test_bad_teachers_and_outputs_are_clear_errors(tmp_path, distilled, capsys):
    from pipelines.distill_cli import main

    out = str(tmp_path / "out")
    assert main(["--teacher", str(tmp_path / "missing"), "--output", out]) == 1
    assert "no such directory" in capsys.readouterr().err
    (tmp_path / "empty").mkdir()
    assert main(["--teacher", str(tmp_path / "empty"), "--output", out]) == 1
    assert "is not a model" in capsys.readouterr().err
    existing, _ = distilled
    assert main(["--teacher", str(tmp_path / "empty"), "--output", existing]) == 1
    assert "pass --overwrite" in capsys.readouterr().err
    assert not os.path.exists(out) and not os.path.exists(out + ".partial")
