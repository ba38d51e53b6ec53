"""TF Serving's request formats for a feature-vector export, and ``tfr-predict --server``.

No TF Serving binary runs here. What is tested is the request format and the
model's answer to it: each request is decoded as TF Serving documents it (REST:
``{"b64": ...}`` -> ``DT_STRING`` bytes, ``instances`` rows stacked per input,
``inputs`` columns; gRPC: ``tf.make_ndarray`` of each ``TensorProto``), the
SavedModel's signature is called with it, its outputs are put in TF Serving's
answer form, read back, and compared with ``tfr-predict``'s local scores. The
command runs end to end against a fake REST server (``http.server`` in a thread)
and an in-process gRPC ``PredictionService`` that answer that way.
"""

from __future__ import annotations

import json
import os
import re
import socket

import numpy as np
import pytest
import tensorflow as tf

from pipelines.predict_cli import main as predict_main  # noqa: E402
from tests.conftest import letor_line, write_lines  # noqa: E402
from tests.tf_serving_fakes import (  # noqa: E402
    FakeModel,
    decode_rest_body,
    grpc_answer,
    rest_answer,
    serve_grpc,
    serve_rest,
)
from tfr_rankformer.runner import predict  # noqa: E402
from tfr_rankformer.serving.serving_requests import (  # noqa: E402  # noqa: E402
    EXAMPLES,
    FEATURES,
    MASK,
    REST_FORMS,
    SIGNATURE_ELWC,
    SIGNATURE_TENSORS,
    elwc_records,
    grpc_elwc_request,
    grpc_outputs,
    grpc_tensor_request,
    list_scores,
    padded_tensors,
    rest_elwc_body,
    rest_outputs,
    rest_tensor_body,
)
from tfrecords_tools.elwc_writer import TFRecordWriter  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
D = 3  # the tiny export's feature count


def _lists() -> list:
    """Three lists of 2, 4 and 3 items (3 features), with docids."""
    rng = np.random.default_rng(7)
    return [
        (qid, [f"q{qid}-d{j}" for j in range(n)], rng.normal(size=(n, D)).astype(np.float32))
        for qid, n in ((11, 2), (12, 4), (13, 3))
    ]


LISTS = _lists()
LENGTHS = [len(docids) for _, docids, _ in LISTS]


@pytest.fixture(scope="module")
def export(tiny_servables) -> str:
    return tiny_servables["reject"]


@pytest.fixture(scope="module")
def fake(export) -> FakeModel:
    """The SavedModel, loaded, as the fake servers serve it (model name ``tiny``)."""
    return FakeModel(export, "tiny")


@pytest.fixture(scope="module")
def local_scores(export) -> list[np.ndarray]:
    """What ``tfr-predict`` scores locally (``runner.predict``, the tensor signature)."""
    return [scored.scores for scored in predict(export, LISTS)]


def _assert_scores(outputs: dict, local_scores) -> None:
    scores = list_scores(outputs, LENGTHS)
    assert len(scores) == len(local_scores)
    for got, expected in zip(scores, local_scores):
        np.testing.assert_allclose(got, expected, atol=1e-5, rtol=0)


def _through_json(value: dict) -> dict:
    return json.loads(json.dumps(value))


# === The messages ===


def test_builders_use_the_export_signatures_input_names_and_dtypes(fake):
    def specs(name):
        return fake.loaded.signatures[name].structured_input_signature[1]

    assert {k: v.dtype for k, v in specs(SIGNATURE_ELWC).items()} == {EXAMPLES: tf.string}
    tensors = {k: (v.dtype, v.shape.as_list()) for k, v in specs(SIGNATURE_TENSORS).items()}
    assert tensors == {FEATURES: (tf.float32, [None, None, D]), MASK: (tf.bool, [None, None])}


def test_elwc_records_hold_each_lists_qid_and_raw_features():
    from tensorflow_serving.apis import input_pb2

    records = elwc_records(LISTS, D)
    for (qid, docids, features), record in zip(LISTS, records):
        elwc = input_pb2.ExampleListWithContext.FromString(record)
        assert list(elwc.context.features.feature["qid"].int64_list.value) == [qid]
        values = [list(e.features.feature["features"].float_list.value) for e in elwc.examples]
        np.testing.assert_array_equal(np.array(values, np.float32), features)
        assert len(elwc.examples) == len(docids)
    with pytest.raises(ValueError, match=r"list 5: features of shape \(2, 4\), expected \(2, 3\)"):
        elwc_records([(5, ["a", "b"], np.zeros((2, 4)))], D)


