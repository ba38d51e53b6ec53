"""The Listformer's token-id export: no TF Text op, loaded and scored in a process that
never imports tensorflow_text, tokenised by the client tokenizer (HF tokenizers)."""

from __future__ import annotations

import contextlib
import io
import json
import os
import random
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf
from tensorflow.core.protobuf import saved_model_pb2

from pipelines.export_cli import main as export_main
from pipelines.predict_cli import main as predict_main
from tests.bert_checkpoints import CASED, SAMPLES, UNCASED, write_checkpoint
from tests.test_listformer_training import SMALL, write_text_lists
from tfr_rankformer.serving.client_tokenizer import ClientTokenizer
from tfr_rankformer.text.text_tokenizer import TextTokenizer, build_vocabulary, count_words

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CRANFIELD = os.path.join(os.path.dirname(ROOT), "shared", "data", "cranfield")

QUERIES = ["what is apple", "Golf?! HOTEL-india", " "]
DOCUMENTS = [
    ["apple apple banana", "Cherry, delta; (echo)", "apple " * 12, "unknownword xyzzy"],
    ["golf fox", "Café naïve golf", "中文 golf 日本"],
    ["", "fox"],
]  # lists of different lengths; "" is a padding document; "apple " * 12 is cut at 8

# Text of every kind the tokenizers split: punctuation, accents, CJK, white space of
# several kinds, control and format characters, case that lower-cases oddly.
_POOL = (
    list("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789") * 3
    + list(".,!?'-():;$#@%^&*_+=<>[]{}|~`\"/\\")
    + list("éèàçñüößÉÀÇÑÜẞ\u0301中文字日本語한국어ｈｅｌｌｏＡΣσςİıﬁǅⅫ")
    + [" "] * 10
    + list("\t\n\r\x0b\x0c\x1c\x1f\x85\xa0\u1680\u2009\u200b\u2028\u3000")
    + list("\x00\x01\x7f\u00ad\u200d\ufeff\ufffd\ue000")
    + ["😀", "\u2019", "«", "¿", "€", "°", "©"]
)


def _random_texts(count: int, seed: int = 0) -> list[str]:
    rng = random.Random(seed)
    return ["".join(rng.choice(_POOL) for _ in range(rng.randint(0, 30))) for _ in range(count)]


EDGE_TEXTS = [
    "",
    " \t\n",
    "a" * 100,  # 100 bytes: still split into pieces
    "a" * 101,  # over 100 bytes: one [UNK]
    "é" * 50,  # 100 bytes; TF Text cuts a word at 100 bytes, the client at 100 characters
    "Hello,World!!...",
    "ΣΑΣ ὈΔΥΣΣΕΎΣ",  # Greek final sigma
    "a\x00b",  # tf.strings.lower ends the text at a NUL
    *SAMPLES,
]


# === The client tokenizer against the in-graph one ===


def _scratch_tokenizers():
    texts = [*EDGE_TEXTS, *_random_texts(200, seed=1)]
    printable = ("".join(c for c in t if c.isprintable()) for t in texts)
    vocabulary = build_vocabulary(count_words(printable), size=400)
    caps = {"max_query_tokens": 5, "max_document_tokens": 7}
    return TextTokenizer(vocabulary, **caps), ClientTokenizer(vocabulary, **caps)


def _checkpoint_tokenizers(tmp_path, vocabulary):
    from tfr_rankformer.text.bert_checkpoint import read_bert_checkpoint
    from tfr_rankformer.text.listformer_checkpoint import checkpoint_tokenizer

    write_checkpoint(tmp_path / "bert", vocabulary=vocabulary)
    checkpoint = read_bert_checkpoint(str(tmp_path / "bert"))
    graph = checkpoint_tokenizer(checkpoint, max_query_tokens=5, max_document_tokens=7)
    client = ClientTokenizer(
        list(checkpoint.vocabulary),
        max_query_tokens=5,
        max_document_tokens=7,
        lower_case=graph.lower_case,
        basic_tokenization=graph.basic_tokenization,
    )
    return graph, client


