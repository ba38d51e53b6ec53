"""SavedModel export: signatures, a fresh-process reload through TF Serving's request
protos, edge-case lists, warm-up requests."""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

from tfr_rankformer.inputs.manifest import load_manifest
from tfr_rankformer.serving.export import export_run  # noqa: E402
from tfr_rankformer.serving.serving_requests import SIGNATURE_ELWC, SIGNATURE_TENSORS  # noqa: E402
from tfr_rankformer.training.training_setup import load_run  # noqa: E402
from tfrecords_tools.elwc_writer import ElwcEncoder  # noqa: E402

_FRESH = """
import json, sys
import numpy as np
import tensorflow as tf
from tensorflow_serving.apis import predict_pb2
request = predict_pb2.PredictRequest()
request.model_spec.signature_name = "serving_default"
records = [bytes.fromhex(h) for h in json.loads(sys.argv[2])]
request.inputs["examples"].CopyFrom(tf.make_tensor_proto(records))
signature = tf.saved_model.load(sys.argv[1]).signatures["serving_default"]
outputs = signature(examples=tf.constant(tf.make_ndarray(request.inputs["examples"])))
print("RESULT " + json.dumps({k: v.numpy().tolist() for k, v in outputs.items()}))
"""


@pytest.fixture(scope="module")
def loaded(exported):
    """The export loaded once for the tests that only call its signatures."""
    return tf.saved_model.load(exported[1])


def _records(dataset, count=5):
    manifest = load_manifest(dataset)
    files = manifest.split_files(dataset, "test")
    return [r.numpy() for r in tf.data.TFRecordDataset(files).take(count)]


def _in_memory(model_dir, records):
    """The trained model's outputs on the records, parsed as evaluation does."""
    import tensorflow_ranking as tfr

    from tfr_rankformer.core import elwc_schema

    _, manifest, model = load_run(model_dir)
    parsed = tfr.data.parse_from_example_list(
        records,
        list_size=None,
        context_feature_spec=elwc_schema.context_feature_spec(),
        example_feature_spec=elwc_schema.example_feature_spec(manifest.num_features),
        mask_feature_name="mask",
    )
    out = model({"features": parsed["features"], "mask": parsed["mask"]}, training=False)
    return {k: v.numpy() for k, v in out.items()}, parsed["mask"].numpy()