@pytest.mark.parametrize("form", REST_FORMS)
def test_rest_elwc_body_decoded_as_tf_serving_scores_as_tfr_predict(fake, local_scores, form):
    records = elwc_records(LISTS, D)
    body = _through_json(rest_elwc_body(records, form=form))
    assert body["signature_name"] == SIGNATURE_ELWC and set(body) == {"signature_name", form}
    column = body["instances"] if form == "instances" else body["inputs"][EXAMPLES]
    assert all(set(value) == {"b64"} for value in column)
    name, inputs = decode_rest_body(body, fake.loaded)
    assert inputs[EXAMPLES].numpy().tolist() == records  # the bytes, unchanged
    outputs = fake.loaded.signatures[name](**inputs)
    answer = _through_json(rest_answer(outputs, form))
    assert set(answer) == {"predictions" if form == "instances" else "outputs"}
    _assert_scores(rest_outputs(answer), local_scores)


@pytest.mark.parametrize("form", REST_FORMS)
def test_rest_tensor_body_decoded_as_tf_serving_scores_as_tfr_predict(fake, local_scores, form):
    features, mask = padded_tensors(LISTS, D)
    body = _through_json(rest_tensor_body(features, mask, form=form))
    assert body["signature_name"] == SIGNATURE_TENSORS
    if form == "instances":
        assert [sorted(row) for row in body["instances"]] == [[FEATURES, MASK]] * len(LISTS)
    name, inputs = decode_rest_body(body, fake.loaded)
    np.testing.assert_array_equal(inputs[FEATURES].numpy(), features)
    np.testing.assert_array_equal(inputs[MASK].numpy(), mask)
    outputs = fake.loaded.signatures[name](**inputs)
    _assert_scores(rest_outputs(_through_json(rest_answer(outputs, form))), local_scores)


@pytest.mark.parametrize("form", REST_FORMS)
def test_a_one_output_answer_without_its_name_reads_as_scores(fake, local_scores, form):
    inputs = {EXAMPLES: tf.constant(elwc_records(LISTS, D))}
    outputs = fake.loaded.signatures[SIGNATURE_ELWC](**inputs)
    answer = _through_json(rest_answer({"scores": outputs["scores"]}, form))
    assert isinstance(answer.get("predictions", answer.get("outputs")), list)
    _assert_scores(rest_outputs(answer), local_scores)


def test_an_error_answer_is_refused_with_its_message():
    with pytest.raises(ValueError, match="Servable not found"):
        rest_outputs({"error": "Servable not found for request: Latest(x)"})
    with pytest.raises(ValueError, match="'predictions' or 'outputs'"):
        rest_outputs({"results": []})


@pytest.mark.parametrize("kind", ["elwc", "tensors"])
def test_grpc_request_decoded_as_tf_serving_scores_as_tfr_predict(fake, local_scores, kind):
    from tensorflow_serving.apis import predict_pb2

    if kind == "elwc":
        request = grpc_elwc_request(elwc_records(LISTS, D), model_name="tiny")
    else:
        request = grpc_tensor_request(*padded_tensors(LISTS, D), model_name="tiny", version=3)
    request = predict_pb2.PredictRequest.FromString(request.SerializeToString())  # on the wire
    assert request.model_spec.name == "tiny"
    signature = SIGNATURE_ELWC if kind == "elwc" else SIGNATURE_TENSORS
    assert request.model_spec.signature_name == signature
    assert request.model_spec.version.value == (3 if kind == "tensors" else 0)
    dtypes = {name: tf.dtypes.as_dtype(proto.dtype) for name, proto in request.inputs.items()}
    expected = {EXAMPLES: tf.string} if kind == "elwc" else {FEATURES: tf.float32, MASK: tf.bool}
    assert dtypes == expected
    response = predict_pb2.PredictResponse.FromString(
        grpc_answer(fake, request).SerializeToString()
    )
    _assert_scores(grpc_outputs(response), local_scores)


# === tfr-predict --server ===


def _letor_file(tmp_path) -> str:
    lines = [
        letor_line(0, qid, features[j], f"docid = {docid}")
        for qid, docids, features in LISTS
        for j, docid in enumerate(docids)
    ]
    return write_lines(tmp_path / "lists.txt", lines)