@pytest.mark.parametrize("setup", ["scratch", "bert-uncased", "bert-cased"])
def test_client_tokenizer_gives_the_in_graph_ids(tmp_path, setup):
    if setup == "scratch":
        graph, client = _scratch_tokenizers()
    else:
        vocabulary = UNCASED if setup == "bert-uncased" else CASED
        graph, client = _checkpoint_tokenizers(tmp_path, vocabulary)
        assert graph.basic_tokenization and graph.lower_case is (setup == "bert-uncased")
    texts = [*EDGE_TEXTS, *_random_texts(400)]
    want = graph.token_ids(tf.constant(texts)).to_list()
    assert [client.token_ids(t) for t in texts] == want
    assert any(client.unknown_id in ids for ids in want) and any(len(ids) > 7 for ids in want)
    # Whole batches: cut at the caps, padded with -1, empty documents masked.
    documents = [texts[i : i + 4] for i in range(0, 40, 4)]
    documents[0][1] = ""
    encoded = graph.encode(tf.constant(texts[40:50]), tf.constant(documents))
    mine = client.encode(texts[40:50], documents)
    np.testing.assert_array_equal(mine["query_ids"], encoded["query_ids"].numpy())
    np.testing.assert_array_equal(mine["document_ids"], encoded["document_ids"].numpy())
    assert mine["document_mask"] == [[d != "" for d in texts] for texts in documents]


@pytest.mark.skipif(not os.path.isdir(CRANFIELD), reason=f"no Cranfield collection at {CRANFIELD}")
@pytest.mark.parametrize("basic_tokenization", [False, True])
def test_client_tokenizer_gives_the_in_graph_ids_on_cranfield(basic_tokenization):
    texts = []
    with open(os.path.join(CRANFIELD, "collection.tsv"), encoding="utf-8") as f:
        texts += [text for line in f for text in line.rstrip("\n").split("\t")[1:]]
    with open(os.path.join(CRANFIELD, "queries.tsv"), encoding="utf-8") as f:
        texts += [line.rstrip("\n").split("\t", 1)[1] for line in f]
    assert len(texts) == 2 * 1400 + 225
    vocabulary = build_vocabulary(count_words(texts), size=3000)
    caps = {"max_query_tokens": 32, "max_document_tokens": 256}
    caps["basic_tokenization"] = basic_tokenization
    graph, client = TextTokenizer(vocabulary, **caps), ClientTokenizer(vocabulary, **caps)
    want = graph.token_ids(tf.constant(texts)).to_list()
    assert client.token_ids_batch(texts) == want
    assert sum(ids.count(client.unknown_id) for ids in want) == 0  # every word splits
    assert sum(len(ids) for ids in want) > 100_000


def test_client_tokenizer_pads_ragged_lists_and_imports_no_tensorflow():
    vocabulary = ["[PAD]", "[UNK]", "a", "##b"]
    client = ClientTokenizer(vocabulary, max_query_tokens=2, max_document_tokens=3)
    encoded = client.encode(["", "ab ab ab"], [["ab"], ["", "abab a a a", "zz"]])
    none = [-1, -1, -1]
    assert encoded == {
        "query_ids": [[-1, -1], [2, 3]],
        "document_ids": [[[2, 3, -1], none, none], [none, [1, 2, 2], [1, -1, -1]]],
        "document_mask": [[True, False, False], [False, True, True]],
    }
    code = "import sys, tfr_rankformer.serving.client_tokenizer; print('tensorflow' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert done.returncode == 0 and done.stdout.strip() == "False", done.stderr


def test_a_checkpoint_models_token_id_export_scores_as_its_in_graph_tokenizer(tmp_path):
    from tfr_rankformer.model.model_config import ModelConfig
    from tfr_rankformer.text.listformer_checkpoint import listformer_from_checkpoint
    from tfr_rankformer.text.text_export import save_token_id_servable
    from tfr_rankformer.text.text_runs import text_model_inputs

    write_checkpoint(tmp_path / "bert", vocabulary=UNCASED)
    pretrained = listformer_from_checkpoint(
        str(tmp_path / "bert"), ModelConfig(), 2, max_query_tokens=6, max_document_tokens=9
    )
    path = str(tmp_path / "export_token_ids")
    save_token_id_servable(
        pretrained.model, pretrained.tokenizer, pretrained.vocabulary, path, list_head=True
    )
    client = ClientTokenizer.from_export(path)
    assert client.basic_tokenization and client.lower_case
    queries = ["Hello, World!", "Café naïve?"]
    documents = [SAMPLES[:3], [SAMPLES[3], SAMPLES[7], ""]]
    inputs = client.encode(queries, documents)
    signature = tf.saved_model.load(path).signatures["serving_default"]
    served = signature(**{k: tf.constant(v) for k, v in inputs.items()})
    batch = {
        "query": tf.constant(queries),
        "documents": tf.constant(documents),
        "mask": tf.constant(inputs["document_mask"]),
    }
    in_graph = text_model_inputs(pretrained.tokenizer, batch)
    want = pretrained.model(in_graph, training=False)
    np.testing.assert_allclose(served["scores"], want["scores"], rtol=1e-5, atol=1e-5)
    probs = tf.sigmoid(want["list_quality"])
    np.testing.assert_allclose(served["list_probs"], probs, rtol=1e-5, atol=1e-5)


