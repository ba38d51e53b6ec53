"""Shared helpers (tiny LETOR files written inside the tests, session fixtures) and the
order in which pytest-xdist workers take the test files."""

from __future__ import annotations

import collections
import json
import os

import pytest

REAL_DATA = os.path.join(os.path.dirname(__file__), "..", "..", "shared", "data")

# LightGBM's OpenMP threads spin while they wait; beside another busy process (the other
# pytest worker, a shared machine) that turns seconds of training into minutes. Set before
# any test imports LightGBM, and inherited by the commands the tests start.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

# The files that take longest, longest first. `make test` hands each worker whole files
# in collection order (`--dist loadfile --no-loadscope-reorder`), so these start first
# and no long file is left running alone at the end; the rest follow, most tests first.
LONGEST_FILES = [
    "test_readme_path.py",
    "test_text_token_id_export.py",
    "test_one_training_loop.py",
    "test_distill.py",
    "test_experiment_text.py",
    "test_training.py",
    "test_export.py",
    "test_experiment.py",
    "test_listformer_init_from.py",
    "test_listformer_training.py",
    "test_tuning.py",
    "test_predict.py",
    "test_elwc_input.py",
]


def pytest_collection_modifyitems(items):
    rank = {name: i for i, name in enumerate(LONGEST_FILES)}
    tests = collections.Counter(item.path for item in items)
    items.sort(key=lambda item: (rank.get(item.path.name, len(rank)), -tests[item.path]))


# Files that use the same costly session fixture go to the same worker, which builds it once:
# `text_experiment`, and `trained` and `mlp_run`, whose runs some of them export.
SAME_WORKER = {"tests/test_predict_text.py": "tests/test_experiment_text.py"}
SAME_WORKER |= {
    f"tests/test_{name}.py": "tests/test_training.py"
    for name in ("bucketing", "distill", "export", "predict", "rejected_inputs")
}


def pytest_xdist_make_scheduler(config, log):
    if config.getvalue("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadFileScheduling

    class Scheduling(LoadFileScheduling):
        def _split_scope(self, nodeid):
            path = super()._split_scope(nodeid)
            return SAME_WORKER.get(path, path)

    return Scheduling(config, log)


def letor_line(label: int, qid: int, values, comment: str = "") -> str:
    tokens = " ".join(f"{i}:{v}" for i, v in enumerate(values, start=1))
    return f"{label} qid:{qid} {tokens}{' #' + comment if comment else ''}\n"


def write_lines(path, lines) -> str:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="ascii", newline="") as f:
        f.writelines(lines)
    return str(path)


@pytest.fixture
def tiny_dataset(tmp_path):
    """A single-set LETOR directory: 3 features, train 3 lists, vali and test 1 list each."""
    root = tmp_path / "tiny"
    write_lines(
        root / "train.txt",
        [
            letor_line(2, 1, [0.5, 1.0, 3.0]),
            letor_line(0, 1, [0.1, 0.0, 2.0]),
            letor_line(1, 1, [0.3, 2.0, 1.0]),
            letor_line(0, 2, [0.2, 0.5, 0.0]),
            letor_line(0, 2, [0.9, 0.1, 4.0]),
            letor_line(1, 3, [1.5, 0.2, 0.7]),
            letor_line(2, 3, [0.0, 0.0, 0.0]),
            letor_line(0, 3, [0.4, 0.8, 1.2]),
            letor_line(1, 3, [2.5, 1.1, 0.3]),
        ],
    )
    write_lines(root / "vali.txt", [letor_line(1, 4, [0.1, 0.2, 0.3]), letor_line(0, 4, [0, 0, 1])])
    write_lines(root / "test.txt", [letor_line(2, 5, [1, 2, 3]), letor_line(1, 5, [3, 2, 1])])
    return root


def identity_manifest(d: int) -> dict:
    """A manifest of ``d`` features whose normalisation leaves them nearly as they are."""
    return {
        "num_features": d,
        "normalization": {
            "method": "standard",
            "standard": {"mean": [0.0] * d, "std": [1.0] * d},
            "log1p": {"mean": [0.0] * d, "std": [1.0] * d},
            "quantile": {"values": [[0.0, 1.0]] * d, "num_quantiles": 2},
            "min": [0.0] * d,
            "max": [1.0] * d,
        },
    }


# A small architecture that trains in seconds on 2 cores.
SMALL = {"num_layers": 1, "num_heads": 1, "ff_dim": 32, "dropout": 0.1, "head_hidden": 16}


def train_config(dataset, model_dir, **overrides):
    """Training settings for the small synthetic runs of the tests."""
    from tfr_rankformer.training.train_config import TrainConfig

    settings = dict(
        model="rankformer",
        data=dataset,
        model_dir=str(model_dir),
        epochs=6,
        batch_size=64,
        learning_rate=3e-3,
        patience=50,
        seed=3,
        architecture=SMALL,
    )
    settings.update(overrides)
    return TrainConfig.from_json(settings)


