"""TF Serving's requests and answers for a feature-vector export: REST ``:predict`` bodies
(rows ``instances`` or columns ``inputs``) and gRPC ``PredictRequest`` protos.

>>> import numpy as np
>>> features, mask = padded_tensors([(7, ["a"], np.array([[1, 2]])), (8, [], np.zeros((0, 2)))], 2)
>>> rest_tensor_body(features, mask)["inputs"]
{'features': [[[1.0, 2.0]], [[0.0, 0.0]]], 'mask': [[True], [False]]}
>>> rest_tensor_body(features, mask, form="instances")["instances"][0]
{'features': [[1.0, 2.0]], 'mask': [True]}
"""

from __future__ import annotations

import base64
import gzip
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING

import numpy as np
import tensorflow as tf

from tfr_rankformer.core.elwc_schema import FEATURES, MASK

if TYPE_CHECKING:
    from tensorflow_serving.apis import model_pb2, predict_pb2

__all__ = [
    "SIGNATURE_ELWC",
    "SIGNATURE_TENSORS",
    "EXAMPLES",
    "REST_FORMS",
    "elwc_records",
    "letor_lists",
    "padded_tensors",
    "rest_body",
    "rest_elwc_body",
    "rest_tensor_body",
    "model_spec",
    "predict_request",
    "grpc_elwc_request",
    "grpc_tensor_request",
    "rest_outputs",
    "grpc_outputs",
    "list_scores",
]

# A feature-vector export's signatures and their input names (``export._Servable``'s).
SIGNATURE_ELWC = "serving_default"
SIGNATURE_TENSORS = "predict_tensors"
EXAMPLES = "examples"
# TF Serving's two JSON layouts of a predict request: rows, or one array per input.
REST_FORMS = ("instances", "inputs")
# The name of a signature's only output, which TF Serving's REST answer leaves out.
_SINGLE_OUTPUT = "scores"

# One query's list, as ``prediction.score_lists`` and the LETOR readers hold it.
FeatureList = tuple[int, Sequence[str], np.ndarray]


def elwc_records(lists: Iterable[FeatureList], num_features: int) -> list[bytes]:
    """The lists as serialized ELWC; ``ValueError`` for features not ``[len(docids), d]``."""
    from tensorflow_serving.apis import input_pb2

    records = []
    for qid, docids, features in lists:
        values = np.asarray(features, np.float32)
        if values.shape != (len(docids), num_features):
            raise ValueError(
                f"list {qid}: features of shape {values.shape}, expected "
                f"({len(docids)}, {num_features}) for {len(docids)} docids"
            )
        elwc = input_pb2.ExampleListWithContext()
        elwc.context.features.feature["qid"].int64_list.value.append(int(qid))
        for vector in values:
            elwc.examples.add().features.feature[FEATURES].float_list.value.extend(vector.tolist())
        records.append(elwc.SerializeToString())
    return records


def letor_lists(path: str, num_features: int) -> Iterator[FeatureList]:
    """``(qid, docids, [n, d] raw features)`` per query of a LETOR file (or ``.gz``), read lazily;
    docids from ``#docid = ...``, else line numbers; an omitted feature reads 0."""
    qid, docids, rows = None, [], []
    with (gzip.open if path.endswith(".gz") else open)(path, "rt", encoding="utf-8") as f:
        for number, line in enumerate(f, start=1):
            fields, _, comment = line.partition("#")
            cells = fields.split()
            if not cells:
                continue
            row = np.zeros(num_features, np.float32)
            try:
                if not cells[1].startswith("qid:"):
                    raise ValueError("the second field is not qid:N")
                line_qid = int(cells[1][4:])
                for cell in cells[2:]:
                    index, value = cell.split(":")
                    if not 1 <= int(index) <= num_features:
                        raise ValueError(f"feature {index} is outside 1..{num_features}")
                    row[int(index) - 1] = float(value)
            except (ValueError, IndexError) as e:
                raise ValueError(f"{path}:{number}: not a LETOR line ({e})") from None
            if line_qid != qid and docids:
                yield qid, docids, np.stack(rows)
                docids, rows = [], []
            qid = line_qid
            found = re.search(r"docid\s*=\s*(\S+)", comment)
            docids.append(found.group(1) if found else str(number))
            rows.append(row)
    if docids:
        yield qid, docids, np.stack(rows)