# === The exports of a trained run ===


@pytest.fixture(scope="module")
def text_run(tmp_path_factory):
    """A tiny Listformer with a list head, trained one epoch; tfr-train's own export."""
    from pipelines.train_cli import main as train_main

    root = tmp_path_factory.mktemp("token_ids")
    data = write_text_lists(str(root / "text"), lists=(("train", 16), ("test", 4)))
    model_dir = str(root / "run")
    flags = ["--model", "listformer", "--data", data, "--model-dir", model_dir, "--quiet"]
    flags += ["--epochs", "1", "--batch-size", "8", "--alpha", "1", "--loss", "softmax"]
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        assert train_main(flags + SMALL) == 0
    (root / "tfr-train.out").write_text(printed.getvalue(), encoding="utf-8")
    return model_dir


def _op_types(export: str) -> set[str]:
    """Every op type in the SavedModel's graph and functions (calls to its own
    functions left out)."""
    saved = saved_model_pb2.SavedModel()
    with open(os.path.join(export, "saved_model.pb"), "rb") as f:
        saved.ParseFromString(f.read())
    graph = saved.meta_graphs[0].graph_def
    functions = {f.signature.name for f in graph.library.function}
    ops = {node.op for node in graph.node}
    ops |= {node.op for f in graph.library.function for node in f.node_def}
    return ops - functions


def test_tfr_train_writes_both_exports_with_the_client_files(text_run):
    ids_export = os.path.join(text_run, "export_token_ids", "1")
    assert os.path.isfile(os.path.join(text_run, "export", "1", "saved_model.pb"))
    assert os.path.isfile(os.path.join(ids_export, "saved_model.pb"))
    extra = os.path.join(ids_export, "assets.extra")
    with open(os.path.join(extra, "vocab.txt"), encoding="utf-8") as f:
        vocabulary = f.read()
    with open(os.path.join(text_run, "vocab.txt"), encoding="utf-8") as f:
        assert vocabulary == f.read()
    with open(os.path.join(extra, "tokenizer.json"), encoding="utf-8") as f:
        settings = json.load(f)
    with open(os.path.join(text_run, "config.json"), encoding="utf-8") as f:
        caps = json.load(f)["text"]
    assert settings["max_query_tokens"] == caps["max_query_tokens"]
    assert settings["max_document_tokens"] == caps["max_document_tokens"] == 8
    assert settings["lower_case"] is True and settings["basic_tokenization"] is False
    assert settings["unknown_token"] == "[UNK]" and settings["padding_id"] == -1


# The TF Text ops TextTokenizer's graphs use (FastWordpieceTokenizer, BertTokenizer, NFD).
TF_TEXT_OPS = {
    "FastWordpieceTokenizeWithOffsets",
    "RegexSplitWithOffsets",
    "WordpieceTokenizeWithOffsets",
    "NormalizeUTF8",
}


def test_the_token_id_export_holds_no_tf_text_op(text_run):
    raw = _op_types(os.path.join(text_run, "export", "1"))
    ids = _op_types(os.path.join(text_run, "export_token_ids", "1"))
    assert {"FastWordpieceTokenizeWithOffsets", "StringLower", "ParseExampleV2"} <= raw
    assert not ids & TF_TEXT_OPS
    assert not {op for op in ids if "Tokenize" in op or "UTF8" in op}
    # The exact check, that core TensorFlow registers every op of the export, runs in a
    # process without tensorflow_text (below).


