"""The public API: every name of ``tfr_rankformer.__all__`` resolves from its module, on
first use, so ``import tfr_rankformer`` itself stays light."""

from __future__ import annotations

import doctest
import importlib
import json
import os
import subprocess
import sys

import pytest

import tfr_rankformer

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# What ``import tfr_rankformer`` must not load: TensorFlow and the modules that
# build, train and export models.
HEAVY = (
    "tensorflow",
    "tensorflow_ranking",
    "lightgbm",
    "tfr_rankformer.runner",
    "tfr_rankformer.training.loop",
    "tfr_rankformer.training.training_setup",
    "tfr_rankformer.model.models",
    "tfr_rankformer.ranking.losses",
    "tfr_rankformer.inputs.data",
    "tfr_rankformer.serving.export",
)
# Names whose modules import no TensorFlow.
LIGHT_NAMES = ("model_names", "ModelConfig", "evaluate_rankings", "RunMetrics", "load_manifest")

_FRESH = f"""
import json, sys
import tfr_rankformer
heavy = {HEAVY!r}
def loaded():
    return [m for m in heavy if m in sys.modules]
report = {{
    "after_import": loaded(),
    "missing_from_dir": sorted(set(tfr_rankformer.__all__) - set(dir(tfr_rankformer))),
    "resolved_at_import": sorted(set(tfr_rankformer._LAZY) & set(vars(tfr_rankformer))),
}}
for name in {LIGHT_NAMES!r}:
    getattr(tfr_rankformer, name)
report["after_light_names"] = loaded()
tfr_rankformer.build_model
report["after_build_model"] = loaded()
print("REPORT " + json.dumps(report))
"""


@pytest.fixture(scope="module")
def fresh_import() -> dict:
    """What a fresh process holds after ``import tfr_rankformer``, then after using names."""
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"}
    command = [sys.executable, "-c", _FRESH]
    done = subprocess.run(command, capture_output=True, text=True, cwd=REPO, env=env, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.split("REPORT ")[-1])


def test_import_loads_no_tensorflow_nor_the_training_modules(fresh_import):
    assert fresh_import["after_import"] == []
    assert fresh_import["resolved_at_import"] == []


def test_names_of_light_modules_load_no_tensorflow(fresh_import):
    assert fresh_import["after_light_names"] == []


def test_a_heavy_name_imports_its_module_on_first_use(fresh_import):
    # The checks above must be able to fail: a model builder does load TensorFlow.
    assert {"tensorflow", "tfr_rankformer.model.models"} <= set(fresh_import["after_build_model"])


def test_dir_lists_every_public_name_before_it_is_used(fresh_import):
    assert fresh_import["missing_from_dir"] == []


def test_all_names_are_unique_and_each_has_one_module():
    names = tfr_rankformer.__all__
    assert len(names) == len(set(names))
    assert set(names) == {"__version__", *tfr_rankformer._LAZY}


@pytest.mark.parametrize("name", tfr_rankformer.__all__)
def test_every_public_name_resolves(name):
    value = getattr(tfr_rankformer, name)
    module = tfr_rankformer._LAZY.get(name)
    if module is not None:
        assert value is getattr(importlib.import_module(module), name)
    assert name in vars(tfr_rankformer)  # kept: the next use costs a dict lookup


def test_the_run_entry_points_are_the_runners():
    from tfr_rankformer import evaluate, export_run, predict, runner, train

    assert (train, evaluate, export_run, predict) == (
        runner.train,
        runner.evaluate,
        runner.export_run,
        runner.predict,
    )
    assert all(callable(f) for f in (train, evaluate, export_run, predict))


def test_the_main_names_are_public():
    expected = {"TrainConfig", "ModelConfig", "build_model", "get_score_loss", "OrdinalListLoss"}
    expected |= {"evaluate_rankings", "training_dataset", "evaluation_dataset"}
    expected |= {"export_model", "train", "evaluate", "export_run", "predict", "__version__"}
    assert expected <= set(tfr_rankformer.__all__)
    assert "rankformer" in tfr_rankformer.model_names()


def test_an_unknown_name_is_an_attribute_error_and_submodules_still_import():
    with pytest.raises(AttributeError, match="no attribute 'no_such_name'"):
        tfr_rankformer.no_such_name  # noqa: B018
    # ``from package import submodule`` falls back to importing it after the
    # AttributeError above; a lookup that raised anything else would break it.
    from tfr_rankformer.inputs import manifest

    assert manifest.__name__ == "tfr_rankformer.inputs.manifest"


def test_the_package_docstring_examples_hold():
    results = doctest.testmod(tfr_rankformer, optionflags=doctest.ELLIPSIS)
    assert results.attempted >= 3
    assert results.failed == 0