def _elwc_file(tmp_path, records=None) -> str:
    writer = TFRecordWriter(str(tmp_path / "lists.tfrecord"))
    writer.write_many(records or elwc_records(LISTS, D))
    writer.close()
    return str(tmp_path / "lists.tfrecord")


def _run(where: list[str], data: str, output, *extra) -> int:
    return predict_main([*where, "--input", data, "--output", str(output), "--no-progress", *extra])


@pytest.fixture(scope="module")
def rest_url(fake):
    with serve_rest(fake) as base:
        yield f"{base}/v1/models/tiny"


@pytest.fixture(scope="module")
def grpc_url(fake):
    with serve_grpc(fake) as target:
        yield f"grpc://{target}/tiny"


@pytest.mark.parametrize("protocol", ["rest", "grpc"])
@pytest.mark.parametrize("input_kind", ["letor", "elwc"])
def test_server_run_equals_local_tfr_predict(
    export, request, tmp_path, capsys, protocol, input_kind
):
    url = request.getfixturevalue(f"{protocol}_url")
    data = _letor_file(tmp_path) if input_kind == "letor" else _elwc_file(tmp_path)
    extra = ["--batch-size", "2"]  # two requests, lists of different lengths padded
    assert _run(["--model", export], data, tmp_path / "local.txt", *extra) == 0
    assert _run(["--server", url], data, tmp_path / "served.txt", *extra) == 0
    local = (tmp_path / "local.txt").read_text()
    assert len(local.splitlines()) == sum(LENGTHS)
    assert (tmp_path / "served.txt").read_text() == local
    assert f"scored 3 lists with {url}" in capsys.readouterr().out


def test_server_csv_carries_the_list_quality_as_locally(export, rest_url, tmp_path):
    data = _letor_file(tmp_path)
    assert _run(["--model", export], data, tmp_path / "local.csv", "--format", "csv") == 0
    assert _run(["--server", rest_url], data, tmp_path / "served.csv", "--format", "csv") == 0
    local = (tmp_path / "local.csv").read_text()
    assert "p_t_ge_2" in local.splitlines()[0]
    assert (tmp_path / "served.csv").read_text() == local


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.parametrize("scheme", ["http", "grpc"])
def test_an_unreachable_server_is_named(tmp_path, capsys, scheme):
    port = _free_port()
    url = f"{scheme}://127.0.0.1:{port}/" + ("v1/models/tiny" if scheme == "http" else "tiny")
    output = tmp_path / "run.txt"
    assert _run(["--server", url, "--timeout", "10"], _letor_file(tmp_path), output) == 1
    err = capsys.readouterr().err
    assert f"tfr-predict: error: cannot reach TF Serving at {url}" in err
    assert not output.exists() and not os.path.exists(f"{output}.partial")


@pytest.mark.parametrize(
    "url, parts",
    [
        ("http://h:8501/v1/models/m/", ("rest", "h:8501", "m", None, None)),
        ("https://h/v1/models/m/versions/3", ("rest", "h", "m", 3, None)),
        ("grpc://h/m", ("grpc", "h:8500", "m", None, None)),
        ("grpc://h:9000/m/labels/stable", ("grpc", "h:9000", "m", None, "stable")),
        ("ftp://h/v1/models/m", None),
        ("http://h/models/m", None),
        ("http://h:x/v1/models/m", None),
        ("grpc://h:1/", None),
    ],
)
def test_server_urls_are_read_into_their_parts_or_refused(url, parts):
    from tfr_rankformer.serving.serving_client import parse_server_url

    if parts is None:
        with pytest.raises(ValueError, match="is not a TF Serving model URL"):
            parse_server_url(url)
        return
    a = parse_server_url(url)
    assert a.url == url.rstrip("/")
    assert (a.protocol, a.target, a.model_name, a.version, a.version_label) == parts


def test_a_model_the_server_does_not_serve_gives_the_http_status(rest_url, tmp_path, capsys):
    url = rest_url.replace("/tiny", "/nope")
    assert _run(["--server", url], _letor_file(tmp_path), tmp_path / "run.txt") == 1
    err = capsys.readouterr().err
    assert f"HTTP 404 from {url}/metadata: Servable not found for request: Latest(nope)" in err


# A TF Serving error body: the message C-escaped, so a quote reads \' (not valid JSON).
_BAD_REQUEST = (
    b'{ "error": "Could not parse example input, value: \\\'garbage\\\'\\n\\t '
    b'[[{{node ParseExampleV2}}]]" }'
)


