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
  {"signature_def": <SignatureDefMap as JSON, proto field names>}}``.
* gRPC ``Predict`` (each input ``tf.make_ndarray``'d) and ``GetModelMetadata``
  (the ``SignatureDefMap`` packed in an ``Any``); errors as gRPC status codes.
"""

from __future__ import annotations

import base64
import contextlib
import http.server
import json
import os
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
    """A SavedModel as a TF Serving serves it.

    Attributes:
      loaded: the loaded SavedModel.
      name: the model name it is served under.
      signature_map: its ``SignatureDefMap`` (the metadata TF Serving gives).
      predict_error: ``(HTTP status, body)`` every REST predict answers instead,
        or ``None``.
    """

    def __init__(self, path: str, name: str):
        from tensorflow.core.protobuf import saved_model_pb2
        from tensorflow_serving.apis.get_model_metadata_pb2 import SignatureDefMap

        self.loaded = tf.saved_model.load(path)
        self.name = name
        saved = saved_model_pb2.SavedModel()
        with open(os.path.join(path, "saved_model.pb"), "rb") as f:
            saved.ParseFromString(f.read())
        self.signature_map = SignatureDefMap()
        for key, signature_def in saved.meta_graphs[0].signature_def.items():
            self.signature_map.signature_def[key].CopyFrom(signature_def)
        self.predict_error: tuple[int, bytes] | None = None


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
    if set(columns) != set(specs):
        raise ValueError(f"inputs {sorted(columns)}, the signature takes {sorted(specs)}")
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

    signature = fake.loaded.signatures[request.model_spec.signature_name or "serving_default"]
    inputs = {name: tf.constant(tf.make_ndarray(proto)) for name, proto in request.inputs.items()}
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

        def _not_found(self, model: str) -> None:
            self._answer(404, {"error": f"Servable not found for request: Latest({model})"})

        def do_GET(self):
            model = self.path.removeprefix("/v1/models/").removesuffix("/metadata")
            if model != fake.name or not self.path.endswith("/metadata"):
                return self._not_found(model)
            signatures = json_format.MessageToDict(signature_map, preserving_proto_field_name=True)
            spec = {"name": fake.name, "signature_name": "", "version": "1"}
            self._answer(200, {"model_spec": spec, "metadata": {"signature_def": signatures}})

        def do_POST(self):
            model = self.path.removeprefix("/v1/models/").removesuffix(":predict")
            if model != fake.name or not self.path.endswith(":predict"):
                return self._not_found(model)
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
            if request.model_spec.name != fake.name:
                context.abort(
                    grpc.StatusCode.NOT_FOUND,
                    f"Servable not found for request: Latest({request.model_spec.name})",
                )

        def Predict(self, request, context):
            self._check_model(request, context)
            try:
                return grpc_answer(fake, request)
            except tf.errors.InvalidArgumentError as e:
                context.abort(grpc.StatusCode.INVALID_ARGUMENT, e.message)

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
