"""``tfr-train --model listformer --init-from DIR``: a run started from a BERT checkpoint.

The checkpoint is a tiny random BERT written by the test (``bert_checkpoints``),
the data a few synthetic text lists (``tfr-convert --input synthetic-text``).
One run is trained for the module; the tests read it, evaluate, export and
reload it, and check the refusals of the command line.
"""

import json
import os
import shutil

import numpy as np
import pytest
import tensorflow as tf

from pipelines.convert_cli import main as convert_main
from pipelines.eval_cli import main as eval_main
from pipelines.export_cli import main as export_main
from pipelines.predict_cli import main as predict_main
from pipelines.train_cli import main as train_main
from tests.bert_checkpoints import EPS, FF, HEADS, LAYERS, SAMPLES, UNCASED, WIDTH, write_checkpoint
from tfr_rankformer.text.listformer_checkpoint import listformer_from_checkpoint
from tfr_rankformer.text.text_family import TextFamily
from tfr_rankformer.text.text_runs import load_text_run, text_model_inputs
from tfr_rankformer.training.text_config import TextConfig
from tfr_rankformer.training.train_config import TrainConfig

# The checkpoint has 40 positions: the token caps stay below them.
CAPS = ["--max-query-tokens", "8", "--max-document-tokens", "16"]
# Sizes that agree with the checkpoint's config.json are accepted.
AGREEING = ["--width", str(WIDTH), "--num-heads", str(HEADS), "--num-layers", str(LAYERS)]


def _flags(data, model_dir, checkpoint, *extra):
    return [
        "--model", "listformer", "--data", data, "--model-dir", model_dir,
        "--init-from", checkpoint, "--quiet", "--batch-size", "4", *extra,
    ]  # fmt: skip


def _layer_weights(model) -> dict:
    """The loaded weights the test compares, as NumPy arrays."""
    embedding, layer = model.get_layer("embedding"), model.get_layer("encoder_0")
    return {
        "tokens": embedding.tokens.numpy(),
        "positions": embedding.positions.numpy(),
        "qkv": layer.qkv.kernel.numpy(),
        "qkv_global": layer.qkv_global.kernel.numpy(),
        "ff_out": layer.ff_out.kernel.numpy(),
    }


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """The checkpoint, the dataset, the trained run, and the weights the model held
    when it was compiled for training."""
    root = tmp_path_factory.mktemp("init_from")
    checkpoint = str(root / "bert")
    weights = write_checkpoint(checkpoint)
    data = str(root / "data")
    convert = ["--input", "synthetic-text", "--synthetic-lists", "8", "--output", data]
    assert convert_main([*convert, "--synthetic-list-size", "4", "--no-progress"]) == 0
    model_dir = str(root / "run")
    compiled = {}
    original = TextFamily.build

    def build_and_record(*args, **kwargs):
        model, fitted = original(*args, **kwargs)
        compiled.update(_layer_weights(model))
        return model, fitted

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(TextFamily, "build", build_and_record)
        flags = _flags(data, model_dir, checkpoint, *CAPS, *AGREEING, "--epochs", "1")
        assert train_main([*flags, "--no-export", "--evaluate-splits", "none"]) == 0
    return {
        "checkpoint": checkpoint,
        "weights": weights,
        "data": data,
        "model_dir": model_dir,
        "compiled": compiled,
    }


def _read(path) -> str:
    with open(path, encoding="utf-8") as f:
        return f.read()


def test_training_starts_from_the_checkpoints_weights(trained):
    weights, compiled = trained["weights"], trained["compiled"]
    np.testing.assert_array_equal(compiled["tokens"], weights["embeddings.word_embeddings.weight"])
    np.testing.assert_array_equal(
        compiled["positions"], weights["embeddings.position_embeddings.weight"]
    )
    parts = [f"encoder.layer.0.attention.self.{p}.weight" for p in ("query", "key", "value")]
    qkv = np.concatenate([weights[p].T for p in parts], axis=1)
    np.testing.assert_array_equal(compiled["qkv"], qkv)
    np.testing.assert_array_equal(compiled["qkv_global"], qkv)  # copied from the local ones
    np.testing.assert_array_equal(
        compiled["ff_out"], weights["encoder.layer.0.output.dense.weight"].T
    )


def test_the_run_records_the_checkpoints_vocabulary_sizes_and_form(trained):
    model_dir = trained["model_dir"]
    checkpoint_vocab = _read(os.path.join(trained["checkpoint"], "vocab.txt"))
    assert _read(os.path.join(model_dir, "vocab.txt")) == checkpoint_vocab
    config = json.loads(_read(os.path.join(model_dir, "config.json")))
    architecture = config["architecture"]
    sizes = ("width", "num_layers", "num_heads", "ff_dim", "max_positions")
    assert [architecture[k] for k in sizes] == [WIDTH, LAYERS, HEADS, FF, 40]
    assert config["text"]["init_from"] == trained["checkpoint"]
    pretrained = json.loads(_read(os.path.join(model_dir, "text_model.json")))["pretrained"]
    assert pretrained["vocab_size"] == len(UNCASED)
    assert pretrained["lower_case"] is True and pretrained["basic_tokenization"] is True
    assert pretrained["form"]["norm_first"] is False
    assert pretrained["form"]["layer_norm_epsilon"] == EPS


