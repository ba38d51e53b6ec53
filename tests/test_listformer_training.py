"""The Listformer end to end: text ELWC in, training, export, serving raw strings."""

import csv
import json
import os

import numpy as np
import pytest
import tensorflow as tf
from tensorflow_serving.apis import input_pb2

from pipelines.train_cli import main as train_main

WORDS = ["apple", "banana", "cherry", "delta", "echo", "fox", "golf", "hotel", "india", "juliet"]


def _feature(values):
    if isinstance(values[0], int):
        return tf.train.Feature(int64_list=tf.train.Int64List(value=values))
    return tf.train.Feature(bytes_list=tf.train.BytesList(value=[v.encode() for v in values]))


def text_elwc(query: list[str], documents: list[list[str]], labels: list[int]) -> bytes:
    """One list in TF-Ranking's text layout (query_tokens, document_tokens, relevance)."""
    elwc = input_pb2.ExampleListWithContext()
    elwc.context.features.feature["query_tokens"].CopyFrom(_feature(query))
    for tokens, label in zip(documents, labels):
        example = elwc.examples.add()
        example.features.feature["document_tokens"].CopyFrom(_feature(tokens))
        example.features.feature["relevance"].CopyFrom(_feature([label]))
    return elwc.SerializeToString()


def write_text_lists(directory, *, lists=(("train", 48), ("vali", 12), ("test", 12)), seed=0):
    """Lists whose relevant documents share the query's word: learnable from the text."""
    rng = np.random.default_rng(seed)
    os.makedirs(directory, exist_ok=True)
    counts = {}
    for split, count in lists:
        with tf.io.TFRecordWriter(os.path.join(directory, f"{split}-00000-of-00001.tfrecord")) as w:
            for _ in range(count):
                topic = WORDS[rng.integers(len(WORDS))]
                size = int(rng.integers(3, 7))
                labels = [int(v) for v in rng.integers(0, 3, size)]
                labels[0] = max(labels[0], 1)
                documents = []
                for label in labels:
                    others = [w for w in WORDS if w != topic]
                    tokens = list(rng.choice(others, size=int(rng.integers(2, 6))))
                    tokens[:label] = [topic] * label  # two mentions: very relevant
                    documents.append([str(t) for t in rng.permutation(tokens)])
                w.write(text_elwc(["what", "is", topic], documents, labels))
        counts[split] = count
    manifest = {
        "kind": "text",
        "label_feature": "relevance",
        "query_feature": "query_tokens",
        "document_feature": "document_tokens",
        "splits": {s: {"num_lists": n} for s, n in counts.items()},
    }
    with open(os.path.join(directory, "manifest.json"), "w", encoding="utf-8") as f:
        json.dump(manifest, f)
    return directory


SMALL = [
    "--width", "16", "--num-layers", "1", "--num-heads", "2", "--ff-dim", "32",
    "--dropout", "0", "--vocab-size", "120", "--max-document-tokens", "8",
]  # fmt: skip


def _train(tmp_path, *extra, lists=(("train", 32), ("test", 12))):
    data = write_text_lists(str(tmp_path / "text"), lists=lists)
    model_dir = str(tmp_path / "run")
    flags = ["--model", "listformer", "--data", data, "--model-dir", model_dir, "--quiet"]
    assert train_main(flags + SMALL + ["--batch-size", "8", *extra]) == 0
    return model_dir


def _metrics(model_dir):
    with open(os.path.join(model_dir, "metrics.json"), encoding="utf-8") as f:
        return json.load(f)


def test_listformer_trains_on_text_elwc_with_loss_going_down(tmp_path):
    model_dir = _train(tmp_path, "--epochs", "3", "--learning-rate", "0.01", "--no-export")
    with open(os.path.join(model_dir, "history.csv"), encoding="utf-8") as f:
        losses = [float(row["loss"]) for row in csv.DictReader(f)]
    assert len(losses) == 3 and losses[-1] < losses[0]
    metrics = _metrics(model_dir)
    assert metrics["settings"]["loss"] == "approx_ndcg"
    assert metrics["test"]["num_lists"] == 12
    # Documents of up to 5 words fit in 8 tokens (every word is in the vocabulary).
    assert metrics["test"]["truncation"]["documents_cut"] == 0
    assert metrics["test"]["truncation"]["documents"] > 12
    assert metrics["training"]["train_scan"]["lists"] == 32


def test_caps_a_given_vocabulary_and_the_list_head(tmp_path):
    vocab = tmp_path / "vocab.txt"
    vocab.write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "what", "is", *WORDS]) + "\n")
    model_dir = _train(
        tmp_path, "--epochs", "1", "--no-export", "--max-document-tokens", "2",
        "--max-query-tokens", "2", "--vocab", str(vocab), "--alpha", "1", "--loss", "softmax",
        lists=(("train", 8), ("test", 4)),
    )  # fmt: skip
    with open(os.path.join(model_dir, "vocab.txt"), encoding="utf-8") as f:
        assert f.read() == vocab.read_text()
    metrics = _metrics(model_dir)
    assert "list_acc_t>=1" in metrics["test"]  # the AUC: every test list has t >= 1
    cut = metrics["test"]["truncation"]
    assert cut["queries_cut"] == 4  # "what is <topic>": 3 tokens each
    assert 0 < cut["documents_cut"] <= cut["documents"]
    # tfr-eval's library function reloads the run and finds the same figures.
    from tfr_rankformer.runner import evaluate as evaluate_run

    again = evaluate_run(model_dir, splits=["test"])["test"]
    assert json.dumps(again, sort_keys=True) == json.dumps(metrics["test"], sort_keys=True)


