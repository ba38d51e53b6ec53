"""WordPiece tokenisation in the graph, and a vocabulary built from the training text.

:class:`TextTokenizer` turns strings into ids with TF Text, so a SavedModel takes raw text.
A vocabulary built from the training text is split with ``FastWordpieceTokenizer`` on white
space and punctuation after ``tf.strings.lower``; a checkpoint's (``basic_tokenization``) as
its own tokenizer splits: control characters deleted, lower-cased and accents stripped when
``lower_case``, then ``BertTokenizer``. Lower-casing happens here because ``BertTokenizer``'s
NFKC case folding changes ligatures and full-width letters that BERT's tokenizer keeps.

:func:`build_vocabulary` is a deterministic frequency heuristic, not BERT's
likelihood-driven WordPiece training: the special tokens, every character (alone and as a
``##`` continuation), then the whole words, prefixes and ``##`` suffixes (2 to 6 characters)
covering the most word occurrences (ties: whole words, then longer, then alphabetical).
"""

from __future__ import annotations

import collections
import os
import re
import warnings
from collections.abc import Iterable

import tensorflow as tf

from tfr_rankformer.core.atomic_files import atomic_write

__all__ = [
    "SPECIAL_TOKENS",
    "UNKNOWN",
    "TextTokenizer",
    "build_vocabulary",
    "count_words",
    "read_vocabulary",
    "register_text_ops",
    "write_vocabulary",
]

UNKNOWN = "[UNK]"
# [CLS] and [SEP] are the model's own learned vectors; they are kept in the
# vocabulary file so it reads like a BERT one.
SPECIAL_TOKENS = ("[PAD]", UNKNOWN, "[CLS]", "[SEP]")
SUFFIX = "##"
# What BERT's tokenizer deletes before splitting: NUL, U+FFFD and every other
# control, format, private-use or unassigned character except tab and line breaks.
_BERT_DELETED = r"[\x00\x{FFFD}]|[^\P{C}\t\n\r]"
# What FastWordpieceTokenizer's pre-tokenisation splits on (whitespace and punctuation).
_WORDS = re.compile(r"\w+|[^\w\s]", re.UNICODE)


def _text():
    # tensorflow-text imports tensorflow-hub, which warns about pkg_resources.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import tensorflow_text

    return tensorflow_text


def register_text_ops() -> None:
    """Registers TF Text's ops in this process, which loading a raw-string export needs."""
    _text()


def count_words(texts: Iterable[str], counts: collections.Counter | None = None):
    """Word counts of ``texts`` as the tokenizer splits them (lower-cased)."""
    counts = collections.Counter() if counts is None else counts
    for text in texts:
        counts.update(_WORDS.findall(text.lower()))
    return counts


def build_vocabulary(word_counts: dict[str, int], *, size: int) -> list[str]:
    """A WordPiece vocabulary of at most ``size`` entries from ``word_counts``; a
    ``ValueError`` if ``size`` cannot hold the special tokens and every character."""
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
    """A vocabulary file (one token per line, as BERT's ``vocab.txt``); errors name the file
    and the line of a bad entry."""
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
    """Strings to WordPiece ids, cut to ``max_query_tokens`` and ``max_document_tokens``;
    ``lower_case`` and ``basic_tokenization`` as the module says."""

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
        self.wordpiece = _text().FastWordpieceTokenizer(
            vocab=list(vocabulary),
            suffix_indicator=SUFFIX,
            unknown_token=UNKNOWN,
            no_pretokenization=False,
            support_detokenization=False,
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
        """Model inputs from ``query [B]`` and ``documents [B, N]`` strings.

        ``query_ids [B, Q]`` and ``document_ids [B, N, T]`` int32 (``-1`` where there is no
        token; ``Q``, ``T`` the batch's longest within the caps), and ``query_cut [B]``,
        ``documents_cut [B, N]``: the text had more tokens.
        """
        query_tokens = self.token_ids(query)  # [B, (q)]
        document_tokens = self.token_ids(documents)  # [B, N, (t)]
        query_cut = query_tokens.row_lengths(axis=-1) > self.max_query_tokens
        documents_cut = document_tokens.row_lengths(axis=-1) > self.max_document_tokens
        if isinstance(documents_cut, tf.RaggedTensor):  # [B, (N)] with N uniform: [B, N]
            documents_cut = documents_cut.to_tensor(default_value=False)
        query_ids = query_tokens[:, : self.max_query_tokens].to_tensor(default_value=-1)
        document_ids = document_tokens[:, :, : self.max_document_tokens].to_tensor(default_value=-1)
        # A batch without any token still needs a token axis of length >= 1.
        query_ids = _at_least_one(query_ids)
        document_ids = _at_least_one(document_ids)
        return {
            "query_ids": query_ids,
            "document_ids": document_ids,
            "query_cut": query_cut,
            "documents_cut": documents_cut,
        }


def _bert_normalised(strings: tf.Tensor, *, lower_case: bool) -> tf.Tensor:
    """BERT's text cleaning and, with ``lower_case``, its lower-casing and accent stripping,
    as Hugging Face's ``BertNormalizer`` does them."""
    strings = tf.strings.regex_replace(strings, _BERT_DELETED, "")
    if not lower_case:
        return strings
    strings = _text().normalize_utf8(tf.strings.lower(strings, encoding="utf-8"), "NFD")
    return tf.strings.regex_replace(strings, r"\p{Mn}", "")


def _bert_tokenizer(vocabulary: list[str]):
    """TF Text's ``BertTokenizer`` over ``vocabulary``, its table built from constants so that
    a SavedModel carries it; the text reaches it normalised."""
    table = tf.lookup.StaticHashTable(
        tf.lookup.KeyValueTensorInitializer(
            tf.constant(list(vocabulary), tf.string),
            tf.range(len(vocabulary), dtype=tf.int64),
        ),
        default_value=-1,
    )
    return _text().BertTokenizer(
        table,
        suffix_indicator=SUFFIX,
        unknown_token=UNKNOWN,
        lower_case=False,
        token_out_type=tf.int32,
    )


def _at_least_one(ids: tf.Tensor) -> tf.Tensor:
    missing = tf.maximum(1 - tf.shape(ids)[-1], 0)
    rank = ids.shape.rank
    return tf.pad(ids, [[0, 0]] * (rank - 1) + [[0, missing]], constant_values=-1)
