"""The Listformer's tokenisation in plain Python, for clients of the token-id export.

A Listformer's token-id export (``text_export``: ``export_token_ids/<version>/``)
takes WordPiece ids instead of text, so TF Serving needs no TF Text op; the
client tokenises. :class:`ClientTokenizer` reads the export's
``assets.extra/vocab.txt`` and ``assets.extra/tokenizer.json`` and gives the
ids and masks ``TextTokenizer.encode`` (the raw-string export's graph) gives,
with the standard library alone: no TensorFlow, no TF Text.

The two ways of splitting, as ``TextTokenizer`` does them:

* ``basic_tokenization`` off (a vocabulary built from the training text):
  lower-case (``lower_case``), then split on Unicode white space and cut out
  punctuation, ASCII symbols and CJK ideographs as one-character words (TF
  Text's ``FastWordpieceTokenizer``);
* on (a BERT checkpoint's vocabulary): delete NUL, U+FFFD and control,
  format, private-use and surrogate characters (tab and line breaks kept);
  with ``lower_case`` lower-case, decompose (NFD) and drop the combining
  marks; then split on ASCII space, tab and line breaks alone (RE2's ``\\s``;
  a no-break space stays inside its word) and cut out the same characters
  (TF Text's ``BertTokenizer``).

Each word is then split greedily, longest vocabulary match first, its later
pieces written with ``##``; a word with a piece missing from the vocabulary, or
longer than ``max_bytes_per_word`` UTF-8 bytes, is one ``[UNK]``. Text is cut
at ``max_query_tokens`` and ``max_document_tokens``; ids are padded with
``-1``. The model adds ``[CLS]`` and ``[SEP]`` itself: the client sends neither.

Character classes come from Python's ``unicodedata``, TF's from its own ICU
and RE2 tables; characters assigned in a Unicode version only one of them
knows may split differently.

>>> t = ClientTokenizer(["[PAD]", "[UNK]", "run", "##s", "!"], max_query_tokens=4,
...                     max_document_tokens=2)
>>> t.token_ids("Runs! Walks")
[2, 3, 4, 1]
>>> t.encode(["runs"], [["run run run", ""]])["document_mask"]
[[True, False]]
"""

from __future__ import annotations

import json
import os
import unicodedata

__all__ = [
    "ASSETS_EXTRA",
    "PADDING_ID",
    "SETTINGS_NAME",
    "VOCAB_FILE",
    "ClientTokenizer",
    "tokenizer_settings",
]

SETTINGS_NAME = "tokenizer.json"  # the settings, beside vocab.txt in assets.extra/
VOCAB_FILE = "vocab.txt"
ASSETS_EXTRA = "assets.extra"
PADDING_ID = -1

# Unicode's White_Space property (what ICU's u_isUWhiteSpace tests): str.isspace
# less the information separators U+001C..U+001F.
_WHITE_SPACE = frozenset(
    "\t\n\x0b\x0c\r \x85\xa0\u1680\u2028\u2029\u202f\u205f\u3000"
    + "".join(chr(c) for c in range(0x2000, 0x200B))
)
# RE2's \s, which BertTokenizer splits on.
_ASCII_SPACE = frozenset("\t\n\x0c\r ")
# CJK ideograph blocks BERT cuts into one-character words.
_CJK = (
    (0x4E00, 0x9FFF),
    (0x3400, 0x4DBF),
    (0x20000, 0x2A6DF),
    (0x2A700, 0x2B73F),
    (0x2B740, 0x2B81F),
    (0x2B820, 0x2CEAF),
    (0xF900, 0xFAFF),
    (0x2F800, 0x2FA1F),
)


def _stands_alone(char: str) -> bool:
    """Whether ``char`` is a word by itself: ASCII punctuation and symbols, any
    Unicode punctuation (P*), a CJK ideograph."""
    code = ord(char)
    if 33 <= code <= 47 or 58 <= code <= 64 or 91 <= code <= 96 or 123 <= code <= 126:
        return True
    if unicodedata.category(char).startswith("P"):
        return True
    return any(low <= code <= high for low, high in _CJK)


def _bert_deleted(char: str) -> bool:
    """What the BERT-style cleaning deletes (``text_tokenizer._BERT_DELETED``)."""
    if char in "\x00\ufffd":
        return True
    return unicodedata.category(char) in ("Cc", "Cf", "Co", "Cs") and char not in "\t\n\r"


def _words(text: str, spaces: frozenset) -> list[str]:
    """``text`` split on ``spaces``, each standalone character a word of its own."""
    words: list[str] = []
    start = None
    for i, char in enumerate(text):
        alone = _stands_alone(char)
        if char in spaces or alone:
            if start is not None:
                words.append(text[start:i])
                start = None
            if alone:
                words.append(char)
        elif start is None:
            start = i
    if start is not None:
        words.append(text[start:])
    return words


def _padded(rows: list, width: int) -> list:
    return [row + [PADDING_ID] * (width - len(row)) for row in rows]