def test_the_run_reloads_without_the_checkpoint_and_tokenises_as_it(trained, tmp_path):
    # A copy of the run whose checkpoint is gone reloads from its own files.
    moved = str(tmp_path / "run")
    shutil.copytree(trained["model_dir"], moved)
    path = os.path.join(moved, "config.json")
    config = json.loads(_read(path))
    config["text"]["init_from"] = str(tmp_path / "gone")
    with open(path, "w", encoding="utf-8") as f:
        json.dump(config, f)
    reloaded, tokenizer, model, _ = load_text_run(moved)
    assert tokenizer.basic_tokenization and tokenizer.lower_case
    assert model.get_layer("embedding").tokens.shape == (len(UNCASED), WIDTH)
    start = listformer_from_checkpoint(
        trained["checkpoint"], reloaded.architecture, None, max_query_tokens=8,
        max_document_tokens=16,
    )  # fmt: skip
    samples = tf.constant(SAMPLES)
    assert tokenizer.token_ids(samples).to_list() == start.tokenizer.token_ids(samples).to_list()


@pytest.mark.slow
def test_eval_export_and_predict_work_on_the_run(trained, tmp_path, capsys):
    model_dir = trained["model_dir"]
    assert eval_main(["--model-dir", model_dir, "--split", "all"]) == 0
    assert export_main(["--model-dir", model_dir]) == 0
    served = tf.saved_model.load(os.path.join(model_dir, "export", "1"))
    query = tf.constant(["Hello, what is the quick fox?", "search engine"])
    documents = tf.constant(
        [
            ["The quick brown fox jumps.", "a lazy dog", "Café naïve world"],
            ["rank the documents", "unknownword xyzzy", ""],
        ]
    )
    scores = served.signatures["serving_default"](query=query, documents=documents)["scores"]
    _, tokenizer, model, _ = load_text_run(model_dir)
    batch = {"query": query, "documents": documents, "mask": tf.not_equal(documents, "")}
    in_memory = model(text_model_inputs(tokenizer, batch), training=False)["scores"]
    np.testing.assert_allclose(scores.numpy(), in_memory.numpy(), rtol=1e-5, atol=1e-5)
    output = str(tmp_path / "run.txt")
    predict = ["--model", model_dir, "--input", trained["data"], "--output", output]
    assert predict_main([*predict, "--no-progress"]) == 0
    assert _read(output).strip()


@pytest.mark.parametrize(
    "extra, named",
    [
        (["--width", "64"], "--width 64 differs from the checkpoint's hidden_size 32"),
        (["--num-layers", "3"], "--num-layers 3 differs"),
        (["--vocab-size", "100"], "--vocab-size: with --init-from the vocabulary"),
    ],
)
def test_flags_the_checkpoint_fixes_are_refused(trained, tmp_path, capsys, extra, named):
    flags = _flags(trained["data"], str(tmp_path / "r"), trained["checkpoint"], *CAPS, *extra)
    with pytest.raises(SystemExit) as stop:
        train_main(flags)
    assert stop.value.code == 2
    assert named in capsys.readouterr().err
    assert not os.path.exists(tmp_path / "r")


def test_a_given_vocabulary_is_refused(trained, tmp_path, capsys):
    flags = _flags(trained["data"], str(tmp_path / "r"), trained["checkpoint"], *CAPS)
    vocab = os.path.join(trained["checkpoint"], "vocab.txt")
    with pytest.raises(SystemExit):
        train_main([*flags, "--vocab", vocab])
    assert "--vocab: with --init-from the vocabulary" in capsys.readouterr().err


@pytest.mark.parametrize("missing", ["vocab.txt", "model.safetensors", "config.json"])
def test_a_checkpoint_without_its_files_is_refused(trained, tmp_path, capsys, missing):
    checkpoint = str(tmp_path / "bert")
    shutil.copytree(trained["checkpoint"], checkpoint)
    os.remove(os.path.join(checkpoint, missing))
    flags = _flags(trained["data"], str(tmp_path / "r"), checkpoint, *CAPS)
    with pytest.raises(SystemExit) as stop:
        train_main(flags)
    assert stop.value.code == 2
    assert f"--init-from {checkpoint} holds no {missing}" in capsys.readouterr().err


def test_a_missing_directory_is_refused(trained, tmp_path, capsys):
    flags = _flags(trained["data"], str(tmp_path / "r"), str(tmp_path / "absent"), *CAPS)
    with pytest.raises(SystemExit):
        train_main(flags)
    assert "is not a directory" in capsys.readouterr().err


def test_token_caps_beyond_the_checkpoints_positions_are_refused(trained, tmp_path, capsys):
    model_dir = str(tmp_path / "r")
    assert train_main(_flags(trained["data"], model_dir, trained["checkpoint"])) == 1
    err = capsys.readouterr().err
    assert "`max_document_tokens` 128 needs the checkpoint's max_position_embeddings (40" in err
    assert not os.path.exists(model_dir)


def test_the_settings_refuse_init_from_where_it_cannot_apply(tmp_path):
    with pytest.raises(ValueError, match="`vocab` and `init_from` exclude each other"):
        TextConfig(init_from=str(tmp_path), vocab="vocab.txt")
    with pytest.raises(ValueError, match="`init_from` must be a checkpoint directory"):
        TextConfig(init_from="")
    with pytest.raises(ValueError, match="`init_from` starts a text model"):
        TrainConfig(model="mlp", data="d", model_dir="m", text=TextConfig(init_from="x"))
