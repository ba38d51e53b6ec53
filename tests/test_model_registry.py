"""The model-family registry: one place declares every model, and a family added
there (here a toy linear scorer, registered by the test alone) trains, evaluates,
exports and predicts through the commands like the builtin ones."""

from __future__ import annotations

import doctest
import json
import os
import subprocess
import sys

import pytest

from tests import toy_family
from tfr_rankformer.core import model_families
from tfr_rankformer.core.model_spec import ModelFamily, ModelSpec

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# The builtin models, and which predict the list label or rank text.
BUILTIN = {
    "context_aware": "features",
    "listformer": "text",
    "mlp": "features",
    "rankformer": "features",
    "summary_token_ranker": "features",
    "transformer": "features",
    "gbdt": "gbdt",
    "gbdt-1k": "gbdt",
    "gbdt-10k": "gbdt",
}
WITH_LIST_HEAD = {"rankformer", "summary_token_ranker", "listformer"}


@pytest.fixture
def toy():
    """The toy family (``tests/toy_family.py``) and its one model, for the test only."""
    toy_family.register()
    yield toy_family.NAME
    toy_family.unregister()


def test_every_builtin_model_has_a_spec_of_its_kind():
    assert set(model_families.model_names()) == set(BUILTIN)
    for name, kind in BUILTIN.items():
        assert model_families.family_of(name).kind == kind
    neural = model_families.model_names(model_families.NEURAL_KINDS)
    assert neural == tuple(sorted(n for n, k in BUILTIN.items() if k != "gbdt"))


def test_each_family_owns_its_architecture_settings_and_old_runs_still_load():
    from tfr_rankformer.model.model_config import ModelConfig
    from tfr_rankformer.text.listformer_config import ListformerConfig
    from tfr_rankformer.training.train_config import TrainConfig

    feature = TrainConfig(model="rankformer", data="d", model_dir="m")
    text = TrainConfig(model="listformer", data="d", model_dir="m", architecture={"num_heads": 4})
    assert type(feature.architecture) is ModelConfig
    assert "width" not in feature.to_json()["architecture"]
    assert type(text.architecture) is ListformerConfig and text.architecture.width == 128
    with pytest.raises(ValueError, match="`width` 128 is not divisible by `num_heads` 3"):
        TrainConfig(model="listformer", data="d", model_dir="m", architecture={"num_heads": 3})
    # A feature-vector run's config.json from before held the text settings too.
    written = feature.to_json()
    written["architecture"].update(width=128, attention="blocked", similarity="none")
    assert TrainConfig.from_json(written) == feature


@pytest.mark.parametrize("name", sorted(BUILTIN))
def test_list_heads_and_text_agree_with_the_builtin_models(name):
    if BUILTIN[name] != "gbdt":
        assert model_families.get_model(name).has_list_head == (name in WITH_LIST_HEAD)
    assert model_families.is_text(name) == (name == "listformer")
    assert model_families.is_gbdt(name) == (BUILTIN[name] == "gbdt")


def test_an_unknown_model_names_the_choices():
    with pytest.raises(ValueError) as error:
        model_families.get_model("bert")
    assert str(error.value) == f"Unknown model 'bert'; choose from {sorted(BUILTIN)}"
    assert not model_families.is_text("bert") and not model_families.is_gbdt("bert")


def test_registration_refuses_repeats_unknown_families_and_kinds():
    with pytest.raises(ValueError, match="already registered"):
        model_families.register_model(ModelSpec("mlp", "features"))
    with pytest.raises(ValueError, match="Unknown model family 'nowhere'"):
        model_families.register_model(ModelSpec("lost", "nowhere"))
    with pytest.raises(ValueError, match="`kind` must be one of"):
        model_families.register_family(ModelFamily("odd", "images", "x:y"))
    with pytest.raises(ValueError, match="default family already"):
        model_families.register_family(ModelFamily("odd", "gbdt", "x:y", default=True))
    assert "odd" not in [f.name for f in model_families.families()]
    assert "lost" not in model_families.model_names()


