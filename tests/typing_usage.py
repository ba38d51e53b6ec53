"""A user's program written against the public API.

``make test`` type-checks it with mypy (``pyproject.toml``'s ``[tool.mypy]``),
and ``tests/test_typing.py`` runs it on a tiny dataset, so the annotations the
checker reads are the ones the code keeps. It uses only ``tfr_rankformer``'s
public names.
"""

from __future__ import annotations

import numpy as np

import tfr_rankformer as tfr
from tfr_rankformer import ModelSpec, RunMetrics, TrainConfig


def ndcg_on_test(metrics: RunMetrics) -> float:
    """The test split's NDCG_y@10 of a run's metrics."""
    return float(metrics["test"]["ndcg_y@10"])


def train_export_and_score(data: str, model_dir: str) -> dict[str, object]:
    """Trains an MLP for one epoch on ``data``, exports it and scores one list."""
    config: TrainConfig = tfr.TrainConfig(
        model="mlp", data=data, model_dir=model_dir, epochs=1, batch_size=4
    )
    metrics: RunMetrics = tfr.train(config, verbose=0)
    evaluated = tfr.evaluate(model_dir, splits=["test"])
    export: str = tfr.export_run(model_dir)
    features = np.array([[0.5, 1.0, 3.0], [0.1, 0.0, 2.0]], dtype=np.float32)
    scored = list(tfr.predict(export, [(7, ["a", "b"], features)]))
    return {
        "trained": ndcg_on_test(metrics),
        "evaluated": ndcg_on_test(evaluated),
        "scored": [(s.qid, list(s.docids), [float(x) for x in s.scores]) for s in scored],
    }


def feature_models() -> tuple[str, ...]:
    """The feature-vector models the registry holds; a spec is built without registering."""
    spec: ModelSpec = tfr.ModelSpec(name="not_registered", family="features")
    assert spec.name not in tfr.model_names()
    return tfr.model_names("features")
