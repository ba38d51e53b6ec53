"""Exporting a trained Listformer as a SavedModel that takes raw text.

``model_dir/export/<version>/`` holds the tokenizer (WordPiece in the graph,
its vocabulary inside the SavedModel) and the model, with two signatures:

* ``serving_default``: ``query``, a ``tf.string [batch]``, and ``documents``,
  a ``tf.string [batch, list]``; an empty string is a padding document (it
  scores ``PADDING_SCORE``), so lists of different lengths share a batch;
* ``predict_examples``: ``examples``, a ``tf.string [batch]`` of serialized
  text ELWC (the training data's features, word tokens joined with spaces).

Both return ``scores [batch, list]`` and, with a list head, ``list_probs
[batch, K]`` and ``expected_list_label [batch]``. Tokens past the caps the
model was trained with are cut, as in training.
"""

from __future__ import annotations

import tensorflow as tf

from tfr_rankformer.serving.export_versions import write_version
from tfr_rankformer.text import text_data
from tfr_rankformer.text.text_runs import load_text_run, text_model_inputs
from tfr_rankformer.text.text_tokenizer import TextTokenizer

__all__ = ["SIGNATURE_TEXT", "SIGNATURE_EXAMPLES", "export_text_run", "save_text_servable"]

SIGNATURE_TEXT = "serving_default"
SIGNATURE_EXAMPLES = "predict_examples"


class _TextServable(tf.Module):
    def __init__(self, model, tokenizer: TextTokenizer, data: text_data.TextData, list_head: bool):
        super().__init__()
        self.model = model
        self.tokenizer = tokenizer
        self.data = data
        self.list_head = list_head
        self.serve_text = tf.function(
            self._serve_text,
            input_signature=[
                tf.TensorSpec([None], tf.string, name="query"),
                tf.TensorSpec([None, None], tf.string, name="documents"),
            ],
        )
        self.serve_examples = tf.function(
            self._serve_examples,
            input_signature=[tf.TensorSpec([None], tf.string, name="examples")],
        )

    def _score(self, batch):
        outputs = self.model(text_model_inputs(self.tokenizer, batch), training=False)
        served = {"scores": outputs["scores"]}
        if self.list_head:
            probs = tf.sigmoid(tf.cast(outputs["list_quality"], tf.float32))  # [B, K]
            served["list_probs"] = probs
            served["expected_list_label"] = tf.reduce_sum(probs, axis=-1)  # [B]
        return served

    def _serve_text(self, query, documents):
        batch = {
            text_data.QUERY: query,
            text_data.DOCUMENTS: documents,
            text_data.MASK: tf.not_equal(documents, ""),
        }
        return self._score(batch)

    def _serve_examples(self, examples):
        return self._score(text_data.parse_text_batch(examples, self.data, list_size=None))


def save_text_servable(model, tokenizer, data: text_data.TextData, path: str, *, list_head: bool):
    """Saves ``model`` behind the tokenizer with the two text signatures."""
    servable = _TextServable(model, tokenizer, data, list_head)
    tf.saved_model.save(
        servable,
        path,
        signatures={
            SIGNATURE_TEXT: servable.serve_text,
            SIGNATURE_EXAMPLES: servable.serve_examples,
        },
    )


def export_text_run(model_dir: str, *, version: int | None = None) -> str:
    """Exports a text run's best weights to ``model_dir/export/<version>``; returns the path.

    Raises:
      FileNotFoundError: if ``model_dir`` is not a trained text run.
      FileExistsError: if the version directory exists.
    """
    config, tokenizer, model, _ = load_text_run(model_dir)
    data = text_data.load_text_data(config.data, config.text)

    def save(path: str) -> None:
        save_text_servable(model, tokenizer, data, path, list_head=config.uses_list_head)

    return write_version(model_dir, version, save)
