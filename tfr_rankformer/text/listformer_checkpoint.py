"""A pretrained start for the Listformer: a BERT-family checkpoint's weights and vocabulary.

The Listformer is built in the checkpoint's form (post-LayerNorm, its activation and epsilon)
and sizes. Embeddings, ``[CLS]``/``[SEP]`` (their word embeddings), segments (token types 0
and 1) and every encoder layer start from the checkpoint; the global projections start as
copies of the local ones, as Longformer's did from RoBERTa; the own-document bias and the
heads start fresh. With one document inside the window and the bias at 0 the encoder
computes the checkpoint's BERT on ``[CLS] q [SEP] d``.
"""

from __future__ import annotations

import dataclasses
import logging
import os

import numpy as np
import tensorflow as tf

from tfr_rankformer.model.model_config import ModelConfig
from tfr_rankformer.text.bert_checkpoint import (
    CLS,
    CONFIG_FILE,
    SEP,
    VOCAB_FILE,
    WEIGHTS_FILE,
    BertCheckpoint,
    assign_values,
    attention_names,
    dense_values,
    layer_values,
    norm_values,
    read_bert_checkpoint,
    read_json_object,
)
from tfr_rankformer.text.listformer import SIMILARITY_LAYER, build_text_model
from tfr_rankformer.text.listformer_config import ListformerConfig
from tfr_rankformer.text.listformer_form import ListformerForm
from tfr_rankformer.text.sentence_tower import load_tower_weights, tower_settings
from tfr_rankformer.text.text_tokenizer import TextTokenizer

__all__ = [
    "CHECKPOINT_FILES",
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
CHECKPOINT_SIZES = {
    "width": "hidden_size",
    "num_layers": "num_hidden_layers",
    "num_heads": "num_attention_heads",
    "ff_dim": "intermediate_size",
    "max_positions": "max_position_embeddings",
}


@dataclasses.dataclass(frozen=True)
class PretrainedListformer:
    """A Listformer started from a checkpoint (heads fresh), its tokenizer and vocabulary,
    the resolved settings and layer form, and the checkpoint's ``vocab_size`` (which may exceed
    ``len(vocabulary)``): what a run records to rebuild it.
    """

    model: tf.keras.Model
    tokenizer: TextTokenizer
    vocabulary: list
    config: ModelConfig
    form: ListformerForm
    vocab_size: int

    def settings(self) -> dict:
        """What rebuilding the model and tokenizer needs besides the architecture and
        ``vocab.txt`` (JSON)."""
        return _settings(self.form, self.vocab_size, self.tokenizer)


def _settings(form: ListformerForm, vocab_size: int, tokenizer: TextTokenizer) -> dict:
    return {
        "form": form.to_json(),
        "vocab_size": vocab_size,
        "lower_case": tokenizer.lower_case,
        "basic_tokenization": tokenizer.basic_tokenization,
    }


def pretrained_settings(checkpoint: BertCheckpoint, tokenizer: TextTokenizer) -> dict:
    """``PretrainedListformer.settings`` of a start from ``checkpoint``, without a model."""
    return _settings(checkpoint_form(checkpoint), checkpoint.vocab_size, tokenizer)


def checkpoint_model_config(checkpoint: BertCheckpoint, config: ModelConfig) -> ModelConfig:
    """``config`` resolved for the Listformer with the checkpoint's sizes
    (``CHECKPOINT_SIZES``) in place of its own."""
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
    """The tokenizer giving the checkpoint's own token ids, with the token caps; a cap
    that leaves no position for ``[SEP]`` or ``[CLS]`` raises ``ValueError``."""
    caps = {"max_query_tokens": max_query_tokens, "max_document_tokens": max_document_tokens}
    for name, cap in caps.items():
        if cap >= checkpoint.max_positions:
            raise ValueError(
                f"`{name}` {cap} needs the checkpoint's max_position_embeddings "
                f"({checkpoint.max_positions}, {checkpoint.directory}) above it"
            )
    return TextTokenizer(
        list(checkpoint.vocabulary),
        max_query_tokens=max_query_tokens,
        max_document_tokens=max_document_tokens,
        lower_case=checkpoint.lower_case,
        basic_tokenization=True,
    )


def _embedding_values(embedding, checkpoint: BertCheckpoint) -> list:
    weights = checkpoint.weights
    words = weights["embeddings.word_embeddings.weight"]
    positions = "embeddings.position_embeddings.weight"
    types = weights.get("embeddings.token_type_embeddings.weight")
    if types is None:  # no token types: the segments add nothing at first
        segments = np.zeros([2, checkpoint.width], np.float32)
    else:  # query side type 0, document side type 1 (or 0 again if it is the only one)
        segments = types[[0, min(1, len(types) - 1)]]
    special = words[[checkpoint.token_id(CLS), checkpoint.token_id(SEP)]]
    return [
        (embedding.tokens, words, "embeddings.word_embeddings.weight"),
        (embedding.positions, weights[positions], positions),
        (embedding.segments, segments, "embeddings.token_type_embeddings.weight"),
        (embedding.special, special, "embeddings.word_embeddings.weight ([CLS], [SEP])"),
        *norm_values(embedding.norm, weights, "embeddings.LayerNorm"),
    ]


def _layer_values(layer, weights: dict, index: int) -> list:
    values = layer_values(layer, weights, index)
    if layer.global_projections:  # Longformer: global projections start as the local ones
        values += dense_values(layer.qkv_global, weights, *attention_names(index))
    return values


def load_checkpoint_weights(model: tf.keras.Model, checkpoint: BertCheckpoint) -> None:
    """Sets a Listformer's embedding and encoder weights to the checkpoint's; the model
    must have the checkpoint's sizes and form. ``ValueError`` names a weight that does not fit."""
    values = _embedding_values(model.get_layer("embedding"), checkpoint)
    for i in range(checkpoint.num_layers):
        values += _layer_values(model.get_layer(f"encoder_{i}"), checkpoint.weights, i)
    assign_values(values, directory=checkpoint.directory, owner="Listformer")


def check_checkpoint_directory(directory: str) -> None:
    """Refuses (``ValueError``) a checkpoint directory that lacks one of
    ``CHECKPOINT_FILES``; nothing is read."""
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
    values = read_json_object(path)
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
    return PretrainedListformer(
        model=model,
        tokenizer=tokenizer,
        vocabulary=list(checkpoint.vocabulary),
        config=resolved,
        form=form,
        vocab_size=checkpoint.vocab_size,
    )


def listformer_from_checkpoint(
    directory: str,
    config: ModelConfig,
    levels: int | None,
    *,
    item_levels: int | None = None,
    max_query_tokens: int,
    max_document_tokens: int,
) -> PretrainedListformer:
    """A Listformer started from the Hugging Face BERT-family checkpoint in
    ``directory``; ``levels`` and ``item_levels`` as ``build_text_model``'s.

    Raises:
      FileNotFoundError / ValueError: naming the checkpoint's file and the field or weight that
        is missing, not supported or of the wrong shape.
    """
    checkpoint = read_bert_checkpoint(directory)
    tokenizer = checkpoint_tokenizer(
        checkpoint, max_query_tokens=max_query_tokens, max_document_tokens=max_document_tokens
    )
    return pretrained_listformer(checkpoint, tokenizer, config, levels, item_levels=item_levels)