@pytest.mark.parametrize("input_kind", ["letor", "elwc"])
def test_http_400_gives_the_status_and_tf_servings_message(
    fake, rest_url, tmp_path, capsys, input_kind
):
    data = _letor_file(tmp_path) if input_kind == "letor" else _elwc_file(tmp_path)
    fake.predict_error = (400, _BAD_REQUEST)
    try:
        assert _run(["--server", rest_url], data, tmp_path / "run.txt") == 1
    finally:
        fake.predict_error = None
    err = capsys.readouterr().err.strip()
    expected = f"HTTP 400 from {rest_url}:predict: Could not parse example input, value: 'garbage'"
    if input_kind == "letor":
        assert err.startswith(
            f"tfr-predict: error: the served model rejected the input: {expected}"
        )
    else:  # named by file and record, as locally
        assert (
            err
            == f"tfr-predict: error: {data}: records 1-3: the model rejected the input ({expected})"
        )
    assert not (tmp_path / "run.txt").exists()


@pytest.mark.parametrize("protocol", ["rest", "grpc"])
def test_an_item_the_model_rejects_is_named_as_locally(export, request, tmp_path, capsys, protocol):
    from tensorflow_serving.apis import input_pb2

    records = elwc_records(LISTS, D)
    bad = input_pb2.ExampleListWithContext.FromString(records[1])
    del bad.examples[2].features.feature["features"]
    data = _elwc_file(tmp_path, [records[0], bad.SerializeToString(), records[2]])
    url = request.getfixturevalue(f"{protocol}_url")
    assert _run(["--model", export], data, tmp_path / "local.txt") == 1
    local = capsys.readouterr().err
    assert re.search(
        r"record 2: item 2: the features field is missing \(0 values\), expected 3", local
    )
    assert _run(["--server", url], data, tmp_path / "served.txt") == 1
    assert capsys.readouterr().err == local


def test_a_model_that_is_not_a_feature_vector_export_is_refused(fake, tmp_path, capsys):
    with serve_rest(fake, signatures=[SIGNATURE_ELWC]) as base:
        url = f"{base}/v1/models/tiny"
        assert _run(["--server", url], _letor_file(tmp_path), tmp_path / "run.txt") == 1
    err = capsys.readouterr().err
    assert f"{url} does not serve a feature-vector export (tfr-export)" in err


# === docs/serving.md ===

# The list the docs' examples send: one query, 2 items of the tiny export's 3 features.
DOC_LIST = [(1, ["doc-a", "doc-b"], np.array([[1.0, 0.5, 0.25], [0.0, 2.0, 1.0]], np.float32))]


def _docs_section() -> str:
    with open(os.path.join(REPO, "docs", "serving.md"), encoding="utf-8") as f:
        text = f.read()
    section = text[text.index("## Sending requests") :]
    return section[: section.index("\n## ", 1)]


def test_the_docs_curl_bodies_are_what_the_builders_give():
    bodies = [json.loads(b) for b in re.findall(r":predict -d '(.*?)'\n", _docs_section(), re.S)]
    expected = [
        rest_elwc_body(elwc_records(DOC_LIST, D)),
        rest_tensor_body(*padded_tensors(DOC_LIST, D)),
    ]
    assert bodies == expected


def test_the_docs_sample_answer_is_the_tiny_exports(fake):
    found = re.search(r"```json\n(\{\n  \"predictions\".*?)```", _docs_section(), re.S)
    answer = json.loads(found.group(1))
    records = elwc_records(DOC_LIST, D)
    outputs = fake.loaded.signatures[SIGNATURE_ELWC](examples=tf.constant(records))
    expected = rest_outputs(_through_json(rest_answer(outputs, "instances")))
    got = rest_outputs(answer)
    assert sorted(got) == sorted(expected)
    for name in expected:
        np.testing.assert_allclose(got[name], expected[name], atol=1e-4)


# === Versions, waiting, inputs a model cannot take ===


@pytest.fixture(scope="module")
def versioned(export, tmp_path_factory):
    """A base path holding versions 1 and 2 (the tiny export), served as TF Serving's
    default policy serves it: the latest only."""
    base = tmp_path_factory.mktemp("base")
    for version in ("1", "2"):
        os.symlink(export, base / version)
    fake = FakeModel(str(base), "tiny")
    with serve_rest(fake) as rest, serve_grpc(fake) as target:
        yield f"{rest}/v1/models/tiny", f"grpc://{target}/tiny"


