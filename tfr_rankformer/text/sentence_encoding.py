"""Sentence embeddings of raw texts from a BERT-family checkpoint directory (with
``all-MiniLM-L6-v2``: sentence-transformers' ``encode(texts, normalize_embeddings=True)``).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import tensorflow as tf

from tfr_rankformer.text.bert_checkpoint import read_bert_checkpoint
from tfr_rankformer.text.listformer_checkpoint import checkpoint_tokenizer
from tfr_rankformer.text.sentence_tower import tower_from_checkpoint
from tfr_rankformer.text.text_tokenizer import at_least_one_token

__all__ = ["SentenceEncoder"]


class SentenceEncoder:
    """A Hugging Face BERT checkpoint's sentence tower and tokenizer, read once."""

    def __init__(self, directory: str):
        checkpoint = read_bert_checkpoint(directory)
        self.directory = directory
        self.max_tokens_allowed = checkpoint.max_positions - 2  # [CLS] and [SEP]
        self.tower = tower_from_checkpoint(checkpoint, name="sentence_tower")
        self.tokenizer = checkpoint_tokenizer(
            checkpoint,
            max_query_tokens=self.max_tokens_allowed,
            max_document_tokens=self.max_tokens_allowed,
        )
        self._encode = tf.function(
            self.tower.encode, input_signature=[tf.TensorSpec([None, None], tf.int32)]
        )

    def token_ids(self, texts: Sequence[str], *, max_tokens: int) -> list[list[int]]:
        """Each text's first ``max_tokens`` WordPiece ids (no ``[CLS]`` / ``[SEP]``)."""
        if not 0 < max_tokens <= self.max_tokens_allowed:
            raise ValueError(
                f"`max_tokens` must lie in [1, {self.max_tokens_allowed}] (the position table "
                f"of {self.directory} less [CLS] and [SEP]), got {max_tokens!r}"
            )
        if not texts:
            return []
        ragged = self.tokenizer.token_ids(tf.constant(list(texts), tf.string))
        return [ids[:max_tokens] for ids in ragged.to_list()]

    def encode(
        self,
        texts: Sequence[str],
        *,
        max_tokens: int = 128,
        batch_size: int = 64,
        progress: bool = False,
    ) -> np.ndarray:
        """``[len(texts), D]`` float32 unit-length embeddings (zeros for a text without
        tokens), each text cut to ``max_tokens``, run ``batch_size`` of similar length at a time.
        """
        if batch_size < 1:
            raise ValueError(f"`batch_size` must be a positive int, got {batch_size!r}")
        ids = self.token_ids(texts, max_tokens=max_tokens)
        out = np.zeros([len(ids), self.tower.width], np.float32)
        order = sorted(range(len(ids)), key=lambda i: len(ids[i]))
        from tqdm.auto import tqdm

        starts = range(0, len(order), batch_size)
        for start in tqdm(starts, desc="texts", unit="batch", disable=None if progress else True):
            rows = order[start : start + batch_size]
            batch = tf.ragged.constant([ids[i] for i in rows], tf.int32, ragged_rank=1)
            out[rows] = self._encode(at_least_one_token(batch.to_tensor(-1))).numpy()
        return out
