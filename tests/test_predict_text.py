"""tfr-predict with a Listformer export: a text dataset re-ranked into a TREC run."""

from __future__ import annotations

import collections
import os

import numpy as np
import pytest
import tensorflow as tf

from pipelines.export_cli import main as export_main
from pipelines.predict_cli import main as predict_main
from tfrecords_tools.text.text_elwc import read_text_split


@pytest.fixture(scope="module")
def text_run(text_experiment, tmp_path_factory):
    """The experiment's Listformer run (synthetic text), exported by tfr-export."""
    output, results = text_experiment
    run = next(r for r in results["runs"] if r["model"].startswith("listformer"))
    model_dir = run["run_dir"]
    assert export_main(["--model-dir", model_dir]) == 0
    return os.path.join(output, "data"), model_dir, tmp_path_factory.mktemp("predict_text")


def _run_lines(path):
    with open(path, encoding="utf-8") as f:
        return [line.split() for line in f]


def test_reranks_the_test_lists_with_their_own_ids(text_run):
    data, model_dir, root = text_run
    output = str(root / "rerank.txt")
    assert predict_main(["--model", model_dir, "--input", data, "--output", output]) == 0
    lists = list(read_text_split(data, "test"))
    lines = _run_lines(output)
    assert len(lines) == sum(len(t.document_ids) for t in lists)
    by_query = collections.defaultdict(list)
    for qid, q0, docid, rank, score, tag in lines:
        assert q0 == "Q0" and tag == "tfr-rankformer"
        by_query[qid].append((int(rank), docid, float(score)))
    assert set(by_query) == {t.query_id for t in lists}
    export = tf.saved_model.load(os.path.join(model_dir, "export", "1"))
    for text_list in lists[:2]:
        ranked = sorted(by_query[text_list.query_id])
        assert [r for r, _, _ in ranked] == list(range(1, len(text_list.document_ids) + 1))
        assert sorted(d for _, d, _ in ranked) == sorted(text_list.document_ids)
        scores = [s for _, _, s in ranked]
        assert scores == sorted(scores, reverse=True)
        # The scores are the export's on the same strings, one list at a time.
        direct = export.signatures["serving_default"](
            query=tf.constant([" ".join(text_list.query_tokens)]),
            documents=tf.constant([[" ".join(d) for d in text_list.document_tokens]]),
        )["scores"].numpy()[0]
        written = dict((d, s) for _, d, s in ranked)
        expected = [written[d] for d in text_list.document_ids]
        np.testing.assert_allclose(expected, direct, atol=2e-5)


def test_a_new_process_loads_the_raw_string_export(text_run):
    # In this process TF Text's ops are registered by the export above; a user's
    # tfr-predict starts without them.
    import subprocess
    import sys

    data, model_dir, tmp = text_run
    output = str(tmp / "fresh.trec")
    command = [sys.executable, "-m", "pipelines.predict_cli", "--model", model_dir]
    command += ["--input", data, "--output", output, "--no-progress"]
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"}
    done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "export/" in done.stdout and len(_run_lines(output)) > 0


def test_kinds_of_model_and_data_must_match(text_run, dataset, tiny_servables, capsys):
    data, model_dir, root = text_run
    output = str(root / "wrong.txt")
    numeric = os.path.join(dataset, "test-00000-of-00001.tfrecord")
    assert predict_main(["--model", model_dir, "--input", numeric, "--output", output]) == 1
    assert "is a Listformer export: --input must be a text dataset" in capsys.readouterr().err
    from tfr_rankformer.core.run_layout import is_text_run

    numeric_export = tiny_servables["reject"]
    assert is_text_run(os.path.join(model_dir, "export", "1"))
    assert not is_text_run(numeric_export)
    assert predict_main(["--model", numeric_export, "--input", data, "--output", output]) == 1
    assert "holds text lists: score it with a Listformer export" in capsys.readouterr().err
    assert not os.path.exists(output) and not os.path.exists(output + ".partial")


# === Through a running TF Serving (the stand-in) ===


def _scores(path) -> dict:
    return {(qid, docid): float(score) for qid, _, docid, _, score, _ in _run_lines(path)}


@pytest.fixture(scope="module")
def local_scores(text_run) -> dict:
    """The run dir's own export's scores of the test lists, which every served one must equal."""
    data, model_dir, root = text_run
    local = str(root / "local.txt")
    assert predict_main(["--model", model_dir, "--input", data, "--output", local]) == 0
    return _scores(local)


@pytest.mark.parametrize(
    "export, protocol",
    [("export_token_ids", "rest"), ("export_token_ids", "grpc"), ("export", "rest")],
)
def test_a_served_listformer_reranks_as_the_local_export(
    text_run, local_scores, capsys, export, protocol
):
    from tests.tf_serving_fakes import FakeModel, serve_grpc, serve_rest
    from tfr_rankformer.text.text_tokenizer import register_text_ops

    data, model_dir, root = text_run
    served = root / f"{export}-{protocol}.txt"
    register_text_ops()  # the stand-in loads the raw-string export in this process
    fake = FakeModel(os.path.join(model_dir, export), "rerank")  # the latest version
    serve = serve_rest if protocol == "rest" else serve_grpc
    with serve(fake) as where:
        url = f"{where}/v1/models/rerank" if protocol == "rest" else f"grpc://{where}/rerank"
        command = ["--server", url, "--input", data, "--output", str(served)]
        if export == "export_token_ids":
            assert predict_main(command) == 1  # the client needs the export's tokenizer
            assert "serves a token-id export: give its" in capsys.readouterr().err
            command += ["--tokenizer", model_dir]
        assert predict_main(command) == 0
    expected, got = local_scores, _scores(served)
    assert got.keys() == expected.keys() and len(got) > 0
    np.testing.assert_allclose([got[k] for k in expected], list(expected.values()), atol=1e-5)


def test_an_empty_batch_gives_empty_outputs_through_every_text_signature(text_run):
    from tfr_rankformer.text.text_tokenizer import register_text_ops

    _, model_dir, _ = text_run
    register_text_ops()

    def latest(name):
        root = os.path.join(model_dir, name)
        version = max(os.listdir(root), key=int)
        return tf.saved_model.load(os.path.join(root, version)).signatures

    text, ids = latest("export"), latest("export_token_ids")
    answers = [
        text["serving_default"](
            query=tf.zeros([0], tf.string), documents=tf.zeros([0, 0], tf.string)
        ),
        text["predict_examples"](examples=tf.zeros([0], tf.string)),
        ids["serving_default"](
            query_ids=tf.zeros([0, 1], tf.int32),
            document_ids=tf.zeros([0, 0, 1], tf.int32),
            document_mask=tf.zeros([0, 0], tf.bool),
        ),
    ]
    for outputs in answers:
        assert outputs["scores"].shape[0] == 0
