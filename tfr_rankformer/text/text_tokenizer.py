"""WordPiece tokenisation in the graph (TF Text, so a SavedModel takes raw text), and a
vocabulary built from the training text. A checkpoint's vocabulary (``basic_tokenization``)
is split as BERT's tokenizer splits (cleaning, lower-casing and accent stripping here, since
``BertTokenizer``'s NFKC case folding changes letters BERT keeps).
"""

from __future__ import annotations

import collections
import os
import re
import warnings
from collections.abc import Iterable

import tensorflow as tf

from tfr_rankformer.core.atomic_files import atomic_write
from tfr_rankformer.serving.client_tokenizer import BERT_DELETED

__all__ = [
    "SPECIAL_TOKENS",
    "UNKNOWN",
    "TextTokenizer",
    "at_least_one_token",
    "build_vocabulary",
    "count_words",
    "read_vocabulary",
    "register_text_ops",
    "write_vocabulary",
]

UNKNOWN = "[UNK]"
# [CLS] and [SEP] are learned vectors, kept in the vocabulary so it reads like a BERT one.
SPECIAL_TOKENS = ("[PAD]", UNKNOWN, "[CLS]", "[SEP]")
SUFFIX = "##"
# What FastWordpieceTokenizer's pre-tokenisation splits on (whitespace and punctuation).
_WORDS = re.compile(r"\w+|[^\w\s]", re.UNICODE)


def register_text_ops():
    """TF Text, its ops registered in this process (loading a raw-string export needs them)."""
    # tensorflow-text imports tensorflow-hub, which warns about pkg_resources.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import tensorflow_text

    return tensorflow_text


def count_words(texts: Iterable[str], counts: collections.Counter | None = None):
    """Word counts of ``texts`` as the tokenizer splits them (lower-cased)."""
    counts = collections.Counter() if counts is None else counts
    for text in texts:
        counts.update(_WORDS.findall(text.lower()))
    return counts


def build_vocabulary(word_counts: dict[str, int], *, size: int) -> list[str]:
    """A WordPiece vocabulary of at most ``size`` entries by frequency (not BERT's training):
    the special tokens, every character (also as ``##``), then the words, prefixes and ``##``
    suffixes of 2 to 6 characters covering the most occurrences."""
    characters: collections.Counter = collections.Counter()
    pieces: collections.Counter = collections.Counter()
    for word, count in word_counts.items():
        for char in word:
            characters[char] += count
        if len(word) > 1:
            pieces[word] += count
        for cut in range(2, min(6, len(word) - 1) + 1):
            pieces[word[:cut]] += count  # a prefix: a word piece that starts a word
            pieces[SUFFIX + word[-cut:]] += count
    by_count = sorted(characters, key=lambda c: (-characters[c], c))
    base = [*SPECIAL_TOKENS, *by_count, *(SUFFIX + c for c in by_count)]
    if size < len(base):
        raise ValueError(
            f"a vocabulary of {size} entries cannot hold the {len(SPECIAL_TOKENS)} special tokens "
            f"and the {len(by_count)} characters of the training text (twice, with ##): "
            f"give --vocab-size of at least {len(base)}"
        )
    # Ties: whole words first, then longer pieces, then alphabetical.
    ranked = sorted(pieces, key=lambda p: (-pieces[p], p not in word_counts, -len(p), p))
    return base + ranked[: size - len(base)]


def write_vocabulary(path: str, vocabulary: list[str]) -> None:
    """One token per line, as BERT's ``vocab.txt``."""
    with atomic_write(path) as f:
        f.writelines(token + "\n" for token in vocabulary)


def read_vocabulary(path: str) -> list[str]:
    """A vocabulary file (one token per line); errors name the file and line."""
    if not os.path.isfile(path):
        raise FileNotFoundError(f"vocabulary file {path} does not exist")
    with open(path, encoding="utf-8") as f:
        vocabulary = [line.rstrip("\n") for line in f]
    seen: dict[str, int] = {}
    for number, token in enumerate(vocabulary, start=1):
        if not token or token != token.strip():
            raise ValueError(f"{path}:{number}: an empty token or one with surrounding spaces")
        if token in seen:
            raise ValueError(f"{path}:{number}: {token!r} repeats line {seen[token]}")
        seen[token] = number
    if UNKNOWN not in seen:
        raise ValueError(f"{path}: the vocabulary has no {UNKNOWN} token")
    return vocabulary