_FRESH_PROCESS = """
import json, sys
from tfr_rankformer.serving.client_tokenizer import ClientTokenizer
assert "tensorflow" not in sys.modules  # the client tokenizer needs no TensorFlow
import tensorflow as tf
from tensorflow.core.protobuf import saved_model_pb2
from tensorflow.python.framework import op_def_registry

ids_export, raw_export, queries, documents = json.loads(sys.argv[1])

def unregistered(export):
    saved = saved_model_pb2.SavedModel()
    with open(export + "/saved_model.pb", "rb") as f:
        saved.ParseFromString(f.read())
    graph = saved.meta_graphs[0].graph_def
    functions = {f.signature.name for f in graph.library.function}
    ops = {n.op for n in graph.node} | {n.op for f in graph.library.function for n in f.node_def}
    return sorted(op for op in ops - functions if op_def_registry.get(op) is None)

client = ClientTokenizer.from_export(ids_export)
inputs = client.encode(queries, documents)
signature = tf.saved_model.load(ids_export).signatures["serving_default"]
outputs = signature(
    query_ids=tf.constant(inputs["query_ids"], tf.int32),
    document_ids=tf.constant(inputs["document_ids"], tf.int32),
    document_mask=tf.constant(inputs["document_mask"], tf.bool),
)
result = {name: value.numpy().tolist() for name, value in outputs.items()}
result["unregistered"] = {"ids": unregistered(ids_export), "raw": unregistered(raw_export)}
try:
    tf.saved_model.load(raw_export)
    result["raw_load"] = "loaded"
except Exception as error:
    result["raw_load"] = f"{type(error).__name__}: {error}"
result["tensorflow_text"] = "tensorflow_text" in sys.modules
print(json.dumps(result))
"""


