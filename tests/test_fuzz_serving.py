"""Fuzzing the serving signature with generated ELWC requests (Hypothesis).

Items are generated with their ``features`` field missing, empty, of any
length, of another type, or holding NaN/inf and float32's extremes, beside
other fields and contexts. A check written here decides what the signature
must do, and it must do exactly that:

* ``reject`` export: score when every item holds 3 finite values (the same
  scores as the raw-tensor signature), else fail with the named error for the
  first bad item;
* ``score-last`` export: score always, flag exactly the bad items in
  ``invalid_items``, give them the padding score, and give the other items the
  scores they get when the bad items are deleted from the request.

A field of another type is refused by the ELWC parser itself, whose message
names the field and both types.
"""

from __future__ import annotations

import math
import re

import numpy as np
import pytest
import tensorflow as tf
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from tensorflow_serving.apis import input_pb2  # noqa: E402

from tfr_rankformer.serving.export import INVALID_ITEMS  # noqa: E402
from tfr_rankformer.serving.serving_requests import SIGNATURE_ELWC, SIGNATURE_TENSORS  # noqa: E402

D = 3
PADDING = -1e9

_LOADED: dict = {}


def _signatures(path: str):
    if path not in _LOADED:
        _LOADED[path] = tf.saved_model.load(path).signatures
    return _LOADED[path]


float32s = st.floats(width=32)
finite32 = st.floats(width=32, allow_nan=False, allow_infinity=False)


@st.composite
def item(draw) -> tuple[str, list]:
    """``(kind, values)``: ``ok`` (d finite values), ``floats`` (any count, any float32),
    ``missing``, ``unset`` (a Feature with no list), ``int64`` or ``bytes``."""
    kind = draw(
        st.sampled_from(["ok"] * 6 + ["floats", "floats", "missing", "unset", "int64", "bytes"])
    )
    if kind == "ok":
        return kind, draw(st.lists(finite32, min_size=D, max_size=D))
    if kind == "floats":
        size = draw(st.one_of(st.just(D), st.integers(0, 2 * D)))
        return kind, draw(st.lists(float32s, min_size=size, max_size=size))
    if kind == "int64":
        return kind, draw(st.lists(st.integers(-(2**63), 2**63 - 1), min_size=D, max_size=D))
    if kind == "bytes":
        return kind, draw(st.lists(st.binary(max_size=4), min_size=1, max_size=D))
    return kind, []


@st.composite
def elwc_request(draw) -> list[list[tuple[str, list]]]:
    return draw(st.lists(st.lists(item(), max_size=5), min_size=1, max_size=3))


def _serialize(lists, extra_fields: bool = True) -> list[bytes]:
    records = []
    for items in lists:
        elwc = input_pb2.ExampleListWithContext()
        elwc.context.features.feature["qid"].int64_list.value.append(7)
        for kind, values in items:
            feature = elwc.examples.add().features.feature
            if extra_fields:
                feature["label"].float_list.value.append(1.0)
                feature["doc"].bytes_list.value.append(b"x")
            if kind in ("ok", "floats"):
                feature["features"].float_list.value.extend(values)
            elif kind == "int64":
                feature["features"].int64_list.value.extend(values)
            elif kind == "bytes":
                feature["features"].bytes_list.value.extend(values)
            elif kind == "unset":
                feature["features"].SetInParent()
        records.append(elwc.SerializeToString())
    return records


def _problem(kind: str, values: list) -> str | None:
    """The regex of what the signature must say of an item (after the list and item), or
    None if the item is valid."""
    if kind in ("missing", "unset") or (kind == "floats" and not values):
        return re.escape(f"the features field is missing (0 values), expected {D}")
    if len(values) != D:
        return re.escape(f"the features field holds {len(values)} values, expected {D}")
    bad = [j for j, v in enumerate(values) if not math.isfinite(v)]
    if bad:
        return f"the features field holds (?:nan|-?inf) at position {bad[0] + 1} of {D}"
    return None


def _expected_error(lists) -> str | None:
    """The regex of the message the reject export must raise, or None if it must score."""
    if any(kind in ("int64", "bytes") for items in lists for kind, _ in items):
        return r"Key: features.*Data types don't match"
    length_or_missing, nonfinite = [], []
    for b, items in enumerate(lists):
        for i, (kind, values) in enumerate(items):
            problem = _problem(kind, values)
            if problem is None:
                continue
            where = f"invalid input: list {b}, item {i}: "
            (nonfinite if "position" in problem else length_or_missing).append(where + problem)
    first = (length_or_missing or nonfinite or [None])[0]
    return first


def _dense(lists) -> tuple[np.ndarray, np.ndarray]:
    width = max(len(items) for items in lists)
    features = np.zeros((len(lists), width, D), np.float32)
    mask = np.zeros((len(lists), width), bool)
    for b, items in enumerate(lists):
        for i, (_, values) in enumerate(items):
            features[b, i] = values
            mask[b, i] = True
    return features, mask


FUZZ = dict(deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


def _assert_same_scores(a: np.ndarray, b: np.ndarray) -> None:
    """Equal up to float32 rounding at the scores' own scale: with raw features
    up to 1e9 (the normalisation's bound) the encoder's LayerNorm cancels large
    numbers, so two batch layouts differ in the last bits of the largest score."""
    scale = max(1.0, float(np.abs(a).max(initial=0.0)), float(np.abs(b).max(initial=0.0)))
    np.testing.assert_allclose(a, b, rtol=0, atol=1e-4 * scale)


@settings(**FUZZ)
@given(lists=elwc_request())
def test_reject_export_scores_valid_requests_and_names_the_first_bad_item(tiny_servables, lists):
    signatures = _signatures(tiny_servables["reject"])
    expected = _expected_error(lists)
    request = tf.constant(_serialize(lists))
    if expected is not None:
        event("rejected")
        with pytest.raises(tf.errors.InvalidArgumentError) as info:
            signatures[SIGNATURE_ELWC](examples=request)
        assert re.search(expected, info.value.message), (expected, info.value.message)
        return
    event("scored")
    scores = signatures[SIGNATURE_ELWC](examples=request)["scores"].numpy()
    features, mask = _dense(lists)
    by_tensor = signatures[SIGNATURE_TENSORS](
        features=tf.constant(features), mask=tf.constant(mask)
    )
    assert np.isfinite(scores[mask]).all()
    assert (scores[~mask] == PADDING).all()
    _assert_same_scores(scores[mask], by_tensor["scores"].numpy()[mask])


@settings(**FUZZ)
@given(lists=elwc_request())
def test_score_last_export_ranks_exactly_the_bad_items_last(tiny_servables, lists):
    if any(kind in ("int64", "bytes") for items in lists for kind, _ in items):
        return  # refused by the parser under every policy (see the test above)
    signatures = _signatures(tiny_servables["score-last"])
    out = signatures[SIGNATURE_ELWC](examples=tf.constant(_serialize(lists)))
    scores, invalid = out["scores"].numpy(), out[INVALID_ITEMS].numpy()
    for b, items in enumerate(lists):
        bad = [_problem(kind, values) is not None for kind, values in items]
        assert invalid[b, : len(items)].tolist() == bad
        assert not invalid[b, len(items) :].any()
        assert (scores[b, : len(items)][bad] == PADDING).all()
        kept = [it for it, is_bad in zip(items, bad) if not is_bad]
        if kept:
            event("some items kept")
            alone = signatures[SIGNATURE_ELWC](examples=tf.constant(_serialize([kept])))
            valid = scores[b, : len(items)][np.logical_not(bad)]
            _assert_same_scores(valid, alone["scores"].numpy()[0, : len(kept)])
