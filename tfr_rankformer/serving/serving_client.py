"""A TF Serving client: ``connect(url)`` returns a ``RemoteModel`` whose ``signatures`` are
called as a loaded SavedModel's, so ``prediction`` scores through the server unchanged."""

from __future__ import annotations

import dataclasses
import json
import re
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Mapping

import numpy as np
import tensorflow as tf

from tfr_rankformer.core.elwc_schema import FEATURES, FIRST_STAGE_INPUT, MASK
from tfr_rankformer.core.model_families import FEATURES_KIND, TEXT_KIND
from tfr_rankformer.serving.serving_requests import (
    EXAMPLES,
    SIGNATURE_ELWC,
    SIGNATURE_TENSORS,
    grpc_outputs,
    model_spec,
    predict_request,
    rest_body,
    rest_outputs,
)

__all__ = [
    "DEFAULT_TIMEOUT",
    "ServerAddress",
    "ServingError",
    "ModelRejectedError",
    "RemoteSignature",
    "RemoteModel",
    "parse_server_url",
    "connect",
    "wait_until_available",
]

DEFAULT_TIMEOUT = 60.0  # seconds per request
_MODEL_PATH = r"(?P<name>[^/:]+)(?:/versions/(?P<version>\d+)|/labels/(?P<label>[^/:]+))?/?"
_REST_PATH = re.compile(rf"/v1/models/{_MODEL_PATH}")
_PATHS = {"http": _REST_PATH, "https": _REST_PATH, "grpc": re.compile(rf"/{_MODEL_PATH}")}
# The Listformer's default signature: on text, or on token ids (``text_export``).
_TEXT_INPUTS = ({"query", "documents"}, {"query_ids", "document_ids", "document_mask"})
_URL_FORMS = (
    "http://host:8501/v1/models/NAME or grpc://host:8500/NAME, optionally ending "
    "/versions/N or /labels/LABEL"
)


class ServingError(RuntimeError):
    """A TF Serving could not be reached, did not answer, or answered with an error."""


class ModelRejectedError(ServingError, tf.errors.InvalidArgumentError):
    """A request the model refused, also the ``InvalidArgumentError`` a local signature raises."""

    def __init__(self, message: str):
        tf.errors.InvalidArgumentError.__init__(self, None, None, message)

    def __str__(self) -> str:  # ``message`` stays the server's, naming the rejected list
        return f"the served model rejected the input: {self.message}"


@dataclasses.dataclass(frozen=True)
class ServerAddress:
    """Where a model is served (``parse_server_url``): ``rest`` or ``grpc`` at ``host:port``."""

    url: str
    protocol: str
    target: str
    model_name: str
    version: int | None = None  # None (and no label): the version the server serves
    version_label: str | None = None


def parse_server_url(url: str) -> ServerAddress:
    """The model URL ``url`` read into its parts.

    >>> address = parse_server_url("grpc://localhost:8500/rankformer/versions/2")
    >>> address.protocol, address.target, address.model_name, address.version
    ('grpc', 'localhost:8500', 'rankformer', 2)
    >>> parse_server_url("http://localhost:8501/v1/models/rankformer").protocol
    'rest'
    """
    parts = urllib.parse.urlsplit(url)
    pattern = _PATHS.get(parts.scheme)
    found = pattern.fullmatch(parts.path) if pattern else None
    try:
        port = parts.port
    except ValueError:  # not a number, or out of range
        found = None
    if found is None or not parts.hostname or parts.query or parts.fragment:
        raise ValueError(f"{url} is not a TF Serving model URL; give {_URL_FORMS}")
    version = found.group("version")
    target = parts.netloc if port or parts.scheme != "grpc" else f"{parts.netloc}:8500"
    return ServerAddress(
        url=url.rstrip("/"),
        protocol="grpc" if parts.scheme == "grpc" else "rest",
        target=target,
        model_name=urllib.parse.unquote(found.group("name")),
        version=int(version) if version is not None else None,
        version_label=found.group("label"),
    )


def _error_text(body: bytes) -> str:
    """TF Serving's message in an error body (``{"error": ...}``, C-escaped: maybe ``\\'``)."""
    text = body.decode("utf-8", "replace")
    for candidate in (text, text.replace("\\'", "'")):
        try:
            answer = json.loads(candidate)
        except json.JSONDecodeError:
            continue
        if isinstance(answer, dict) and "error" in answer:
            return str(answer["error"]).strip()
    return text.strip()[:500] or "(no message)"


