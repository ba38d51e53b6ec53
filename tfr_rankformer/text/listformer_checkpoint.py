"""A Listformer started from a BERT-family checkpoint's form, sizes, vocabulary and weights,
the global projections as copies of the local ones (as Longformer's from RoBERTa): with one
document and the own-document bias at 0 the encoder is the checkpoint's BERT.
"""

from __future__ import annotations

import dataclasses
import logging
import os

import tensorflow as tf

from tfr_rankformer.core.config_io import read_settings
from tfr_rankformer.model.model_config import ModelConfig
from tfr_rankformer.text.bert_checkpoint import (
    CLS,
    CONFIG_FILE,
    SEP,
    SIZES,
    VOCAB_FILE,
    WEIGHTS_FILE,
    BertCheckpoint,
    assign_values,
    attention_names,
    dense_values,
    layer_values,
    norm_values,
    read_bert_checkpoint,
    token_types,
)
from tfr_rankformer.text.listformer import SIMILARITY_LAYER, build_text_model
from tfr_rankformer.text.listformer_config import ListformerConfig, ListformerForm
from tfr_rankformer.text.sentence_tower import load_tower_weights, tower_settings
from tfr_rankformer.text.text_tokenizer import TextTokenizer

__all__ = [
    "CHECKPOINT_SIZES",
    "PretrainedListformer",
    "check_checkpoint_directory",
    "checkpoint_conflicts",
    "listformer_from_checkpoint",
    "pretrained_listformer",
    "pretrained_settings",
    "checkpoint_model_config",
    "checkpoint_form",
    "checkpoint_tokenizer",
    "load_checkpoint_weights",
]

logger = logging.getLogger(__name__)

MODEL = "listformer"
# The files a checkpoint directory must hold.
CHECKPOINT_FILES = (CONFIG_FILE, WEIGHTS_FILE, VOCAB_FILE)
# The sizes a checkpoint fixes: ModelConfig field -> config.json field.
CHECKPOINT_SIZES = {name: field for field, name in SIZES.items() if name != "vocab_size"}


@dataclasses.dataclass(frozen=True)
class PretrainedListformer:
    """A Listformer started from a checkpoint, with what a run records to rebuild it."""

    model: tf.keras.Model
    tokenizer: TextTokenizer
    vocabulary: list
    config: ModelConfig
    form: ListformerForm
    vocab_size: int


def pretrained_settings(form: ListformerForm, vocab_size: int, tokenizer: TextTokenizer) -> dict:
    """``text_model.json``'s ``pretrained`` entry: what rebuilding the start needs."""
    return {
        "form": dataclasses.asdict(form),
        "vocab_size": vocab_size,
        "lower_case": tokenizer.lower_case,
        "basic_tokenization": tokenizer.basic_tokenization,
    }


def checkpoint_model_config(checkpoint: BertCheckpoint, config: ModelConfig) -> ModelConfig:
    """``config`` resolved for the Listformer with the checkpoint's sizes."""
    sizes = {name: getattr(checkpoint, name) for name in CHECKPOINT_SIZES}
    return dataclasses.replace(ListformerConfig.of(config), **sizes).resolved(MODEL)


def checkpoint_form(checkpoint: BertCheckpoint) -> ListformerForm:
    """The checkpoint's layer form: post-LayerNorm, its activation and epsilon."""
    return ListformerForm.bert(
        layer_norm_epsilon=checkpoint.layer_norm_epsilon, activation=checkpoint.activation
    )


def checkpoint_tokenizer(
    checkpoint: BertCheckpoint, *, max_query_tokens: int, max_document_tokens: int
) -> TextTokenizer:
    """The checkpoint's own tokenizer with the token caps."""
    caps = {"max_query_tokens": max_query_tokens, "max_document_tokens": max_document_tokens}
    for name, cap in caps.items():
        if cap >= checkpoint.max_positions:
            raise ValueError(
                f"`{name}` {cap} needs the checkpoint's max_position_embeddings "
                f"({checkpoint.max_positions}, {checkpoint.directory}) above it"
            )
    vocabulary, lower_case = list(checkpoint.vocabulary), checkpoint.lower_case
    return TextTokenizer(vocabulary, **caps, lower_case=lower_case, basic_tokenization=True)