@pytest.mark.parametrize("protocol", [0, 1])
def test_the_server_serves_the_latest_version_and_the_cli_names_none(
    versioned, tmp_path, capsys, protocol
):
    from tfr_rankformer.serving.serving_client import wait_until_available

    url = versioned[protocol]
    data = _letor_file(tmp_path)
    wait_until_available(url, seconds=5)
    assert _run(["--server", url, "--wait", "5"], data, tmp_path / "latest.txt") == 0
    assert _run(["--server", url, "--version", "2"], data, tmp_path / "v2.txt") == 0
    assert (tmp_path / "v2.txt").read_text() == (tmp_path / "latest.txt").read_text()
    capsys.readouterr()
    assert _run(["--server", url, "--version", "1"], data, tmp_path / "v1.txt") == 1
    assert "Servable not found for request: Specific(tiny, 1)" in capsys.readouterr().err
    assert not (tmp_path / "v1.txt").exists()


def test_the_rest_status_reports_the_latest_version_available(versioned):
    import urllib.request

    with urllib.request.urlopen(versioned[0]) as answer:
        (status,) = json.load(answer)["model_version_status"]
    assert (status["version"], status["state"]) == ("2", "AVAILABLE")


def test_waiting_for_a_server_that_never_comes_names_the_url(tmp_path, capsys):
    url = f"http://127.0.0.1:{_free_port()}/v1/models/tiny"
    assert _run(["--server", url, "--wait", "0.5"], _letor_file(tmp_path), tmp_path / "r") == 1
    assert f"{url} is not AVAILABLE after 0.5 s: cannot reach" in capsys.readouterr().err


@pytest.mark.parametrize("policy", ["reject", "score-last"])
def test_an_empty_batch_gives_empty_outputs_through_every_signature(tiny_servables, policy):
    loaded = tf.saved_model.load(tiny_servables[policy])
    for name in (SIGNATURE_ELWC, "predict"):
        outputs = loaded.signatures[name](examples=tf.constant([], tf.string))
        assert outputs["scores"].shape == [0, 0] and outputs["list_probs"].shape == [0, 2]
    features, mask = padded_tensors([], D)
    outputs = loaded.signatures[SIGNATURE_TENSORS](features=features, mask=mask)
    assert outputs["scores"].shape == [0, 0] and outputs["expected_list_label"].shape == [0]


def test_a_wrong_dtype_is_refused_naming_the_input(fake, rest_url):
    from tensorflow_serving.apis import input_pb2

    from tfr_rankformer.serving.serving_client import connect

    remote = connect(rest_url)
    features, mask = padded_tensors(LISTS, D)
    with pytest.raises(TypeError, match="predict_tensors: the input mask is int64, not bool"):
        remote.signatures[SIGNATURE_TENSORS](features=features, mask=mask.astype(np.int64))
    with pytest.raises(TypeError, match="the request lacks mask"):
        remote.signatures[SIGNATURE_TENSORS](features=features)
    # float64 features are sent as the signature's float32, as TF Serving's JSON does.
    scores = remote.signatures[SIGNATURE_TENSORS](features=features.astype(np.float64), mask=mask)
    assert scores["scores"].dtype == tf.float32
    remote.close()
    # In an ELWC the signature checks the field's type itself and names it.
    record = input_pb2.ExampleListWithContext()
    record.examples.add().features.feature[FEATURES].int64_list.value.extend([1, 2, 3])
    with pytest.raises(tf.errors.InvalidArgumentError, match="Key: features.*Expected type: float"):
        fake.loaded.signatures[SIGNATURE_ELWC](examples=tf.constant([record.SerializeToString()]))


def test_letor_lists_reads_only_the_lists_taken(tmp_path):
    import itertools

    from tfr_rankformer import letor_lists

    lines = [letor_line(1, 7, [0.5, 1.0, 2.0], "docid = a"), letor_line(0, 7, [1.0])]
    lines += [letor_line(2, 8, [3.0, 0.0, 1.0]), letor_line(0, 9, [1.0]), "not a letor line\n"]
    path = write_lines(tmp_path / "lists.txt", lines)
    (first, second) = itertools.islice(letor_lists(path, D), 2)
    assert first[:2] == (7, ["a", "2"]) and second[:2] == (8, ["3"])
    np.testing.assert_array_equal(first[2], [[0.5, 1.0, 2.0], [1.0, 0.0, 0.0]])
    with pytest.raises(ValueError, match=r"lists.txt:5: not a LETOR line"):
        list(letor_lists(path, D))
