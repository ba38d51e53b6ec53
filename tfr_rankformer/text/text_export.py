"""Exporting a trained Listformer as two SavedModels: one takes raw text, one token ids.

``export/<version>/`` holds the tokenizer (TF Text ops) and the model: ``serving_default`` on
``query [B]`` and ``documents [B, L]`` strings (an empty string is a padding document) and
``predict_examples`` on serialized text ELWC. ``export_token_ids/<version>/``, a TF Serving
base path of its own since a server registers every op of a model it loads, holds the model
alone with core ops: ``serving_default`` on ``query_ids [B, Q]``, ``document_ids [B, L, T]``
(int32, ``-1`` padding) and ``document_mask [B, L]``; clients tokenise with
``client_tokenizer.ClientTokenizer`` from its ``assets.extra/``. A model trained with a first
stage takes ``first_stage_scores [B, L]`` in every signature. All return ``scores [B, L]``
and, with a list head, ``list_probs`` and ``expected_list_label``.
"""

from __future__ import annotations

import logging
import os

import tensorflow as tf

from tfr_rankformer.core.config_io import write_json
from tfr_rankformer.core.elwc_schema import FIRST_STAGE_INPUT
from tfr_rankformer.core.run_layout import EXPORT_NAME, TOKEN_ID_EXPORT_NAME, VOCAB_NAME
from tfr_rankformer.serving.client_tokenizer import (
    ASSETS_EXTRA,
    SETTINGS_NAME,
    VOCAB_FILE,
    tokenizer_settings,
)
from tfr_rankformer.serving.export import (
    next_version,
    serve_nonempty,
    served_outputs,
    write_version,
)
from tfr_rankformer.text import text_data
from tfr_rankformer.text.listformer import DOCUMENT_IDS, FIRST_STAGE, QUERY_IDS
from tfr_rankformer.text.text_runs import load_text_run, takes_first_stage, text_model_inputs
from tfr_rankformer.text.text_tokenizer import (
    SUFFIX,
    UNKNOWN,
    TextTokenizer,
    read_vocabulary,
    write_vocabulary,
)

__all__ = [
    "SIGNATURE_TEXT",
    "SIGNATURE_EXAMPLES",
    "SIGNATURE_TOKEN_IDS",
    "export_text_run",
    "save_text_servable",
    "save_token_id_servable",
]

logger = logging.getLogger(__name__)

SIGNATURE_TEXT = "serving_default"
SIGNATURE_EXAMPLES = "predict_examples"
SIGNATURE_TOKEN_IDS = "serving_default"  # the token-id export's one signature


def _first_stage_spec(model) -> list:
    """The signatures' ``first_stage_scores`` input, for a model that takes it."""
    if not takes_first_stage(model):
        return []
    return [tf.TensorSpec([None, None], tf.float32, name=FIRST_STAGE_INPUT)]


class _TextServable(tf.Module):
    def __init__(self, model, tokenizer: TextTokenizer, data: text_data.TextData, list_head: bool):
        super().__init__()
        self.model = model
        self.tokenizer = tokenizer
        self.data = data
        self.list_head = list_head
        self.first_stage = takes_first_stage(model)
        self.serve_text = tf.function(
            self._serve_text,
            input_signature=[
                tf.TensorSpec([None], tf.string, name="query"),
                tf.TensorSpec([None, None], tf.string, name="documents"),
                *_first_stage_spec(model),
            ],
        )
        self.serve_examples = tf.function(
            self._serve_examples,
            input_signature=[tf.TensorSpec([None], tf.string, name="examples")],
        )

    def _score(self, batch):
        inputs = text_model_inputs(self.tokenizer, batch, first_stage=self.first_stage)
        return served_outputs(self.model(inputs, training=False), self.list_head)

    def _serve_text(self, query, documents, first_stage_scores=None):
        batch = {
            text_data.QUERY: query,
            text_data.DOCUMENTS: documents,
            text_data.MASK: tf.not_equal(documents, ""),
        }
        if first_stage_scores is not None:
            batch[text_data.FIRST_STAGE] = first_stage_scores
        return self._score(batch)

    def _serve_examples(self, examples):
        parse = text_data.parse_text_batch
        return serve_nonempty(lambda e: self._score(parse(e, self.data, list_size=None)), examples)


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


def _id_checks(query_ids, document_ids, document_mask, vocab_size: int) -> list:
    """Assertions (core ops) that fail a request with ids outside ``[-1, vocab_size)`` or a
    mask that does not match ``document_ids``."""
    checks = []
    for name, ids in (("query_ids", query_ids), ("document_ids", document_ids)):
        inside = tf.reduce_all((ids >= -1) & (ids < vocab_size))
        message = f"invalid input: {name} holds ids outside [-1, {vocab_size}) (-1: no token)"
        checks.append(tf.debugging.Assert(inside, [message]))
    same = tf.reduce_all(tf.equal(tf.shape(document_mask), tf.shape(document_ids)[:2]))
    batch = tf.equal(tf.shape(query_ids)[0], tf.shape(document_ids)[0])
    message = "invalid input: document_mask must be [batch, list] of document_ids, one query each"
    checks.append(tf.debugging.Assert(same & batch, [message]))
    return checks