def _embedding_values(embedding, checkpoint: BertCheckpoint) -> list:
    weights = checkpoint.weights
    words = weights["embeddings.word_embeddings.weight"]
    positions = "embeddings.position_embeddings.weight"
    segments = token_types(checkpoint)  # the query's type 0, the documents' type 1
    special = words[[checkpoint.token_id(CLS), checkpoint.token_id(SEP)]]
    return [
        (embedding.tokens, words, "embeddings.word_embeddings.weight"),
        (embedding.positions, weights[positions], positions),
        (embedding.segments, segments, "embeddings.token_type_embeddings.weight"),
        (embedding.special, special, "embeddings.word_embeddings.weight ([CLS], [SEP])"),
        *norm_values(embedding.norm, weights, "embeddings.LayerNorm"),
    ]


def load_checkpoint_weights(model: tf.keras.Model, checkpoint: BertCheckpoint) -> None:
    """Sets a Listformer's embedding and encoder weights to the checkpoint's."""
    values = _embedding_values(model.get_layer("embedding"), checkpoint)
    for i in range(checkpoint.num_layers):
        layer = model.get_layer(f"encoder_{i}")
        values += layer_values(layer, checkpoint.weights, i)
        if layer.global_projections:  # Longformer: global projections start as the local ones
            values += dense_values(layer.qkv_global, checkpoint.weights, *attention_names(i))
    assign_values(values, directory=checkpoint.directory, owner="Listformer")


def check_checkpoint_directory(directory: str) -> None:
    """Refuses (``ValueError``) a directory without ``CHECKPOINT_FILES``, reading nothing."""
    if not os.path.isdir(directory):
        raise ValueError(f"`init_from` {directory} is not a directory")
    for name in CHECKPOINT_FILES:
        if not os.path.isfile(os.path.join(directory, name)):
            raise ValueError(
                f"`init_from` {directory} holds no {name}: a BERT-family checkpoint "
                f"directory holds {', '.join(CHECKPOINT_FILES)}"
            )


def checkpoint_conflicts(directory: str, given: dict) -> list[str]:
    """Why settings of ``given`` (``ModelConfig`` field -> value or ``None``) differ from
    the sizes the checkpoint's ``config.json`` fixes."""
    path = os.path.join(directory, CONFIG_FILE)
    values = read_settings(path)
    return [
        f"`{name}` {given[name]} differs from the checkpoint's {field} {values[field]} "
        f"({path}): with `init_from` the checkpoint's sizes are the model's"
        for name, field in CHECKPOINT_SIZES.items()
        if given.get(name) is not None and field in values and given[name] != values[field]
    ]


def pretrained_listformer(
    checkpoint: BertCheckpoint,
    tokenizer: TextTokenizer,
    config: ModelConfig,
    levels: int | None,
    *,
    item_levels: int | None = None,
) -> PretrainedListformer:
    """A Listformer with ``checkpoint``'s sizes, form and weights, beside ``tokenizer``."""
    resolved = checkpoint_model_config(checkpoint, config)
    form = checkpoint_form(checkpoint)
    tower = tower_settings(checkpoint) if resolved.similarity == "checkpoint" else None
    model = build_text_model(
        MODEL,
        checkpoint.vocab_size,
        resolved,
        levels,
        item_levels=item_levels,
        form=form,
        tower=tower,
    )
    load_checkpoint_weights(model, checkpoint)
    if tower is not None:
        load_tower_weights(model.get_layer(SIMILARITY_LAYER), checkpoint)
    logger.info("the listformer starts from %s", checkpoint.directory)
    vocabulary = list(checkpoint.vocabulary)
    return PretrainedListformer(model, tokenizer, vocabulary, resolved, form, checkpoint.vocab_size)


def listformer_from_checkpoint(
    directory: str,
    config: ModelConfig,
    levels: int | None,
    *,
    item_levels: int | None = None,
    max_query_tokens: int,
    max_document_tokens: int,
) -> PretrainedListformer:
    """``pretrained_listformer`` from the checkpoint in ``directory``."""
    checkpoint = read_bert_checkpoint(directory)
    tokenizer = checkpoint_tokenizer(
        checkpoint, max_query_tokens=max_query_tokens, max_document_tokens=max_document_tokens
    )
    return pretrained_listformer(checkpoint, tokenizer, config, levels, item_levels=item_levels)