def padded_tensors(
    lists: Sequence[FeatureList], num_features: int
) -> tuple[np.ndarray, np.ndarray]:
    """``lists`` padded to the longest: ``features [B, L, d]`` float32, ``mask [B, L]`` bool."""
    width = max((len(docids) for _, docids, _ in lists), default=0)
    features = np.zeros((len(lists), width, num_features), np.float32)
    mask = np.zeros((len(lists), width), bool)
    for i, (_, docids, values) in enumerate(lists):
        features[i, : len(docids)] = values
        mask[i, : len(docids)] = True
    return features, mask


def _array(value) -> np.ndarray:
    """``value`` as numpy, strings as ``bytes`` objects (an ``S`` array drops trailing zeros)."""
    if isinstance(value, tf.Tensor):
        value = value.numpy()
    array = np.asarray(value)
    if array.dtype.kind in "SU":
        array = np.asarray(value, dtype=object)
    return array


def _to_json(value):
    if isinstance(value, list):
        return [_to_json(v) for v in value]
    if isinstance(value, bytes):
        return {"b64": base64.b64encode(value).decode("ascii")}
    return value


def _from_json(value):
    if isinstance(value, list):
        return [_from_json(v) for v in value]
    if isinstance(value, dict) and set(value) == {"b64"}:
        return base64.b64decode(value["b64"])
    return value


def rest_body(inputs: Mapping[str, object], *, signature_name: str, form: str) -> dict:
    """The JSON body of a REST ``:predict`` request in ``form`` ``instances`` (rows; the value
    itself for one input) or ``inputs`` (one array per input name)."""
    if form not in REST_FORMS:
        raise ValueError(f"Unknown REST form {form!r}; choose from {list(REST_FORMS)}")
    columns = {name: _to_json(_array(value).tolist()) for name, value in inputs.items()}
    if form == "inputs":
        return {"signature_name": signature_name, "inputs": columns}
    if len(columns) == 1:
        return {"signature_name": signature_name, "instances": next(iter(columns.values()))}
    sizes = {name: len(column) for name, column in columns.items()}
    if len(set(sizes.values())) != 1:
        raise ValueError(f"the row form needs one batch size for every input, got {sizes}")
    rows = [dict(zip(columns, values)) for values in zip(*columns.values())]
    return {"signature_name": signature_name, "instances": rows}


def rest_elwc_body(
    records: Sequence[bytes], *, form: str = "instances", signature_name: str = SIGNATURE_ELWC
) -> dict:
    """The REST body scoring serialized ELWC ``records`` through ``serving_default``.

    >>> rest_elwc_body([b"\\x0a\\x00"])
    {'signature_name': 'serving_default', 'instances': [{'b64': 'CgA='}]}
    >>> rest_elwc_body([b"\\x0a\\x00"], form="inputs")["inputs"]
    {'examples': [{'b64': 'CgA='}]}
    """
    return rest_body(_elwc_inputs(records), signature_name=signature_name, form=form)


def rest_tensor_body(
    features: np.ndarray,
    mask: np.ndarray,
    *,
    form: str = "inputs",
    signature_name: str = SIGNATURE_TENSORS,
) -> dict:
    """The REST body scoring ``features [B, L, d]`` and ``mask [B, L]``."""
    return rest_body(_tensor_inputs(features, mask), signature_name=signature_name, form=form)


def _elwc_inputs(records: Sequence[bytes]) -> dict:
    return {EXAMPLES: np.asarray(list(records), dtype=object)}


def _tensor_inputs(features, mask) -> dict:
    return {FEATURES: np.asarray(features, np.float32), MASK: np.asarray(mask, bool)}