def test_the_registry_imports_no_tensorflow():
    code = (
        "import sys\n"
        "from tfr_rankformer.core import model_families\n"
        "model_families.get_model('rankformer'); model_families.trainable_names()\n"
        "assert 'tensorflow' not in sys.modules, 'tensorflow'\n"
        "assert 'lightgbm' not in sys.modules, 'lightgbm'\n"
    )
    env = {**os.environ, "PYTHONPATH": REPO}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert done.returncode == 0, done.stderr


def test_the_module_examples_hold():
    assert doctest.testmod(model_families).failed == 0


def _model_choices(build_parser) -> list:
    (model,) = [a for a in build_parser()._actions if a.dest == "model"]
    return list(model.choices)


def test_the_command_choices_read_the_registry_when_the_parser_is_built():
    from pipelines.train_cli import build_parser
    from pipelines.tune_cli import build_parser as tune_parser

    toy = toy_family.NAME
    assert toy not in _model_choices(build_parser)
    toy_family.register()
    try:
        assert toy in _model_choices(build_parser) and toy in _model_choices(tune_parser)
    finally:
        toy_family.unregister()
    assert _model_choices(build_parser) == [
        *model_families.model_names(model_families.NEURAL_KINDS),
        "gbdt",
        "gbdt-10k",
        "gbdt-1k",
    ]


def test_a_toy_family_trains_evaluates_exports_and_predicts_through_the_commands(
    toy, tiny_dataset, tmp_path, capsys
):
    from pipelines.convert_cli import main as convert_main
    from pipelines.eval_cli import main as eval_main
    from pipelines.export_cli import main as export_main
    from pipelines.predict_cli import main as predict_main
    from pipelines.train_cli import main as train_main

    data, run = str(tmp_path / "data"), str(tmp_path / "run")
    argv = ["--input", str(tiny_dataset), "--output", data, "--workers", "1"]
    assert convert_main(argv + ["--no-progress", "--log-level", "WARNING"]) == 0
    argv = ["--model", toy, "--data", data, "--model-dir", run, "--no-export", "--quiet"]
    assert train_main(argv) == 0, capsys.readouterr().err
    with open(os.path.join(run, "config.json"), encoding="utf-8") as f:
        settings = json.load(f)
    # The family's own defaults: two epochs of Adam without weight decay, alpha 0.
    assert (settings["model"], settings["epochs"], settings["optimizer"]) == (toy, 2, "adam")
    assert settings["alpha"] == 0.0
    with open(os.path.join(run, "metrics.json"), encoding="utf-8") as f:
        assert json.load(f)["training"]["family"] == toy  # the family's own summary

    capsys.readouterr()
    assert eval_main(["--model-dir", run, "--split", "all"]) == 0
    with open(os.path.join(run, "metrics.json"), encoding="utf-8") as f:
        metrics = json.load(f)
    assert {"train", "vali", "test"} <= set(metrics)
    assert 0.0 <= metrics["test"]["ndcg_y@10"] <= 100.0
    from tfr_rankformer.model.models import ranker_of
    from tfr_rankformer.training.training_setup import load_run

    ranker = ranker_of(load_run(run)[2])  # the run's model is the toy's own
    assert [layer.name for layer in ranker.layers if layer.weights] == ["linear"]

    assert export_main(["--model-dir", run]) == 0
    assert os.path.isfile(os.path.join(run, "export", "1", "saved_model.pb"))

    scores = tmp_path / "scores.txt"
    test_file = str(tiny_dataset / "test.txt")
    argv = ["--model", run, "--input", test_file, "--output", str(scores), "--no-progress"]
    assert predict_main(argv) == 0, capsys.readouterr().err
    lines = scores.read_text().splitlines()
    assert len(lines) == 2 and all(line.split()[0] == "5" for line in lines)