class ClientTokenizer:
    """Text to the token-id export's inputs, as the raw-string export tokenises.

    Args:
      vocabulary: the WordPiece vocabulary (``vocab.txt``'s lines), holding
        ``unknown_token``.
      max_query_tokens, max_document_tokens: the model's caps; longer text is cut.
      lower_case, basic_tokenization: as ``TextTokenizer``'s (see the module).
      unknown_token, suffix_indicator, max_bytes_per_word: WordPiece's settings.
    """

    def __init__(
        self,
        vocabulary: list[str],
        *,
        max_query_tokens: int,
        max_document_tokens: int,
        lower_case: bool = True,
        basic_tokenization: bool = False,
        unknown_token: str = "[UNK]",
        suffix_indicator: str = "##",
        max_bytes_per_word: int = 100,
    ):
        self.ids = {token: i for i, token in enumerate(vocabulary)}
        if unknown_token not in self.ids:
            raise ValueError(f"the vocabulary has no {unknown_token} token")
        self.max_query_tokens = max_query_tokens
        self.max_document_tokens = max_document_tokens
        self.lower_case = lower_case
        self.basic_tokenization = basic_tokenization
        self.unknown_id = self.ids[unknown_token]
        self.suffix_indicator = suffix_indicator
        self.max_bytes_per_word = max_bytes_per_word
        self._longest = max(len(token) for token in vocabulary)

    @classmethod
    def from_files(cls, vocab_path: str, settings_path: str) -> ClientTokenizer:
        """The tokenizer of a ``vocab.txt`` and a ``tokenizer.json`` (``tokenizer_settings``)."""
        with open(settings_path, encoding="utf-8") as f:
            settings = json.load(f)
        with open(vocab_path, encoding="utf-8") as f:
            vocabulary = [line.rstrip("\n") for line in f]
        keys = ("max_query_tokens", "max_document_tokens", "lower_case", "basic_tokenization")
        keys += ("unknown_token", "suffix_indicator", "max_bytes_per_word")
        missing = [key for key in keys if key not in settings]
        if missing:
            raise ValueError(f"{settings_path}: missing {', '.join(missing)}")
        return cls(vocabulary, **{key: settings[key] for key in keys})

    @classmethod
    def from_export(cls, export_dir: str) -> ClientTokenizer:
        """The tokenizer of a token-id export (``export_token_ids/<version>``)."""
        extra = os.path.join(export_dir, ASSETS_EXTRA)
        return cls.from_files(os.path.join(extra, VOCAB_FILE), os.path.join(extra, SETTINGS_NAME))

    def normalised(self, text: str) -> str:
        """``text`` as the splitting sees it (lower-cased, cleaned)."""
        if not self.basic_tokenization:
            # tf.strings.lower ends the text at its first NUL.
            return text.split("\x00", 1)[0].lower() if self.lower_case else text
        text = "".join(char for char in text if not _bert_deleted(char))
        if self.lower_case:
            text = unicodedata.normalize("NFD", text.lower())
            text = "".join(c for c in text if unicodedata.category(c) != "Mn")
        return text

    def word_pieces(self, word: str) -> list[int]:
        """``word``'s ids: longest vocabulary match first, later pieces with ``##``."""
        if len(word.encode("utf-8")) > self.max_bytes_per_word:
            return [self.unknown_id]
        pieces = []
        start = 0
        while start < len(word):
            prefix = self.suffix_indicator if start else ""
            end = min(len(word), start + self._longest)
            while end > start and prefix + word[start:end] not in self.ids:
                end -= 1
            if end == start:
                return [self.unknown_id]
            pieces.append(self.ids[prefix + word[start:end]])
            start = end
        return pieces

    def token_ids(self, text: str) -> list[int]:
        """All of ``text``'s ids, uncut."""
        spaces = _ASCII_SPACE if self.basic_tokenization else _WHITE_SPACE
        ids: list[int] = []
        for word in _words(self.normalised(text), spaces):
            ids += self.word_pieces(word)
        return ids

    def encode(self, queries: list[str], documents: list[list[str]]) -> dict:
        """The token-id signature's inputs for a batch of lists.

        Args:
          queries: ``B`` query strings.
          documents: ``B`` lists of document strings, of any lengths; an empty
            string is a padding document, as in the raw-string export.

        Returns:
          ``query_ids [B][Q]``, ``document_ids [B][N][T]`` (ints, ``-1`` padding;
          ``Q``, ``T`` the batch's longest after the cut, at least 1; ``N`` the
          longest list) and ``document_mask [B][N]`` (bools), as nested lists.
        """
        if len(queries) != len(documents):
            raise ValueError(f"{len(queries)} queries but {len(documents)} document lists")
        query_rows = [self.token_ids(q)[: self.max_query_tokens] for q in queries]
        size = max((len(texts) for texts in documents), default=0)
        lists = [list(texts) + [""] * (size - len(texts)) for texts in documents]
        rows = [[self.token_ids(d)[: self.max_document_tokens] for d in texts] for texts in lists]
        query_width = max([1, *(len(row) for row in query_rows)])
        width = max([1, *(len(row) for texts in rows for row in texts)])
        return {
            "query_ids": _padded(query_rows, query_width),
            "document_ids": [_padded(texts, width) for texts in rows],
            "document_mask": [[text != "" for text in texts] for texts in lists],
        }

    def rest_request(self, queries: list[str], documents: list[list[str]]) -> dict:
        """A TF Serving REST ``:predict`` body (columnar ``inputs``) for the lists."""
        return {"signature_name": "serving_default", "inputs": self.encode(queries, documents)}


def tokenizer_settings(
    *,
    max_query_tokens: int,
    max_document_tokens: int,
    lower_case: bool,
    basic_tokenization: bool,
    unknown_token: str = "[UNK]",
    suffix_indicator: str = "##",
) -> dict:
    """``tokenizer.json``'s content: what :class:`ClientTokenizer` needs besides ``vocab.txt``."""
    return {
        "vocabulary": VOCAB_FILE,
        "max_query_tokens": max_query_tokens,
        "max_document_tokens": max_document_tokens,
        "lower_case": lower_case,
        "basic_tokenization": basic_tokenization,
        "unknown_token": unknown_token,
        "suffix_indicator": suffix_indicator,
        "max_bytes_per_word": 100,
        "padding_id": PADDING_ID,
        "client": "tfr_rankformer/serving/client_tokenizer.py (standard library only)",
    }
