"""The invalid-item policies of the exported signatures, through tfr-predict and directly."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf
from tensorflow_serving.apis import input_pb2  # noqa: E402

from pipelines.predict_cli import main as predict_main  # noqa: E402
from tfr_rankformer.core.elwc_schema import MASK
from tfr_rankformer.serving.export import INVALID_ITEMS, export_run  # noqa: E402
from tfr_rankformer.serving.serving_checks import check_policy  # noqa: E402
from tfr_rankformer.serving.serving_requests import SIGNATURE_TENSORS  # noqa: E402


def _shard(path, lists) -> str:
    """One ELWC record per list of items (``None``: an item without features)."""
    with tf.io.TFRecordWriter(str(path)) as writer:
        for qid, items in enumerate(lists, start=1):
            elwc = input_pb2.ExampleListWithContext()
            elwc.context.features.feature["qid"].int64_list.value.append(qid)
            for values in items:
                feature = elwc.examples.add().features.feature
                if values is not None:
                    feature["features"].float_list.value.extend(values)
            writer.write(elwc.SerializeToString())
    return str(path)


def test_score_last_export_ranks_bad_items_last_and_tfr_predict_counts_them(
    tiny_servables, tmp_path, capsys
):
    lists = [[[0.1, 0.2, 0.3], None, [0.5, float("nan"), 0.1], [0.9, 0.8, 0.7]], [[1, 2, 3]]]
    shard = _shard(tmp_path / "in.tfrecord", lists)
    out = tmp_path / "run.txt"
    argv = ["--input", shard, "--output", str(out), "--no-progress"]

    assert predict_main(["--model", tiny_servables["score-last"], *argv]) == 0

    printed = capsys.readouterr().out
    assert "2 items could not be scored" in printed
    rows = [line.split() for line in out.read_text().splitlines()]
    first = [r for r in rows if r[0] == "1"]
    # Items 2 and 3 (docids by position) rank last with the padding score.
    assert [r[2] for r in first[-2:]] == ["2", "3"]
    assert all(float(r[4]) == -1e9 for r in first[-2:])
    assert all(float(r[4]) > -1e8 for r in first[:2])


def test_reject_export_fails_the_same_input_and_writes_nothing(tiny_servables, tmp_path, capsys):
    shard = _shard(tmp_path / "in.tfrecord", [[[0.1, 0.2, 0.3]], [[0.1, 0.2, 0.3], None]])
    out = tmp_path / "run.txt"
    argv = ["--input", shard, "--output", str(out), "--no-progress"]

    assert predict_main(["--model", tiny_servables["reject"], *argv]) == 1

    err = capsys.readouterr().err
    assert f"{shard}: record 2: item 1: the features field is missing (0 values), expected 3" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.tfrecord"]


def test_padding_items_may_hold_anything_in_the_tensor_signature(tiny_servables):
    signature = tf.saved_model.load(tiny_servables["reject"]).signatures[SIGNATURE_TENSORS]
    features = np.ones((1, 3, 3), np.float32)
    mask = np.array([[True, True, False]])
    clean = signature(features=tf.constant(features), mask=tf.constant(mask))["scores"].numpy()
    features[0, 2] = [np.nan, np.inf, -np.inf]

    dirty = signature(features=tf.constant(features), mask=tf.constant(mask))["scores"].numpy()

    np.testing.assert_array_equal(clean, dirty)
    assert INVALID_ITEMS not in signature.structured_outputs


def test_unknown_policies_are_refused_before_anything_is_loaded(tmp_path):
    assert check_policy("score-last") == "score-last"
    with pytest.raises(ValueError, match="Unknown invalid-item policy 'drop'"):
        export_run(str(tmp_path), invalid_items="drop")


def _parsed_features(lists, d):
    """The ELWC signature's sparse ``features`` of ``lists`` (each ``[n, w]`` values)."""
    import tensorflow_ranking as tfr

    from tfr_rankformer.core import elwc_schema

    serialized = []
    for items in lists:
        elwc = input_pb2.ExampleListWithContext()
        for values in items:
            example = elwc.examples.add()
            example.features.feature[elwc_schema.FEATURES].float_list.value.extend(values)
        serialized.append(elwc.SerializeToString())
    parsed = tfr.data.parse_from_example_list(
        tf.constant(serialized),
        list_size=None,
        context_feature_spec={},
        example_feature_spec={elwc_schema.FEATURES: tf.io.VarLenFeature(tf.float32)},
        mask_feature_name=MASK,
    )
    return parsed[elwc_schema.FEATURES]


@pytest.mark.parametrize(
    "shape",
    [
        "one full list",
        "full lists of one length",
        "lists of two lengths",
        "a short and a long item",
    ],
)
def test_dense_features_take_the_values_as_they_are_only_when_every_item_is_full(shape):
    from tfr_rankformer.serving.serving_checks import dense_features, item_lengths

    d, rng = 3, np.random.default_rng(0)
    full = {
        "one full list": [rng.normal(size=(5, d))],
        "full lists of one length": [rng.normal(size=(4, d)), rng.normal(size=(4, d))],
        "lists of two lengths": [rng.normal(size=(4, d)), rng.normal(size=(2, d))],
    }
    # Totals that match B x L x d but items that do not: the values must not shift.
    lists = full.get(shape) or [[[1.0, 2.0], [3.0, 4.0, 5.0, 6.0], [7.0, 8.0, 9.0]]]
    sparse = _parsed_features(lists, d)
    expected = dense_features(sparse, d).numpy()  # the scatter, always right
    got = dense_features(sparse, d, item_lengths(sparse)).numpy()
    np.testing.assert_array_equal(got, expected)
    if shape in full:
        for b, items in enumerate(lists):
            np.testing.assert_allclose(got[b, : len(items)], items, rtol=1e-6)