class _RestTransport:
    """TF Serving's REST API (``:predict``, ``/metadata``) with the standard library."""

    def __init__(self, address: ServerAddress, timeout: float):
        self.address = address
        self.timeout = timeout

    def metadata(self):
        from google.protobuf import json_format
        from tensorflow_serving.apis.get_model_metadata_pb2 import SignatureDefMap

        url = f"{self.address.url}/metadata"
        answer = self._send(url, None)
        try:
            signatures = dict(answer["metadata"]["signature_def"])
            signatures.pop("@type", None)  # the field TF Serving's JSON of an Any would hold
            return json_format.ParseDict(signatures, SignatureDefMap(), ignore_unknown_fields=True)
        except (KeyError, TypeError, json_format.ParseError) as e:
            raise ServingError(f"{url}: not TF Serving's model metadata ({e})") from None

    def predict(self, inputs: Mapping[str, object], signature_name: str) -> dict[str, np.ndarray]:
        url = f"{self.address.url}:predict"
        form = "instances" if len(inputs) == 1 else "inputs"
        answer = self._send(url, rest_body(inputs, signature_name=signature_name, form=form))
        try:
            return rest_outputs(answer)
        except ValueError as e:
            raise ServingError(f"{url}: {e}") from None

    def _send(self, url: str, body: dict | None) -> dict:
        data = None if body is None else json.dumps(body).encode("utf-8")
        headers = {} if data is None else {"Content-Type": "application/json"}
        request = urllib.request.Request(url, data=data, headers=headers)
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as response:
                text = response.read()
        except urllib.error.HTTPError as e:
            message = f"HTTP {e.code} from {url}: {_error_text(e.read())}"
            raise (ModelRejectedError if e.code == 400 else ServingError)(message) from None
        except (urllib.error.URLError, TimeoutError) as e:
            reason = getattr(e, "reason", e)
            if isinstance(reason, TimeoutError):
                raise ServingError(f"{url} did not answer within {self.timeout:g} s") from None
            raise ServingError(f"cannot reach TF Serving at {url}: {reason}") from None
        except OSError as e:
            raise ServingError(f"lost the connection to {url}: {e}") from None
        try:
            return json.loads(text)
        except json.JSONDecodeError:
            raise ServingError(
                f"{url} answered with something other than JSON: {text[:200]!r}"
            ) from None

    def close(self) -> None:
        pass


class _GrpcTransport:
    """TF Serving's gRPC ``PredictionService`` (``Predict``, ``GetModelMetadata``)."""

    def __init__(self, address: ServerAddress, timeout: float):
        import grpc
        from tensorflow_serving.apis import prediction_service_pb2_grpc

        self.address = address
        self.timeout = timeout
        # Large batches of lists exceed gRPC's default 4 MiB messages.
        options = [("grpc.max_send_message_length", -1), ("grpc.max_receive_message_length", -1)]
        self.channel = grpc.insecure_channel(address.target, options=options)
        self.stub = prediction_service_pb2_grpc.PredictionServiceStub(self.channel)
        self.spec = dict(version=address.version, version_label=address.version_label)

    def metadata(self):
        from tensorflow_serving.apis import get_model_metadata_pb2

        request = get_model_metadata_pb2.GetModelMetadataRequest(metadata_field=["signature_def"])
        request.model_spec.CopyFrom(model_spec(self.address.model_name, **self.spec))
        response = self._call(self.stub.GetModelMetadata, request)
        signatures = get_model_metadata_pb2.SignatureDefMap()
        packed = response.metadata.get("signature_def")
        if packed is None or not packed.Unpack(signatures):
            raise ServingError(f"{self.address.url}: the model metadata holds no signature_def")
        return signatures

    def predict(self, inputs: Mapping[str, object], signature_name: str) -> dict[str, np.ndarray]:
        spec = dict(model_name=self.address.model_name, signature_name=signature_name)
        request = predict_request(inputs, **spec, **self.spec)
        return grpc_outputs(self._call(self.stub.Predict, request))

    def _call(self, method, request):
        import grpc

        try:
            return method(request, timeout=self.timeout)
        except grpc.RpcError as e:
            code, details, url = e.code(), e.details(), self.address.url
            if code == grpc.StatusCode.INVALID_ARGUMENT:
                raise ModelRejectedError(f"{url}: INVALID_ARGUMENT: {details}") from None
            if code == grpc.StatusCode.UNAVAILABLE:
                raise ServingError(f"cannot reach TF Serving at {url}: {details}") from None
            if code == grpc.StatusCode.DEADLINE_EXCEEDED:
                raise ServingError(f"{url} did not answer within {self.timeout:g} s") from None
            raise ServingError(f"{url}: {code.name}: {details}") from None

    def close(self) -> None:
        self.channel.close()


