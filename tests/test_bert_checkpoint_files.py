"""Reading a BERT checkpoint directory: its tokenisation and its refusals.

The token ids must equal the checkpoint's own tokenizer's (Hugging Face
``tokenizers``' ``BertWordPieceTokenizer`` on the same ``vocab.txt``; test-only),
and a bad file is refused naming the file and the field or weight.
"""

import json
import os

import pytest
import tensorflow as tf
from safetensors.numpy import load_file, save_file

from tests.bert_checkpoints import CASED, SAMPLES, UNCASED, drop_weight, write_checkpoint
from tfr_rankformer.text.bert_checkpoint import read_bert_checkpoint
from tfr_rankformer.text.listformer_checkpoint import checkpoint_tokenizer

# === Tokenisation as the checkpoint's own ===


@pytest.mark.parametrize("vocabulary, lower_case", [(UNCASED, True), (CASED, False)])
def test_token_ids_equal_the_checkpoints_tokenizer(tmp_path, vocabulary, lower_case):
    import tokenizers

    write_checkpoint(tmp_path / "bert", vocabulary=vocabulary)
    checkpoint = read_bert_checkpoint(str(tmp_path / "bert"))
    assert checkpoint.lower_case is lower_case  # from the vocabulary: no tokenizer_config.json
    tokenizer = checkpoint_tokenizer(checkpoint, max_query_tokens=8, max_document_tokens=16)
    own = tokenizers.BertWordPieceTokenizer(
        str(tmp_path / "bert" / "vocab.txt"), lowercase=lower_case
    )
    want = [e.ids for e in own.encode_batch(SAMPLES, add_special_tokens=False)]
    got = tokenizer.token_ids(tf.constant(SAMPLES)).to_list()
    assert got == want
    assert any(vocabulary.index("[UNK]") in ids for ids in want)  # unknown words were met
    documents = tokenizer.token_ids(tf.constant([SAMPLES[:2], SAMPLES[2:4]])).to_list()
    assert documents == [want[:2], want[2:4]]


@pytest.mark.parametrize(
    "tokenizer_config, lower_case",
    [({"do_lower_case": False}, False), ({"do_lower_case": True, "strip_accents": None}, True)],
)
def test_tokenizer_config_sets_the_lower_casing(tmp_path, tokenizer_config, lower_case):
    write_checkpoint(tmp_path / "bert", tokenizer_config=tokenizer_config)
    assert read_bert_checkpoint(str(tmp_path / "bert")).lower_case is lower_case


# === Clear errors ===


def _drop(name):
    return lambda directory: drop_weight(directory, name)


def _reshape(name):
    def change(directory):
        path = os.path.join(directory, "model.safetensors")
        weights = load_file(path)
        weights[name] = weights[name][:, :-1].copy()
        save_file(weights, path)

    return change


def _edit_json(name, **values):
    def change(directory):
        path = os.path.join(directory, name)
        current = {}
        if os.path.isfile(path):
            with open(path, encoding="utf-8") as f:
                current = json.load(f)
        current.update(values)
        current = {k: v for k, v in current.items() if v != "DELETE"}
        with open(path, "w", encoding="utf-8") as f:
            json.dump(current, f)

    return change


def _longer_vocabulary(directory):
    with open(os.path.join(directory, "vocab.txt"), "a", encoding="utf-8") as f:
        f.write("extra\n")


def _remove(name):
    return lambda directory: os.remove(os.path.join(directory, name))


SHAPE = (
    r"model.safetensors: weight 'encoder.layer.0.intermediate.dense.weight' has shape "
    r"\(64, 31\), but .*config.json implies \(64, 32\)"
)
BAD_CHECKPOINTS = [
    (
        _edit_json("config.json", hidden_size="DELETE"),
        ValueError,
        r"config.json: missing field 'hidden_size'",
    ),
    (
        _edit_json("config.json", hidden_act="gelu_new"),
        ValueError,
        r"config.json: field 'hidden_act' is",
    ),
    (
        _edit_json("config.json", model_type="roberta"),
        ValueError,
        r"config.json: field 'model_type' is",
    ),
    (
        _edit_json("config.json", num_attention_heads=5),
        ValueError,
        r"'hidden_size' 32 is not divisible",
    ),
    (_edit_json("config.json", layer_norm_eps=0), ValueError, r"field 'layer_norm_eps' must be"),
    (
        _drop("encoder.layer.1.output.LayerNorm.bias"),
        ValueError,
        r"model.safetensors: missing weight 'encoder.layer.1.output.LayerNorm.bias'",
    ),
    (_reshape("encoder.layer.0.intermediate.dense.weight"), ValueError, SHAPE),
    (_longer_vocabulary, ValueError, r"vocab.txt has \d+ tokens, more than .*'vocab_size'"),
    (
        _edit_json("tokenizer_config.json", do_lower_case=False, strip_accents=True),
        ValueError,
        r"tokenizer_config.json: field 'strip_accents'",
    ),
    (
        _edit_json("tokenizer_config.json", do_basic_tokenize=False),
        ValueError,
        r"tokenizer_config.json: field 'do_basic_tokenize'",
    ),
    (_remove("model.safetensors"), FileNotFoundError, r"model.safetensors does not exist"),
    (_remove("vocab.txt"), FileNotFoundError, r"vocab.txt does not exist"),
]


@pytest.mark.parametrize("change, error, message", BAD_CHECKPOINTS)
def test_a_bad_checkpoint_is_refused_naming_its_file_and_field(tmp_path, change, error, message):
    directory = str(tmp_path / "bert")
    write_checkpoint(directory)
    change(directory)
    with pytest.raises(error, match=message):
        read_bert_checkpoint(directory)
