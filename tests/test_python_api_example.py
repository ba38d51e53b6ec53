"""docs/python_api.md's example: public names only, it runs as printed,
and the SavedModel it exports scores lists as the trained model does."""

from __future__ import annotations

import ast
import os
import re

import numpy as np
import pytest
import tensorflow as tf

import tfr_rankformer

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SECTION = "# The Python API"
EXPORT = os.path.join("rankformer_export", "1")


def readme_example() -> str:
    """The one ``python`` code block of the page."""
    with open(os.path.join(REPO, "docs", "python_api.md"), encoding="utf-8") as f:
        text = f.read()
    start = text.index(SECTION)
    end = text.find("\n## ", start)
    blocks = re.findall(r"```python\n(.*?)```", text[start : end if end > 0 else None], re.S)
    assert len(blocks) == 1, f"expected one python block under {SECTION!r}, got {len(blocks)}"
    return blocks[0]


def _imports_and_library_names(code: str) -> tuple[set[str], set[str]]:
    """The modules the code imports, and the attributes it reads from ``tfr_rankformer``."""
    tree = ast.parse(code)
    modules, aliases = set(), set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                modules.add(alias.name)
                if alias.name == "tfr_rankformer":
                    aliases.add(alias.asname or alias.name)
        elif isinstance(node, ast.ImportFrom):
            modules.add(node.module)
    used = {
        node.attr
        for node in ast.walk(tree)
        if isinstance(node, ast.Attribute)
        and isinstance(node.value, ast.Name)
        and node.value.id in aliases
    }
    return modules, used


def test_the_example_is_short_and_uses_public_names_only():
    code = readme_example()
    assert len([line for line in code.splitlines() if line.strip()]) <= 30
    modules, used = _imports_and_library_names(code)
    assert modules == {"numpy", "tensorflow", "tfr_rankformer"}
    assert {"build_model", "export_model"} <= used
    assert used <= set(tfr_rankformer.__all__), sorted(used - set(tfr_rankformer.__all__))


def test_the_scan_sees_a_private_module():
    # The check above must be able to fail: a submodule import is not public.
    code = "import tfr_rankformer as t\nfrom tfr_rankformer.model.models import MODELS\n"
    code += "t.ranker_of\n"
    modules, used = _imports_and_library_names(code)
    assert "tfr_rankformer.model.models" in modules and used == {"ranker_of"}


@pytest.fixture(scope="module")
def ran(tmp_path_factory) -> tuple[dict, str]:
    """The example's variables after running it in a fresh directory, and that directory."""
    directory = tmp_path_factory.mktemp("readme")
    here = os.getcwd()
    os.chdir(directory)
    try:
        namespace = {"__name__": "readme_example"}
        exec(compile(readme_example(), "python_api.md", "exec"), namespace)
    finally:
        os.chdir(here)
    return namespace, str(directory)


def test_the_example_fits_a_few_steps(ran):
    namespace, _ = ran
    steps = namespace["model"].optimizer.iterations.numpy()
    assert 0 < steps <= 20


def _lists():
    """Three lists of 4, 2 and 3 items, padded to 4."""
    rng = np.random.default_rng(7)
    features = rng.normal(size=(3, 4, 5)).astype(np.float32)
    mask = np.arange(4) < np.array([[4], [2], [3]])
    return features, mask


def test_the_export_scores_lists_as_the_trained_model(ran):
    namespace, directory = ran
    export = os.path.join(directory, EXPORT)
    loaded = tf.saved_model.load(export)
    assert {"serving_default", "predict", "predict_tensors"} <= set(loaded.signatures)
    assert os.path.isfile(os.path.join(export, "assets.extra", "tf_serving_warmup_requests"))
    features, mask = _lists()
    served = loaded.signatures[tfr_rankformer.SIGNATURE_TENSORS](
        features=tf.constant(features), mask=tf.constant(mask)
    )
    expected = namespace["model"]({"features": features, "mask": mask}, training=False)
    scores = served["scores"].numpy()
    np.testing.assert_allclose(scores[mask], expected["scores"].numpy()[mask], rtol=1e-5, atol=1e-5)
    assert np.isfinite(scores[mask]).all()
    from tfr_rankformer.model.layers import PADDING_SCORE

    assert (scores[~mask] == PADDING_SCORE).all()
    # The RankFormer's list head: P(t >= k) for k = 1, 2.
    assert served["list_probs"].shape == (3, 2)
    assert served["expected_list_label"].shape == (3,)


def test_the_proto_signature_gives_the_same_scores(ran):
    from tensorflow_serving.apis import input_pb2

    _, directory = ran
    loaded = tf.saved_model.load(os.path.join(directory, EXPORT))
    features, mask = _lists()
    records = []
    for items, valid in zip(features, mask):
        request = input_pb2.ExampleListWithContext()
        for vector in items[valid]:
            example = request.examples.add()
            example.features.feature["features"].float_list.value.extend(vector.tolist())
        records.append(request.SerializeToString())
    by_proto = loaded.signatures[tfr_rankformer.SIGNATURE_ELWC](examples=tf.constant(records))
    by_tensor = loaded.signatures[tfr_rankformer.SIGNATURE_TENSORS](
        features=tf.constant(features), mask=tf.constant(mask)
    )
    np.testing.assert_allclose(
        by_proto["scores"].numpy()[mask], by_tensor["scores"].numpy()[mask], rtol=1e-5, atol=1e-5
    )


def test_export_model_never_overwrites_and_names_what_it_needs(ran):
    namespace, directory = ran
    with pytest.raises(FileExistsError, match="exists"):
        tfr_rankformer.export_model(namespace["model"], os.path.join(directory, EXPORT))
    inputs = tf.keras.Input(shape=(None, 5))
    plain = tf.keras.Model(inputs, tf.keras.layers.Dense(1)(inputs))
    with pytest.raises(ValueError, match="build_model"):
        tfr_rankformer.export_model(plain, os.path.join(directory, "plain"))
    with pytest.raises(ValueError, match=r"warmup_lists\[0\]"):
        tfr_rankformer.export_model(
            namespace["model"], os.path.join(directory, "bad"), warmup_lists=[np.zeros((2, 4))]
        )
    assert not os.path.exists(os.path.join(directory, "plain"))