class RemoteSignature:
    """One signature of a served model, called as a loaded SavedModel's."""

    def __init__(self, transport, name: str, signature_def):
        self._transport = transport
        self.name = name
        # A TensorInfo of no dtype (DT_INVALID, 0) names an op, as in TF's
        # ``__saved_model_init_op`` signature: it has no tensor to send or cast.
        self.input_specs = {
            key: tf.TensorSpec(tf.TensorShape(info.tensor_shape), tf.as_dtype(info.dtype), key)
            for key, info in signature_def.inputs.items()
            if info.dtype
        }
        self.output_dtypes = {
            key: tf.as_dtype(info.dtype)
            for key, info in signature_def.outputs.items()
            if info.dtype
        }

    @property
    def structured_input_signature(self) -> tuple[tuple, dict[str, tf.TensorSpec]]:
        """``((), {input name: TensorSpec})``, as a concrete function's."""
        return (), dict(self.input_specs)

    def __call__(self, **inputs) -> dict[str, tf.Tensor]:
        """The outputs for ``inputs`` by name (floats converted); ``TypeError`` names a missing,
        unknown or wrongly typed input."""
        missing = sorted(set(self.input_specs) - set(inputs))
        if missing or set(inputs) - set(self.input_specs):
            raise TypeError(
                f"{self.name} takes {sorted(self.input_specs)}, got {sorted(inputs)}"
                + (f": the request lacks {', '.join(missing)}" if missing else "")
            )
        for name, value in inputs.items():
            array = np.asarray(value.numpy() if isinstance(value, tf.Tensor) else value)
            given, wanted = array.dtype, self.input_specs[name].dtype
            given = tf.string if given.kind in "OSU" else tf.as_dtype(given)
            if array.size and given != wanted and not (given.is_floating and wanted.is_floating):
                raise TypeError(f"{self.name}: the input {name} is {given.name}, not {wanted.name}")
            if wanted != tf.string:  # floats as the signature's (TF Serving converts no proto)
                inputs[name] = array.astype(wanted.as_numpy_dtype)
        outputs = self._transport.predict(inputs, self.name)
        return {k: tf.constant(v, self.output_dtypes.get(k)) for k, v in outputs.items()}


class RemoteModel:
    """A model served by TF Serving (``connect``), in place of a loaded export."""

    def __init__(self, address: ServerAddress, transport, signature_map):
        self.address = address
        self._transport = transport
        self.signatures = {
            name: RemoteSignature(transport, name, signature_def)
            for name, signature_def in signature_map.signature_def.items()
        }

    @property
    def url(self) -> str:
        return self.address.url

    @property
    def kind(self) -> str:
        """The served export's kind: text or feature vectors; ``ServingError`` for neither."""
        if self.text_inputs() - {FIRST_STAGE_INPUT} in _TEXT_INPUTS:
            return TEXT_KIND
        self.num_features  # noqa: B018  (raises for an export of neither kind)
        return FEATURES_KIND

    def text_inputs(self) -> set[str]:  # the default signature's input names
        default = self.signatures.get(SIGNATURE_ELWC)
        return set(default.input_specs) if default else set()

    @property
    def num_features(self) -> int:
        """The feature count ``d`` of a feature-vector export; ``ServingError`` for another."""
        elwc = self.signatures.get(SIGNATURE_ELWC)
        tensors = self.signatures.get(SIGNATURE_TENSORS)
        features = tensors.input_specs.get(FEATURES) if tensors else None
        shape = features.shape if features is not None else tf.TensorShape(None)
        takes_elwc = elwc is not None and set(elwc.input_specs) == {EXAMPLES}
        if not takes_elwc or shape.rank != 3 or shape[-1] is None:
            found = {name: sorted(s.input_specs) for name, s in sorted(self.signatures.items())}
            raise ServingError(
                f"{self.url} does not serve a feature-vector export (tfr-export): expected "
                f"{SIGNATURE_ELWC} on {EXAMPLES!r} and {SIGNATURE_TENSORS} on {FEATURES!r} "
                f"[batch, list, d] and {MASK!r}; its signatures take {found}"
            )
        return int(shape[-1])

    def close(self) -> None:
        self._transport.close()


def wait_until_available(url: str, *, seconds: float, timeout: float = DEFAULT_TIMEOUT) -> None:
    """Waits up to ``seconds`` until the model's metadata answers (a version is AVAILABLE)."""
    address = parse_server_url(url)
    deadline = time.monotonic() + seconds
    while True:
        transport = _transport(address, timeout)
        try:
            transport.metadata()
            return
        except ServingError as e:
            last = str(e)
        finally:
            transport.close()
        if time.monotonic() >= deadline:
            raise ServingError(f"{url} is not AVAILABLE after {seconds:g} s: {last}")
        time.sleep(min(0.5, max(deadline - time.monotonic(), 0.0)))


def _transport(address: ServerAddress, timeout: float):
    return (_GrpcTransport if address.protocol == "grpc" else _RestTransport)(address, timeout)


def connect(url: str, *, timeout: float = DEFAULT_TIMEOUT, wait: float = 0.0) -> RemoteModel:
    """Opens the model at ``url`` (without a version, the one the server serves); ``timeout``:
    seconds per request; ``wait``: seconds to wait for it (``ServingError``)."""
    address = parse_server_url(url)
    if wait > 0:
        wait_until_available(url, seconds=wait, timeout=timeout)
    transport = _transport(address, timeout)
    try:
        signature_map = transport.metadata()
    except BaseException:
        transport.close()
        raise
    return RemoteModel(address, transport, signature_map)
