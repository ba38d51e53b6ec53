"""Exporting a trained text run as two SavedModels, both returning ``scores [B, L]`` (and,
with a list head, ``list_probs`` and ``expected_list_label``), both taking
``first_stage_scores [B, L]`` where the model was trained with a first stage:

- ``export/<version>/``: the tokenizer (TF Text ops) and the model; ``serving_default`` on
  ``query [B]`` and ``documents [B, L]`` strings ("" pads), ``predict_examples`` on text ELWC.
- ``export_token_ids/<version>/`` (a TF Serving base path of its own: core ops only):
  ``serving_default`` on ``query_ids [B, Q]``, ``document_ids [B, L, T]`` (int32, ``-1``
  pads) and ``document_mask [B, L]``; ``assets.extra/`` holds the ``ClientTokenizer``'s files.
"""

from __future__ import annotations

import functools
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
from tfr_rankformer.text.text_data import DOCUMENTS, MASK, QUERY
from tfr_rankformer.text.text_runs import load_text_run, takes_first_stage, text_model_inputs
from tfr_rankformer.text.text_tokenizer import (
    TextTokenizer,
    at_least_one_token,
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


def save_text_servable(model, tokenizer, data: text_data.TextData, path: str, *, list_head: bool):
    """Saves ``model`` behind the tokenizer with the two text signatures."""
    first_stage = takes_first_stage(model)

    def score(batch):
        inputs = text_model_inputs(tokenizer, batch, first_stage=first_stage)
        return served_outputs(model(inputs, training=False), list_head)

    strings = [tf.TensorSpec([None], tf.string, name="query")]
    strings.append(tf.TensorSpec([None, None], tf.string, name="documents"))

    @tf.function(input_signature=strings + _first_stage_spec(model))
    def serve_text(query, documents, first_stage_scores=None):
        batch = {QUERY: query, DOCUMENTS: documents, MASK: tf.not_equal(documents, "")}
        if first_stage_scores is not None:
            batch[text_data.FIRST_STAGE] = first_stage_scores
        return score(batch)

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="examples")])
    def serve_examples(examples):
        parse = text_data.parse_text_batch
        return serve_nonempty(lambda e: score(parse(e, data, list_size=None)), examples)

    module = tf.Module()  # holds what the signatures use, so that the SavedModel keeps it
    module.model = model
    module.tokenizer = tokenizer
    signatures = {SIGNATURE_TEXT: serve_text, SIGNATURE_EXAMPLES: serve_examples}
    tf.saved_model.save(module, path, signatures=signatures)


def _id_checks(query_ids, document_ids, document_mask, vocab_size: int) -> list:
    """Assertions (core ops) refusing unknown ids or a mask not of ``document_ids``."""
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


def save_token_id_servable(
    model, tokenizer: TextTokenizer, vocabulary: list[str], path: str, *, list_head: bool
):
    """Saves ``model`` with the token-id signature and, in ``assets.extra/``, its clients'
    ``vocab.txt`` and ``tokenizer.json``."""
    if len(vocabulary) != tokenizer.vocab_size:
        raise ValueError(
            f"{len(vocabulary)} vocabulary entries for a tokenizer of {tokenizer.vocab_size}"
        )
    vocab_size = tokenizer.vocab_size
    caps = (tokenizer.max_query_tokens, tokenizer.max_document_tokens)
    specs = [
        tf.TensorSpec([None, None], tf.int32, name="query_ids"),
        tf.TensorSpec([None, None, None], tf.int32, name="document_ids"),
        tf.TensorSpec([None, None], tf.bool, name="document_mask"),
    ]

    @tf.function(input_signature=specs + _first_stage_spec(model))
    def serve_ids(query_ids, document_ids, document_mask, first_stage_scores=None):
        checks = _id_checks(query_ids, document_ids, document_mask, vocab_size)
        with tf.control_dependencies(checks):
            inputs = {
                QUERY_IDS: at_least_one_token(query_ids[..., : caps[0]]),
                DOCUMENT_IDS: at_least_one_token(document_ids[..., : caps[1]]),
                MASK: tf.identity(document_mask),
            }
            if first_stage_scores is not None:
                inputs[FIRST_STAGE] = tf.identity(first_stage_scores)
        return served_outputs(model(inputs, training=False), list_head)

    module = tf.Module()  # holds the model, so that the SavedModel keeps it
    module.model = model
    tf.saved_model.save(module, path, signatures={SIGNATURE_TOKEN_IDS: serve_ids})
    extra = os.path.join(path, ASSETS_EXTRA)
    os.makedirs(extra, exist_ok=True)
    write_vocabulary(os.path.join(extra, VOCAB_FILE), vocabulary)
    settings = tokenizer_settings(tokenizer, first_stage=takes_first_stage(model))
    write_json(os.path.join(extra, SETTINGS_NAME), settings)


def _free_version(model_dir: str, version: int | None) -> int:
    """``version``, or one more than the highest of either export, if neither has it."""
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
    """Exports a text run's best weights, computing in ``precision``, to both exports;
    returns the raw-text one's path."""
    config, tokenizer, model, _ = load_text_run(model_dir, precision=precision)
    data = text_data.load_text_data(config.data, config.text)
    vocab = read_vocabulary(os.path.join(model_dir, VOCAB_NAME))
    version = _free_version(model_dir, version)
    head = config.uses_list_head
    save_text = functools.partial(save_text_servable, model, tokenizer, data, list_head=head)
    save_ids = functools.partial(save_token_id_servable, model, tokenizer, vocab, list_head=head)
    path = write_version(model_dir, version, save_text)
    ids_path = write_version(model_dir, version, save_ids, export_name=TOKEN_ID_EXPORT_NAME)
    logger.info("exported %s (raw text) and %s (token ids)", path, ids_path)
    return path