def rest_outputs(response: Mapping) -> dict[str, np.ndarray]:
    """The outputs of a REST ``:predict`` answer by name, from ``predictions`` (rows) or
    ``outputs`` (columns); a signature's only output, left unnamed by TF Serving, is ``scores``.

    >>> rest_outputs({"predictions": [{"scores": [1.0, 2.0], "expected_list_label": 0.5}]})
    {'scores': array([[1., 2.]]), 'expected_list_label': array([0.5])}
    >>> rest_outputs({"outputs": [[1.0, 2.0]]})
    {'scores': array([[1., 2.]])}
    """
    if "error" in response:
        raise ValueError(f"TF Serving answered with an error: {response['error']}")
    if "predictions" in response:
        rows = response["predictions"]
        if rows and all(isinstance(row, dict) and set(row) != {"b64"} for row in rows):
            return {name: _output([row[name] for row in rows]) for name in rows[0]}
        return {_SINGLE_OUTPUT: _output(rows)}
    if "outputs" in response:
        outputs = response["outputs"]
        if isinstance(outputs, dict) and set(outputs) != {"b64"}:
            return {name: _output(value) for name, value in outputs.items()}
        return {_SINGLE_OUTPUT: _output(outputs)}
    raise ValueError(
        f"a REST predict answer holds 'predictions' or 'outputs', got keys {sorted(response)}"
    )


def _output(value) -> np.ndarray:
    value = first = _from_json(value)
    while isinstance(first, list) and first:
        first = first[0]
    return np.asarray(value, dtype=object if isinstance(first, bytes) else None)


def model_spec(
    model_name: str, *, version: int | None = None, version_label: str | None = None
) -> model_pb2.ModelSpec:
    """The ``ModelSpec`` naming a served model and a version or label (``None``: the newest)."""
    from tensorflow_serving.apis import model_pb2

    spec = model_pb2.ModelSpec(name=model_name)
    if version is not None:
        spec.version.value = version
    if version_label is not None:
        spec.version_label = version_label
    return spec


def predict_request(
    inputs: Mapping[str, object],
    *,
    model_name: str,
    signature_name: str,
    version: int | None = None,
    version_label: str | None = None,
) -> predict_pb2.PredictRequest:
    """A gRPC ``PredictRequest``: ``model_spec`` and each input as a ``TensorProto``."""
    from tensorflow_serving.apis import predict_pb2

    spec = model_spec(model_name, version=version, version_label=version_label)
    request = predict_pb2.PredictRequest(model_spec=spec)
    request.model_spec.signature_name = signature_name
    for name, value in inputs.items():
        request.inputs[name].CopyFrom(tf.make_tensor_proto(_array(value)))
    return request


def grpc_elwc_request(
    records: Sequence[bytes], *, model_name: str, signature_name: str = SIGNATURE_ELWC, **spec
) -> predict_pb2.PredictRequest:
    """A ``PredictRequest`` scoring ELWC ``records``; ``spec``: ``version`` or ``version_label``."""
    inputs = _elwc_inputs(records)
    return predict_request(inputs, model_name=model_name, signature_name=signature_name, **spec)


def grpc_tensor_request(
    features: np.ndarray,
    mask: np.ndarray,
    *,
    model_name: str,
    signature_name: str = SIGNATURE_TENSORS,
    **spec,
) -> predict_pb2.PredictRequest:
    """A ``PredictRequest`` scoring ``features [B, L, d]`` and ``mask [B, L]``."""
    inputs = _tensor_inputs(features, mask)
    return predict_request(inputs, model_name=model_name, signature_name=signature_name, **spec)


def grpc_outputs(response: predict_pb2.PredictResponse) -> dict[str, np.ndarray]:
    """The outputs of a ``PredictResponse``, by name."""
    return {name: tf.make_ndarray(proto) for name, proto in response.outputs.items()}


def list_scores(outputs: Mapping[str, np.ndarray], lengths: Sequence[int]) -> list[np.ndarray]:
    """Each list's scores, padding dropped: ``scores [B, L]`` -> ``B`` arrays ``[n_i]``.

    >>> list_scores({"scores": np.array([[0.5, -1e9], [0.25, 0.75]])}, [1, 2])
    [array([0.5]), array([0.25, 0.75])]
    """
    scores = np.asarray(outputs[_SINGLE_OUTPUT])
    if scores.ndim != 2 or len(scores) != len(lengths):
        raise ValueError(
            f"the answer's scores have shape {scores.shape}, expected {len(lengths)} lists"
        )
    return [scores[i, :n] for i, n in enumerate(lengths)]
