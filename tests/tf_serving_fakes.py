"""Fake TF Servings for the tests: a SavedModel behind TF Serving's REST and gRPC APIs.

No TF Serving binary runs on the build machines. These fakes do what TF
Serving's documentation (and its ``json_tensor.cc``) says the server does with
a request, and call the SavedModel's signature:

* REST ``POST /v1/models/NAME:predict``: ``signature_name`` (default
  ``serving_default``); ``instances`` -- a list of rows, each the value of the
  only input or an object of every named input, stacked per input -- or
  ``inputs`` -- the only input's value or an object of every named input;
  ``{"b64": ...}`` is a ``DT_STRING``'s bytes. The answer is ``{"predictions":
  [...]}`` to rows (one value per row for a one-output signature, else one
  object per row) and ``{"outputs": ...}`` to columns; an error is HTTP 400
  (``INVALID_ARGUMENT``) or 404 (model not found) with ``{"error": message}``.
* REST ``GET /v1/models/NAME/metadata``: ``{"model_spec": ..., "metadata":
  {"signature_def": <SignatureDefMap as JSON, proto field names>}}``; ``GET
  /v1/models/NAME``: ``{"model_version_status": [{"version": "2", "state": "AVAILABLE", ...}]}``.
* gRPC ``Predict`` (each input ``tf.make_ndarray``'d) and ``GetModelMetadata``
  (the ``SignatureDefMap`` packed in an ``Any``); errors as gRPC status codes.
* Versions as TF Serving's default policy serves them: of a base path's numbered
  directories only the highest; a request naming another version is NOT_FOUND (404).
"""

from __future__ import annotations

import base64
import contextlib
import http.server
import json
import os
import re
import threading

import tensorflow as tf

__all__ = [
    "FakeModel",
    "decode_rest_body",
    "rest_answer",
    "grpc_answer",
    "serve_rest",
    "serve_grpc",
]


class FakeModel:
    """A model base path (numbered versions) as a TF Serving serves it: the latest version
    alone. A SavedModel directory itself is served as version 1.

    Attributes:
      loaded: the loaded SavedModel.
      name: the model name it is served under.
      version: the version served.
      signature_map: its ``SignatureDefMap`` (the metadata TF Serving gives).
      predict_error: ``(HTTP status, body)`` every REST predict answers instead,
        or ``None``.
    """

    def __init__(self, path: str, name: str):
        from tensorflow.core.protobuf import saved_model_pb2
        from tensorflow_serving.apis.get_model_metadata_pb2 import SignatureDefMap

        self.version = 1
        if not os.path.isfile(os.path.join(path, "saved_model.pb")):
            self.version = max(int(v) for v in os.listdir(path) if v.isdigit())
            path = os.path.join(path, str(self.version))
        self.loaded = tf.saved_model.load(path)
        self.name = name
        saved = saved_model_pb2.SavedModel()
        with open(os.path.join(path, "saved_model.pb"), "rb") as f:
            saved.ParseFromString(f.read())
        self.signature_map = SignatureDefMap()
        for key, signature_def in saved.meta_graphs[0].signature_def.items():
            self.signature_map.signature_def[key].CopyFrom(signature_def)
        self.predict_error: tuple[int, bytes] | None = None

    def missing(self, name: str, version: int | None) -> str | None:
        """TF Serving's NOT_FOUND message for a request of model ``name`` and ``version``
        (``None``: the latest), or ``None`` when this model answers it."""
        if name == self.name and version in (None, self.version):
            return None
        wanted = f"Latest({name})" if version is None else f"Specific({name}, {version})"
        return f"Servable not found for request: {wanted}"


def _decoded(value):
    """``{"b64": ...}`` objects as bytes, anywhere in a JSON value."""
    if isinstance(value, list):
        return [_decoded(v) for v in value]
    if isinstance(value, dict) and set(value) == {"b64"}:
        return base64.b64decode(value["b64"])
    if isinstance(value, dict):
        return {k: _decoded(v) for k, v in value.items()}
    return value


def decode_rest_body(body: dict, loaded) -> tuple[str, dict]:
    """``(signature name, {input name: tensor})`` of a REST predict body, as TF Serving
    reads it with the signature's input dtypes.

    Raises:
      ValueError: a body TF Serving would refuse (HTTP 400).
    """
    name = body.get("signature_name") or "serving_default"
    if name not in loaded.signatures:
        raise ValueError(f'Serving signature name: "{name}" not found in signature def')
    specs = loaded.signatures[name].structured_input_signature[1]
    if ("instances" in body) == ("inputs" in body):
        raise ValueError("Missing 'inputs' or 'instances' key (or both given)")
    if "instances" in body:
        rows = _decoded(body["instances"])
        if rows and isinstance(rows[0], dict):
            columns = {key: [row[key] for row in rows] for key in rows[0]}
        else:
            columns = {next(iter(specs)): rows}
    else:
        inputs = _decoded(body["inputs"])
        columns = inputs if isinstance(inputs, dict) else {next(iter(specs)): inputs}
    missing, extra = sorted(set(specs) - set(columns)), sorted(set(columns) - set(specs))
    if missing or extra:
        raise ValueError(f"missing inputs {missing}, unknown inputs {extra} for {name}")
    return name, {key: tf.constant(columns[key], dtype=specs[key].dtype) for key in specs}