class TextTokenizer(tf.Module):
    """Strings to WordPiece ids, cut to ``max_query_tokens`` and ``max_document_tokens``."""

    def __init__(
        self,
        vocabulary: list[str],
        *,
        max_query_tokens: int,
        max_document_tokens: int,
        lower_case: bool = True,
        basic_tokenization: bool = False,
    ):
        super().__init__(name="text_tokenizer")
        self.vocab_size = len(vocabulary)
        self.max_query_tokens = max_query_tokens
        self.max_document_tokens = max_document_tokens
        self.lower_case = lower_case
        self.basic_tokenization = basic_tokenization
        if basic_tokenization:
            self.wordpiece = _bert_tokenizer(vocabulary)
            return
        self.wordpiece = register_text_ops().FastWordpieceTokenizer(
            vocab=list(vocabulary),
            suffix_indicator=SUFFIX,
            unknown_token=UNKNOWN,
            token_out_type=tf.int32,
        )

    def token_ids(self, strings: tf.Tensor) -> tf.RaggedTensor:
        """``[...]`` strings -> ``[..., (tokens)]`` int32 ids, uncut."""
        if self.basic_tokenization:
            strings = _bert_normalised(strings, lower_case=self.lower_case)
            return self.wordpiece.tokenize(strings).merge_dims(-2, -1)  # [..., (words), (pieces)]
        if self.lower_case:
            strings = tf.strings.lower(strings, encoding="utf-8")
        return self.wordpiece.tokenize(strings)

    def encode(self, query: tf.Tensor, documents: tf.Tensor) -> dict:
        """``query [B]`` and ``documents [B, N]`` strings -> ``query_ids [B, Q]`` and
        ``document_ids [B, N, T]`` int32 (``-1`` padding, cut at the caps) and ``query_cut
        [B]``, ``documents_cut [B, N]``: the text had more tokens."""
        query_tokens = self.token_ids(query)  # [B, (q)]
        document_tokens = self.token_ids(documents)  # [B, N, (t)]
        query_cut = query_tokens.row_lengths(axis=-1) > self.max_query_tokens
        documents_cut = document_tokens.row_lengths(axis=-1) > self.max_document_tokens
        if isinstance(documents_cut, tf.RaggedTensor):  # [B, (N)] with N uniform: [B, N]
            documents_cut = documents_cut.to_tensor(default_value=False)
        query_ids = query_tokens[:, : self.max_query_tokens].to_tensor(default_value=-1)
        document_ids = document_tokens[:, :, : self.max_document_tokens].to_tensor(default_value=-1)
        return {
            "query_ids": at_least_one_token(query_ids),
            "document_ids": at_least_one_token(document_ids),
            "query_cut": query_cut,
            "documents_cut": documents_cut,
        }


def _bert_normalised(strings: tf.Tensor, *, lower_case: bool) -> tf.Tensor:
    """Hugging Face's ``BertNormalizer``: cleaning, and lower-casing and accent stripping."""
    strings = tf.strings.regex_replace(strings, BERT_DELETED, "")
    if not lower_case:
        return strings
    strings = register_text_ops().normalize_utf8(tf.strings.lower(strings, encoding="utf-8"), "NFD")
    return tf.strings.regex_replace(strings, r"\p{Mn}", "")


def _bert_tokenizer(vocabulary: list[str]):
    """TF Text's ``BertTokenizer`` on a table of constants (a SavedModel carries it)."""
    ids = tf.range(len(vocabulary), dtype=tf.int64)
    initializer = tf.lookup.KeyValueTensorInitializer(list(vocabulary), ids)
    table = tf.lookup.StaticHashTable(initializer, default_value=-1)
    return register_text_ops().BertTokenizer(
        table,
        suffix_indicator=SUFFIX,
        unknown_token=UNKNOWN,
        lower_case=False,
        token_out_type=tf.int32,
    )


def at_least_one_token(ids: tf.Tensor) -> tf.Tensor:
    """``ids [..., K]`` padded with ``-1`` to ``K >= 1``: a batch without tokens needs an axis."""
    missing = tf.maximum(1 - tf.shape(ids)[-1], 0)
    rank = ids.shape.rank
    return tf.pad(ids, [[0, 0]] * (rank - 1) + [[0, missing]], constant_values=-1)