def _cut(ids: tf.Tensor, cap: int) -> tf.Tensor:
    """``ids`` cut to ``cap`` tokens on the last axis, padded with -1 to at least one."""
    ids = ids[..., :cap]
    missing = tf.maximum(1 - tf.shape(ids)[-1], 0)
    pad = [[0, 0]] * (ids.shape.rank - 1) + [[0, missing]]
    return tf.pad(ids, pad, constant_values=-1)


class _TokenIdServable(tf.Module):
    """The model behind a token-id signature: nothing of the tokenizer is kept."""

    def __init__(self, model, tokenizer: TextTokenizer, list_head: bool):
        super().__init__()
        self.model = model
        self.list_head = list_head
        self.vocab_size = tokenizer.vocab_size
        self.caps = (tokenizer.max_query_tokens, tokenizer.max_document_tokens)
        self.serve_ids = tf.function(
            self._serve_ids,
            input_signature=[
                tf.TensorSpec([None, None], tf.int32, name="query_ids"),
                tf.TensorSpec([None, None, None], tf.int32, name="document_ids"),
                tf.TensorSpec([None, None], tf.bool, name="document_mask"),
                *_first_stage_spec(model),
            ],
        )

    def _serve_ids(self, query_ids, document_ids, document_mask, first_stage_scores=None):
        with tf.control_dependencies(
            _id_checks(query_ids, document_ids, document_mask, self.vocab_size)
        ):
            inputs = {
                QUERY_IDS: _cut(query_ids, self.caps[0]),
                DOCUMENT_IDS: _cut(document_ids, self.caps[1]),
                text_data.MASK: tf.identity(document_mask),
            }
            if first_stage_scores is not None:
                inputs[FIRST_STAGE] = tf.identity(first_stage_scores)
        return served_outputs(self.model(inputs, training=False), self.list_head)


def _write_client_files(path: str, tokenizer: TextTokenizer, vocabulary: list[str], model) -> None:
    """``assets.extra/vocab.txt`` and ``assets.extra/tokenizer.json`` for the client."""
    extra = os.path.join(path, ASSETS_EXTRA)
    os.makedirs(extra, exist_ok=True)
    write_vocabulary(os.path.join(extra, VOCAB_FILE), vocabulary)
    settings = tokenizer_settings(
        max_query_tokens=tokenizer.max_query_tokens,
        max_document_tokens=tokenizer.max_document_tokens,
        lower_case=tokenizer.lower_case,
        basic_tokenization=tokenizer.basic_tokenization,
        unknown_token=UNKNOWN,
        suffix_indicator=SUFFIX,
        first_stage=takes_first_stage(model),
    )
    write_json(os.path.join(extra, SETTINGS_NAME), settings)


def save_token_id_servable(
    model, tokenizer: TextTokenizer, vocabulary: list[str], path: str, *, list_head: bool
):
    """Saves ``model`` with the token-id signature (core TF ops only) and, in
    ``assets.extra/``, the vocabulary and tokenizer settings its clients need."""
    if len(vocabulary) != tokenizer.vocab_size:
        raise ValueError(
            f"{len(vocabulary)} vocabulary entries for a tokenizer of {tokenizer.vocab_size}"
        )
    servable = _TokenIdServable(model, tokenizer, list_head)
    tf.saved_model.save(servable, path, signatures={SIGNATURE_TOKEN_IDS: servable.serve_ids})
    _write_client_files(path, tokenizer, vocabulary, model)


def _free_version(model_dir: str, version: int | None) -> int:
    """``version``, or one more than the highest of either export; ``FileExistsError`` if
    either has it."""
    names = (EXPORT_NAME, TOKEN_ID_EXPORT_NAME)
    if version is None:
        version = max(next_version(os.path.join(model_dir, name)) for name in names)
    for name in names:
        path = os.path.join(model_dir, name, str(version))
        if os.path.exists(path):
            raise FileExistsError(f"{path} exists; export versions are never overwritten")
    return version


def export_text_run(
    model_dir: str, *, version: int | None = None, precision: str = "float32"
) -> str:
    """Exports a text run's best weights to ``model_dir/export/<version>`` (raw text) and
    ``model_dir/export_token_ids/<version>`` (token ids); returns the first path. The exports
    compute in ``precision``: bf16 is faster on CPUs with bfloat16 instructions
    (``avx512_bf16``, AMX), emulated and slower on others.

    Raises:
      FileNotFoundError: if ``model_dir`` is not a trained text run.
      FileExistsError: if either version directory exists.
    """
    config, tokenizer, model, _ = load_text_run(model_dir, precision=precision)
    data = text_data.load_text_data(config.data, config.text)
    vocabulary = read_vocabulary(os.path.join(model_dir, VOCAB_NAME))
    version = _free_version(model_dir, version)
    list_head = config.uses_list_head

    def save_text(path: str) -> None:
        save_text_servable(model, tokenizer, data, path, list_head=list_head)

    def save_ids(path: str) -> None:
        save_token_id_servable(model, tokenizer, vocabulary, path, list_head=list_head)

    path = write_version(model_dir, version, save_text)
    ids_path = write_version(model_dir, version, save_ids, export_name=TOKEN_ID_EXPORT_NAME)
    logger.info("exported %s (raw text) and %s (token ids)", path, ids_path)
    return path