def _serve_inputs():
    query = tf.constant(["what is apple", "what is golf"])
    documents = tf.constant(
        [["apple apple banana", "cherry delta", "apple echo"], ["golf fox", "hotel india", ""]]
    )
    examples = tf.constant(
        [
            text_elwc(["what", "is", "apple"], [["apple", "apple", "banana"], ["cherry", "delta"],
                      ["apple", "echo"]], [0, 0, 0]),
            text_elwc(["what", "is", "golf"], [["golf", "fox"], ["hotel", "india"]], [0, 0]),
        ]
    )  # fmt: skip
    return query, documents, examples


def test_exported_listformer_scores_raw_strings(tmp_path):
    from tfr_rankformer.text.listformer import build_text_model
    from tfr_rankformer.text.listformer_config import ListformerConfig
    from tfr_rankformer.text.text_data import load_text_data
    from tfr_rankformer.text.text_export import save_text_servable
    from tfr_rankformer.text.text_runs import text_model_inputs
    from tfr_rankformer.text.text_tokenizer import SPECIAL_TOKENS, TextTokenizer
    from tfr_rankformer.training.text_config import TextConfig

    data = load_text_data(
        write_text_lists(str(tmp_path / "text"), lists=(("train", 2),)), TextConfig()
    )
    vocabulary = [*SPECIAL_TOKENS, "what", "is", *WORDS, "##a"]
    tokenizer = TextTokenizer(vocabulary, max_query_tokens=4, max_document_tokens=8)
    config = ListformerConfig(width=8, num_heads=2, ff_dim=16, num_layers=1, head_hidden=8)
    model = build_text_model("listformer", len(vocabulary), config, 2)
    path = str(tmp_path / "export")
    save_text_servable(model, tokenizer, data, path, list_head=True)
    loaded = tf.saved_model.load(path)
    query, documents, examples = _serve_inputs()
    served = loaded.signatures["serving_default"](query=query, documents=documents)
    scores = served["scores"].numpy()
    assert scores.shape == (2, 3) and served["list_probs"].shape == (2, 2)
    assert scores[1, 2] < -1e8  # the empty string is a padding document
    batch = {"query": query, "documents": documents, "mask": tf.not_equal(documents, "")}
    in_memory = model(text_model_inputs(tokenizer, batch), training=False)["scores"].numpy()
    np.testing.assert_allclose(scores, in_memory, rtol=1e-5, atol=1e-5)
    # The same lists as text ELWC through the other signature give the same scores.
    from_examples = loaded.signatures["predict_examples"](examples=examples)["scores"].numpy()
    np.testing.assert_allclose(from_examples, scores, rtol=1e-5, atol=1e-5)
    # Computing in bf16 (as export_text_run's precision bf16 builds it), close to float32.
    from tfr_rankformer.training.precision import precision_policy

    with precision_policy("bf16"):
        bf16 = build_text_model("listformer", len(vocabulary), config, 2)
    bf16.set_weights(model.get_weights())
    save_text_servable(bf16, tokenizer, data, path + "_bf16", list_head=True)
    served = tf.saved_model.load(path + "_bf16").signatures["serving_default"]
    low = served(query=query, documents=documents)["scores"]
    assert low.dtype == tf.float32 and low[1, 2] < -1e8
    np.testing.assert_allclose(low[:, :2], scores[:, :2], atol=0.05 * np.abs(scores[:, :2]).max())


@pytest.mark.slow
def test_tfr_train_exports_a_listformer_that_serves_strings(tmp_path):
    model_dir = _train(tmp_path, "--epochs", "2")
    export = os.path.join(model_dir, "export", "1")
    # And the token-id export beside it (tests/test_text_token_id_export.py).
    assert os.path.isfile(os.path.join(model_dir, "export_token_ids", "1", "saved_model.pb"))
    loaded = tf.saved_model.load(export)
    query, documents, _ = _serve_inputs()
    scores = loaded.signatures["serving_default"](query=query, documents=documents)["scores"]
    from tfr_rankformer.text.text_runs import load_text_run, text_model_inputs

    _, tokenizer, model, _ = load_text_run(model_dir)
    batch = {"query": query, "documents": documents, "mask": tf.not_equal(documents, "")}
    in_memory = model(text_model_inputs(tokenizer, batch), training=False)["scores"]
    np.testing.assert_allclose(in_memory.numpy(), scores.numpy(), rtol=1e-5, atol=1e-5)


def test_listformer_refuses_a_numeric_dataset(tmp_path, capsys):
    directory = tmp_path / "numeric"
    directory.mkdir()
    (directory / "manifest.json").write_text(json.dumps({"num_features": 3, "splits": {}}))
    code = train_main(
        ["--model", "listformer", "--data", str(directory), "--model-dir", str(tmp_path / "r")]
    )
    assert code == 1
    assert "not text" in capsys.readouterr().err


@pytest.mark.parametrize(
    "model, flag, value",
    [("listformer", "--global-tokens", "2"), ("rankformer", "--max-document-tokens", "64")],
)
def test_flags_of_the_other_kind_of_model_are_refused(tmp_path, capsys, model, flag, value):
    argv = ["--model", model, "--data", str(tmp_path), "--model-dir", str(tmp_path / "r")]
    with pytest.raises(SystemExit) as stop:
        train_main(argv + [flag, value])
    assert stop.value.code == 2  # a usage error
    assert f"{flag}: for" in capsys.readouterr().err