def _fresh_process(ids_export: str, raw_export: str) -> dict:
    argument = json.dumps([ids_export, raw_export, QUERIES, DOCUMENTS])
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
    done = subprocess.run(
        [sys.executable, "-c", _FRESH_PROCESS, argument],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_a_fresh_process_without_tf_text_scores_token_ids_as_the_raw_export(text_run):
    raw_export = os.path.join(text_run, "export", "1")
    ids_export = os.path.join(text_run, "export_token_ids", "1")
    fresh = _fresh_process(ids_export, raw_export)
    assert fresh["tensorflow_text"] is False
    assert fresh["unregistered"]["ids"] == []
    assert "FastWordpieceTokenizeWithOffsets" in fresh["unregistered"]["raw"]
    # The raw-string export does not load without TF Text's ops: why the second export.
    assert "FastWordpieceTokenizeWithOffsets" in fresh["raw_load"]
    width = max(len(d) for d in DOCUMENTS)
    padded = [d + [""] * (width - len(d)) for d in DOCUMENTS]
    serve = tf.saved_model.load(raw_export).signatures["serving_default"]
    want = serve(query=tf.constant(QUERIES), documents=tf.constant(padded))
    assert set(fresh) >= {"scores", "list_probs", "expected_list_label"}
    for name in ("scores", "list_probs", "expected_list_label"):
        np.testing.assert_allclose(fresh[name], want[name].numpy(), rtol=1e-5, atol=1e-5)
    assert np.array(fresh["scores"])[2, 0] < -1e8  # the padding document


def test_the_token_id_signature_cuts_at_the_caps_and_refuses_bad_ids(text_run):
    export = os.path.join(text_run, "export_token_ids", "1")
    signature = tf.saved_model.load(export).signatures["serving_default"]
    client = ClientTokenizer.from_export(export)
    inputs = client.encode(QUERIES[:1], DOCUMENTS[:1])
    ids = np.array(inputs["document_ids"], np.int32)
    mask = tf.constant(inputs["document_mask"])
    query = tf.constant(inputs["query_ids"], tf.int32)
    scores = signature(query_ids=query, document_ids=ids, document_mask=mask)["scores"]
    longer = np.concatenate([ids, np.full_like(ids, 5)], axis=-1)  # past the cap of 8
    cut = signature(query_ids=query, document_ids=longer, document_mask=mask)["scores"]
    np.testing.assert_allclose(cut.numpy(), scores.numpy(), rtol=1e-6, atol=1e-6)
    with pytest.raises(tf.errors.InvalidArgumentError, match="document_ids holds ids outside"):
        signature(query_ids=query, document_ids=ids + 10_000, document_mask=mask)
    with pytest.raises(tf.errors.InvalidArgumentError, match="document_mask must be"):
        signature(query_ids=query, document_ids=ids, document_mask=mask[:, :2])


def test_tfr_train_prints_both_exports(text_run):
    with open(os.path.join(os.path.dirname(text_run), "tfr-train.out"), encoding="utf-8") as f:
        printed = f.read()
    raw, ids = (os.path.join(text_run, name, "1") for name in ("export", "export_token_ids"))
    assert f"exported {raw} (raw text) and {ids} (token ids, no TF Text op)" in printed


def _predict(model: str, text_run: str, name: str, *flags: str) -> tuple[int, str]:
    output = os.path.join(os.path.dirname(text_run), name)
    data = os.path.join(os.path.dirname(text_run), "text")
    code = predict_main(["--model", model, "--input", data, "--output", output, *flags])
    return code, output


def _trec_run(path: str) -> tuple[list, np.ndarray]:
    with open(path, encoding="utf-8") as f:
        lines = [line.split() for line in f]
    return [(q, d, r, t) for q, _, d, r, _, t in lines], np.array([float(x[4]) for x in lines])


# The same path on both splits; the longer train split runs with the slow tests.
@pytest.mark.parametrize("split", [pytest.param("train", marks=pytest.mark.slow), "test"])
def test_tfr_predict_scores_alike_with_either_export(text_run, split, capsys):
    from tfr_rankformer.core.run_layout import is_text_run, is_token_id_export
    from tfr_rankformer.runner import load_served
    from tfr_rankformer.serving.prediction import resolve_export

    raw, ids = (os.path.join(text_run, name, "1") for name in ("export", "export_token_ids"))
    assert is_text_run(ids) and is_token_id_export(ids) and not is_token_id_export(raw)
    # A run directory still resolves to its raw-string export.
    assert resolve_export(text_run) == raw and load_served(text_run).tokenizer is None
    flags = ["--split", split, "--batch-size", "3", "--no-progress"]
    raw_code, raw_run = _predict(raw, text_run, f"raw-{split}.txt", *flags)
    code, run = _predict(ids, text_run, f"ids-{split}.txt", *flags)
    assert raw_code == code == 0 and f"with {ids}; wrote" in capsys.readouterr().out
    (want_lines, want), (lines, scores) = _trec_run(raw_run), _trec_run(run)
    assert len(lines) >= (20 if split == "train" else 10) and lines == want_lines
    np.testing.assert_allclose(scores, want, rtol=1e-5, atol=1e-5)


def test_tfr_predict_refuses_what_is_neither_export(text_run, capsys):
    for model in ("export_token_ids", "export", "checkpoints"):
        code, output = _predict(os.path.join(text_run, model), text_run, "neither.txt")
        assert code == 1 and not os.path.exists(output)
        err = capsys.readouterr().err
        assert "is neither an exported SavedModel nor a run with export/<version>/" in err


def test_tfr_export_writes_the_next_version_of_both(text_run, capsys):
    assert export_main(["--model-dir", text_run]) == 0
    out = capsys.readouterr().out
    assert os.path.join(text_run, "export", "2") in out
    assert os.path.join(text_run, "export_token_ids", "2") in out
    assert os.path.isfile(os.path.join(text_run, "export_token_ids", "2", "saved_model.pb"))
    assert export_main(["--model-dir", text_run, "--version", "2"]) == 1
    assert "never overwritten" in capsys.readouterr().err


def _computes_in_bf16(path: str) -> bool:
    saved = saved_model_pb2.SavedModel()
    with open(os.path.join(path, "saved_model.pb"), "rb") as f:
        saved.ParseFromString(f.read())
    return "DT_BFLOAT16" in str(saved.meta_graphs[0].graph_def)


def test_tfr_export_precision_bf16_writes_exports_that_compute_in_bfloat16(text_run, capsys):
    argv = ["--model-dir", text_run, "--version", "9", "--precision", "bf16"]
    assert export_main(argv) == 0
    capsys.readouterr()
    for name in ("export", "export_token_ids"):
        assert _computes_in_bf16(os.path.join(text_run, name, "9"))
        assert not _computes_in_bf16(os.path.join(text_run, name, "1"))  # float32, the default