def test_fresh_process_reload_matches_the_in_memory_model(exported, dataset):
    model_dir, path = exported
    assert os.path.basename(path) == "1"
    records = _records(dataset)
    done = subprocess.run(
        [sys.executable, "-c", _FRESH, path, json.dumps([r.hex() for r in records])],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    served = json.loads(done.stdout.split("RESULT ")[-1])
    expected, mask = _in_memory(model_dir, records)
    scores = np.array(served["scores"])
    assert np.abs(scores[mask] - expected["scores"][mask]).max() <= 1e-5
    assert (scores[~mask] <= -1e8).all()
    probs = 1 / (1 + np.exp(-expected["list_quality"]))
    assert np.abs(np.array(served["list_probs"]) - probs).max() <= 1e-5
    np.testing.assert_allclose(served["expected_list_label"], probs.sum(axis=1), atol=1e-5)


def test_rest_json_b64_instances_decode_to_the_same_inputs(loaded, dataset):
    records = _records(dataset, 3)
    body = json.dumps({"instances": [{"b64": base64.b64encode(r).decode()} for r in records]})
    decoded = [base64.b64decode(i["b64"]) for i in json.loads(body)["instances"]]
    assert decoded == records
    signature = loaded.signatures[SIGNATURE_ELWC]
    a = signature(examples=tf.constant(decoded))["scores"].numpy()
    b = signature(examples=tf.constant(records))["scores"].numpy()
    np.testing.assert_array_equal(a, b)


def test_edge_case_lists_and_the_tensor_signature(loaded):
    by_proto, by_tensor = loaded.signatures[SIGNATURE_ELWC], loaded.signatures[SIGNATURE_TENSORS]
    rng = np.random.default_rng(0)
    encoder = ElwcEncoder(136)

    def proto(n):
        x = rng.normal(size=(n, 136)).astype(np.float32)
        return x, encoder.encode(7, x, np.zeros(n), np.zeros(n))

    (x1, one), (x40, long), (_, empty) = proto(1), proto(40), proto(0)
    # One item, and a list far longer than the training list size, in one padded batch.
    out = by_proto(examples=tf.constant([one, long, empty]))
    scores = out["scores"].numpy()
    assert scores.shape == (3, 40)
    assert (scores[0, 1:] <= -1e8).all() and (scores[2] <= -1e8).all()
    alone = by_proto(examples=tf.constant([long]))["scores"].numpy()
    np.testing.assert_allclose(scores[1], alone[0], atol=1e-5)
    # The raw-tensor signature gives the same scores for the same raw features.
    mask = np.zeros((2, 40), bool)
    mask[0, 0], mask[1] = True, True
    features = np.zeros((2, 40, 136), np.float32)
    features[0, 0], features[1] = x1[0], x40
    tensors = by_tensor(features=tf.constant(features), mask=tf.constant(mask))
    np.testing.assert_allclose(tensors["scores"].numpy()[mask], scores[:2][mask], atol=1e-5)
    assert np.isfinite(out["list_probs"].numpy()).all()


def test_a_corrupt_proto_is_an_error(loaded):
    signature = loaded.signatures[SIGNATURE_ELWC]
    with pytest.raises((tf.errors.InvalidArgumentError, tf.errors.DataLossError)) as error:
        signature(examples=tf.constant([b"\x0a\xff\xff not a proto"]))
    assert "DecodeProto" in str(error.value)  # the ELWC decoder names the failure


def test_warmup_requests_and_version_numbers(exported):
    from tensorflow_serving.apis import prediction_log_pb2

    model_dir, path = exported
    warmup = os.path.join(path, "assets.extra", "tf_serving_warmup_requests")
    logs = [
        prediction_log_pb2.PredictionLog.FromString(r.numpy())
        for r in tf.data.TFRecordDataset(warmup)
    ]
    assert logs and all(
        log.predict_log.request.model_spec.signature_name == SIGNATURE_ELWC for log in logs
    )
    sizes = [log.predict_log.request.inputs["examples"].tensor_shape.dim[0].size for log in logs]
    assert 1 in sizes
    assert os.path.basename(export_run(model_dir)) == "2"


def test_export_cli_versions_and_errors(exported, capsys, tmp_path):
    from pipelines.export_cli import main as export_main

    model_dir, _ = exported
    assert export_main(["--model-dir", model_dir, "--version", "9"]) == 0
    assert os.path.isfile(os.path.join(model_dir, "export", "9", "saved_model.pb"))
    assert "exported" in capsys.readouterr().out
    assert export_main(["--model-dir", model_dir, "--version", "9"]) == 1
    assert "never overwritten" in capsys.readouterr().err
    assert export_main(["--model-dir", str(tmp_path)]) == 1
    assert "not a trained run" in capsys.readouterr().err
    assert export_main(["--model-dir", model_dir, "--precision", "bf16"]) == 1
    assert "exports compute in float32" in capsys.readouterr().err


def test_models_without_a_list_head_export_scores_only(mlp_run, dataset):
    signature = tf.saved_model.load(export_run(mlp_run[0])).signatures[SIGNATURE_ELWC]
    out = signature(examples=tf.constant(_records(dataset, 2)))
    assert set(out) == {"scores"} and out["scores"].shape[0] == 2


def test_the_export_holds_no_training_kernel(exported):
    from tensorflow.core.protobuf import saved_model_pb2

    _, path = exported
    saved = saved_model_pb2.SavedModel()
    with open(os.path.join(path, "saved_model.pb"), "rb") as f:
        saved.ParseFromString(f.read())
    ops = set()
    for graph in saved.meta_graphs:
        ops |= {node.op for node in graph.graph_def.node}
        for function in graph.graph_def.library.function:
            ops |= {node.op for node in function.node_def}
    assert "MatMul" in ops or "BatchMatMulV2" in ops  # the scan sees the model's ops
    assert not {op for op in ops if op.startswith("Tfr")}  # TF Serving could not load them