def rest_answer(outputs: dict, form: str) -> dict:
    """TF Serving's JSON answer to a request of ``form`` (``instances`` or ``inputs``)."""
    columns = {name: value.numpy().tolist() for name, value in outputs.items()}
    if form == "inputs":
        return {"outputs": next(iter(columns.values())) if len(columns) == 1 else columns}
    if len(columns) == 1:
        return {"predictions": next(iter(columns.values()))}
    size = len(next(iter(columns.values())))
    return {"predictions": [{name: col[i] for name, col in columns.items()} for i in range(size)]}


def grpc_answer(fake: FakeModel, request):
    """The ``PredictResponse`` to a ``PredictRequest``; a signature's error propagates."""
    from tensorflow_serving.apis import predict_pb2

    name = request.model_spec.signature_name or "serving_default"
    signature = fake.loaded.signatures[name]
    inputs = {name: tf.constant(tf.make_ndarray(proto)) for name, proto in request.inputs.items()}
    specs = signature.structured_input_signature[1]
    missing, extra = sorted(set(specs) - set(inputs)), sorted(set(inputs) - set(specs))
    if missing or extra:
        raise ValueError(f"missing inputs {missing}, unknown inputs {extra} for {name}")
    outputs = signature(**inputs)
    response = predict_pb2.PredictResponse()
    response.model_spec.CopyFrom(request.model_spec)
    for name, value in outputs.items():
        response.outputs[name].CopyFrom(tf.make_tensor_proto(value.numpy()))
    return response


# === REST ===


def _rest_handler(fake: FakeModel, signature_map):
    from google.protobuf import json_format

    class Handler(http.server.BaseHTTPRequestHandler):
        def log_message(self, *args):  # keep the test output clean
            pass

        def _answer(self, status: int, body) -> None:
            data = body if isinstance(body, bytes) else json.dumps(body).encode("utf-8")
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def _route(self, suffix: str) -> bool:
            """Answers 404 unless the path is ``/v1/models/NAME[/versions/N]`` + ``suffix``
            of the served model."""
            found = re.fullmatch(rf"/v1/models/([^/:]+)(?:/versions/(\d+))?{suffix}", self.path)
            missing = "Malformed request" if found is None else None
            if found:
                version = found.group(2)
                missing = fake.missing(found.group(1), int(version) if version else None)
            if missing:
                self._answer(404, {"error": missing})
            return missing is None

        def do_GET(self):
            if self.path.endswith("/metadata"):
                if self._route("/metadata"):
                    signatures = json_format.MessageToDict(
                        signature_map, preserving_proto_field_name=True
                    )
                    spec = {"name": fake.name, "signature_name": "", "version": str(fake.version)}
                    self._answer(
                        200, {"model_spec": spec, "metadata": {"signature_def": signatures}}
                    )
            elif self._route(""):
                ok = {"error_code": "OK", "error_message": ""}
                state = {"version": str(fake.version), "state": "AVAILABLE", "status": ok}
                self._answer(200, {"model_version_status": [state]})

        def do_POST(self):
            if not self._route(":predict"):
                return
            if fake.predict_error is not None:
                return self._answer(*fake.predict_error)
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            try:
                name, inputs = decode_rest_body(body, fake.loaded)
                outputs = fake.loaded.signatures[name](**inputs)
            except ValueError as e:
                return self._answer(400, {"error": str(e)})
            except tf.errors.OpError as e:  # TF Serving passes the TF status on
                return self._answer(400, {"error": e.message})
            self._answer(
                200, rest_answer(outputs, "instances" if "instances" in body else "inputs")
            )

    return Handler


@contextlib.contextmanager
def serve_rest(fake: FakeModel, *, signatures: list[str] | None = None, port: int = 0):
    """Serves ``fake`` over REST on local ``port`` (0: a free one); yields
    ``http://127.0.0.1:PORT``. ``signatures``: the metadata gives only these (``None``: all)."""
    from tensorflow_serving.apis.get_model_metadata_pb2 import SignatureDefMap

    signature_map = SignatureDefMap()
    for key, signature_def in fake.signature_map.signature_def.items():
        if signatures is None or key in signatures:
            signature_map.signature_def[key].CopyFrom(signature_def)
    server = http.server.ThreadingHTTPServer(
        ("127.0.0.1", port), _rest_handler(fake, signature_map)
    )
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


# === gRPC ===


@contextlib.contextmanager
def serve_grpc(fake: FakeModel):
    """Serves ``fake`` as an in-process gRPC ``PredictionService``; yields ``127.0.0.1:PORT``."""
    from concurrent import futures

    import grpc
    from tensorflow_serving.apis import get_model_metadata_pb2, prediction_service_pb2_grpc

    class Servicer(prediction_service_pb2_grpc.PredictionServiceServicer):
        def _check_model(self, request, context) -> None:
            spec = request.model_spec
            missing = fake.missing(
                spec.name, spec.version.value if spec.HasField("version") else None
            )
            if missing:
                context.abort(grpc.StatusCode.NOT_FOUND, missing)

        def Predict(self, request, context):
            self._check_model(request, context)
            try:
                return grpc_answer(fake, request)
            except (ValueError, tf.errors.InvalidArgumentError) as e:
                context.abort(grpc.StatusCode.INVALID_ARGUMENT, getattr(e, "message", str(e)))

        def GetModelMetadata(self, request, context):
            self._check_model(request, context)
            response = get_model_metadata_pb2.GetModelMetadataResponse()
            response.model_spec.CopyFrom(request.model_spec)
            response.metadata["signature_def"].Pack(fake.signature_map)
            return response

    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    prediction_service_pb2_grpc.add_PredictionServiceServicer_to_server(Servicer(), server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    try:
        yield f"127.0.0.1:{port}"
    finally:
        server.stop(grace=None)