@pytest.fixture(scope="session")
def dataset(tmp_path_factory):
    """Synthetic data with simulated clicks: 90 train lists of about 24 items."""
    from pipelines.convert_cli import main as convert_main

    out = tmp_path_factory.mktemp("data") / "synthetic"
    flags = ["--input", "synthetic", "--output", str(out), "--simulate-clicks"]
    flags += ["--synthetic-lists", "90", "--synthetic-list-size", "24"]
    assert convert_main(flags + ["--no-progress", "--log-level", "WARNING"]) == 0
    return str(out)


@pytest.fixture(scope="session")
def trained(dataset, tmp_path_factory):
    """A RankFormer trained for 6 epochs on ``dataset``: ``(model_dir, metrics)``."""
    from tfr_rankformer import runner

    model_dir = tmp_path_factory.mktemp("run")
    metrics = runner.train(train_config(dataset, model_dir), verbose=0)
    return str(model_dir), metrics


@pytest.fixture(scope="session")
def exported(trained):
    """``trained``'s run and its first export: ``(model_dir, export_dir)``."""
    from tfr_rankformer.serving.export import export_run

    model_dir, _ = trained
    return model_dir, export_run(model_dir)


@pytest.fixture(scope="session")
def mlp_run(dataset, tmp_path_factory):
    """An MLP (no list head) trained 2 epochs on ``dataset`` and evaluated on its test split:
    ``(model_dir, metrics)``."""
    from tfr_rankformer import runner

    model_dir = tmp_path_factory.mktemp("mlp")
    config = train_config(dataset, model_dir, model="mlp", epochs=2, evaluate_splits=["test"])
    return str(model_dir), runner.train(config, verbose=0)


def built_once(tmp_path_factory, name: str, build):
    """``build(directory)``'s JSON result, built once for the whole run: under pytest-xdist
    the first worker to ask builds it (under a file lock) and the others read it."""
    from filelock import FileLock

    root = tmp_path_factory.getbasetemp()
    if "PYTEST_XDIST_WORKER" in os.environ:
        root = root.parent  # shared by the run's workers
    result = root / f"{name}.json"
    with FileLock(f"{result}.lock"):
        if not result.is_file():
            result.write_text(json.dumps(build(tmp_path_factory.mktemp(name))))
        return json.loads(result.read_text())


@pytest.fixture(scope="session")
def tiny_servables(tmp_path_factory):
    """SavedModels of an untrained 3-feature RankFormer: ``{policy: path}`` for both
    invalid-item policies (scores need not be good to test what is rejected); read only."""
    return built_once(tmp_path_factory, "servables", _tiny_servables)


def _tiny_servables(root) -> dict:
    import numpy as np
    import tensorflow as tf

    from tfr_rankformer.core.command_names import INVALID_ITEM_POLICIES
    from tfr_rankformer.model.model_config import ModelConfig
    from tfr_rankformer.model.models import build_model
    from tfr_rankformer.serving.export import save_servable
    from tfrecords_tools.elwc_writer import ElwcEncoder

    tf.keras.utils.set_random_seed(0)
    model = build_model("rankformer", identity_manifest(3), ModelConfig(**SMALL), 2)
    warmup = [ElwcEncoder(3).encode(1, np.ones((2, 3), np.float32), np.zeros(2), np.zeros(2))]
    paths = {}
    for policy in INVALID_ITEM_POLICIES:
        paths[policy] = str(root / policy)
        save_servable(
            model,
            paths[policy],
            num_features=3,
            list_head=True,
            warmup=warmup,
            invalid_items=policy,
        )
    return paths


# Hypothesis profiles of the fuzz suites: the default run stays within about a
# minute; `make test-all` sets HYPOTHESIS_PROFILE=long for many more examples.
try:
    from hypothesis import settings as _hypothesis_settings

    _hypothesis_settings.register_profile("default", max_examples=150, derandomize=True)
    _hypothesis_settings.register_profile("long", max_examples=2000)
    _hypothesis_settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "default"))
except ImportError:  # the fuzz suites skip themselves without Hypothesis
    pass


TEXT_EXPERIMENT_LISTFORMER = (
    "listformer:width=16:num_heads=2:num_layers=1:ff_dim=32:head_hidden=16"
    ":max_document_tokens=16:vocab_size=300:list_size=12"
)


@pytest.fixture(scope="session")
def text_experiment(tmp_path_factory):
    """tfr-experiment on 24 synthetic-text lists: two BM25s and a tiny Listformer (2 seeds);
    ``(output, results.json)``."""
    from pipelines.experiment_cli import main

    output = tmp_path_factory.mktemp("experiment") / "text"
    flags = ["--dataset", "synthetic-text", "--synthetic-lists", "24", "--output", str(output)]
    flags += ["--models", f"bm25,bm25:k1=1.2:b=0.75,{TEXT_EXPERIMENT_LISTFORMER}", "--folds", "1"]
    flags += ["--seeds", "2", "--epochs", "1", "--batch-size", "8", "--no-progress"]
    assert main(flags) == 0
    with open(os.path.join(output, "results.json"), encoding="utf-8") as f:
        return str(output), json.load(f)
