"""The Listformer's tokenisation for clients of the token-id export, with HF ``tokenizers``.

A token-id export (``export_token_ids/<version>/``) takes WordPiece ids, so TF Serving needs
no TF Text op. :class:`ClientTokenizer` reads its ``assets.extra/`` and splits as the
raw-string export's ``TextTokenizer`` does, without TensorFlow, but for a word over 100
characters (TF Text: bytes) and characters Unicode versions class differently.

>>> t = ClientTokenizer(["[PAD]", "[UNK]", "run", "##s", "!"], max_query_tokens=4,
...                     max_document_tokens=2)
>>> t.token_ids("Runs! Walks")
[2, 3, 4, 1]
>>> t.encode(["runs"], [["run run run", ""]])["document_mask"]
[[True, False]]
"""

from __future__ import annotations

import os

from tokenizers import Regex, Tokenizer, models, normalizers, pre_tokenizers

from tfr_rankformer.core.config_io import read_settings
from tfr_rankformer.core.elwc_schema import FIRST_STAGE_INPUT
from tfr_rankformer.core.run_layout import TOKEN_ID_EXPORT_NAME

__all__ = [
    "ASSETS_EXTRA",
    "SETTINGS_NAME",
    "VOCAB_FILE",
    "ClientTokenizer",
    "tokenizer_settings",
]

SETTINGS_NAME = "tokenizer.json"  # the settings, beside vocab.txt in assets.extra/
VOCAB_FILE = "vocab.txt"
ASSETS_EXTRA = "assets.extra"
PADDING_ID = -1

# BERT's cleaning deletes NUL, U+FFFD and control, format, private-use and unassigned
# characters, keeping tab and line breaks (also in the graph: ``text_tokenizer``).
BERT_DELETED = r"[\x00\x{FFFD}]|[^\P{C}\t\n\r]"
# BertTokenizer splits on RE2's \s alone (a no-break space stays inside its word);
# FastWordpieceTokenizer on Unicode's White_Space.
_ASCII_SPACE = r"[\t\n\f\r ]+"
_WHITE_SPACE = r"[\t\n\x{0B}\f\r \x{85}\x{A0}\x{1680}\x{2000}-\x{200A}\x{2028}\x{2029}"
_WHITE_SPACE += r"\x{202F}\x{205F}\x{3000}]+"
_SETTINGS = ("max_query_tokens", "max_document_tokens", "lower_case", "basic_tokenization")
_SETTINGS += ("unknown_token", "suffix_indicator", "max_bytes_per_word")


def _padded(rows: list, width: int) -> list:
    return [row + [PADDING_ID] * (width - len(row)) for row in rows]


class ClientTokenizer:
    """Text to the token-id export's inputs, as the raw-string export tokenises; ``first_stage``:
    the export takes ``first_stage_scores [B, L]`` (``None``: not known)."""

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
        first_stage: bool | None = None,
    ):
        ids = {token: i for i, token in enumerate(vocabulary)}
        if unknown_token not in ids:
            raise ValueError(f"the vocabulary has no {unknown_token} token")
        self.max_query_tokens = max_query_tokens
        self.max_document_tokens = max_document_tokens
        self.lower_case = lower_case
        self.basic_tokenization = basic_tokenization
        self.first_stage = first_stage
        self.unknown_id = ids[unknown_token]
        tokenizer = Tokenizer(
            models.WordPiece(
                ids,
                unk_token=unknown_token,
                continuing_subword_prefix=suffix_indicator,
                max_input_chars_per_word=max_bytes_per_word,
            )
        )
        steps = [normalizers.Replace(Regex(BERT_DELETED), "")] if basic_tokenization else []
        if basic_tokenization and lower_case:
            steps += [normalizers.NFD(), normalizers.StripAccents()]
        # Spaces around CJK ideographs, which makes each a word of its own.
        steps.append(
            normalizers.BertNormalizer(
                clean_text=False, handle_chinese_chars=True, strip_accents=False, lowercase=False
            )
        )
        tokenizer.normalizer = normalizers.Sequence(steps)
        spaces = _ASCII_SPACE if basic_tokenization else _WHITE_SPACE
        tokenizer.pre_tokenizer = pre_tokenizers.Sequence(
            [pre_tokenizers.Split(Regex(spaces), "removed"), pre_tokenizers.Punctuation()]
        )
        self._tokenizer = tokenizer

    @classmethod
    def from_files(cls, vocab_path: str, settings_path: str) -> ClientTokenizer:
        """The tokenizer of a ``vocab.txt`` and a ``tokenizer.json`` (``tokenizer_settings``)."""
        settings = read_settings(settings_path)
        with open(vocab_path, encoding="utf-8") as f:
            vocabulary = [line.rstrip("\n") for line in f]
        missing = [key for key in _SETTINGS if key not in settings]
        if missing:
            raise ValueError(f"{settings_path}: missing {', '.join(missing)}")
        first_stage = settings.get(FIRST_STAGE_INPUT)
        return cls(vocabulary, **{key: settings[key] for key in _SETTINGS}, first_stage=first_stage)

    @classmethod
    def from_export(cls, export_dir: str) -> ClientTokenizer:
        """The tokenizer of a token-id export, or of a run's newest."""
        runs = os.path.join(export_dir, TOKEN_ID_EXPORT_NAME)
        if not os.path.isdir(os.path.join(export_dir, ASSETS_EXTRA)) and os.path.isdir(runs):
            newest = max((v for v in os.listdir(runs) if v.isdigit()), key=int, default="")
            export_dir = os.path.join(runs, newest)
        extra = os.path.join(export_dir, ASSETS_EXTRA)
        return cls.from_files(os.path.join(extra, VOCAB_FILE), os.path.join(extra, SETTINGS_NAME))

    def _lowered(self, text: str) -> str:
        # Python's lower-casing, as ICU's, knows the Greek final sigma; HF's does not.
        if not self.lower_case:
            return text
        # tf.strings.lower ends the text at its first NUL.
        return (text if self.basic_tokenization else text.split("\x00", 1)[0]).lower()

    def token_ids_batch(self, texts: list[str]) -> list[list[int]]:
        """The ids of each of ``texts``, uncut."""
        lowered = [self._lowered(text) for text in texts]
        encodings = self._tokenizer.encode_batch(lowered, add_special_tokens=False)
        return [encoding.ids for encoding in encodings]

    def token_ids(self, text: str) -> list[int]:
        """All of ``text``'s ids, uncut."""
        return self.token_ids_batch([text])[0]

    def encode(
        self,
        queries: list[str],
        documents: list[list[str]],
        first_stage_scores: list[list[float]] | None = None,
    ) -> dict:
        """The token-id signature's inputs as nested lists: ``query_ids [B][Q]``, ``document_ids
        [B][N][T]`` (``-1`` padding), ``document_mask [B][N]`` (an empty document is padding) and
        ``first_stage_scores [B][N]`` for an export that takes them."""
        if len(queries) != len(documents):
            raise ValueError(f"{len(queries)} queries but {len(documents)} document lists")
        if self.first_stage not in (None, first_stage_scores is not None):
            needs = "needs" if self.first_stage else "does not take"
            raise ValueError(
                f"the export {needs} the input {FIRST_STAGE_INPUT} (each document's "
                "first-stage score)"
            )
        query_rows = [ids[: self.max_query_tokens] for ids in self.token_ids_batch(queries)]
        size = max((len(texts) for texts in documents), default=0)
        lists = [list(texts) + [""] * (size - len(texts)) for texts in documents]
        flat = self.token_ids_batch([text for texts in lists for text in texts])
        flat = [ids[: self.max_document_tokens] for ids in flat]
        rows = [flat[i * size : (i + 1) * size] for i in range(len(lists))]
        query_width = max([1, *(len(row) for row in query_rows)])
        width = max([1, *(len(row) for row in flat)])
        encoded = {
            "query_ids": _padded(query_rows, query_width),
            "document_ids": [_padded(texts, width) for texts in rows],
            "document_mask": [[text != "" for text in texts] for texts in lists],
        }
        if first_stage_scores is not None:
            if [len(s) for s in first_stage_scores] != [len(texts) for texts in documents]:
                raise ValueError(f"{FIRST_STAGE_INPUT} must hold one score per document")
            encoded[FIRST_STAGE_INPUT] = [
                [float(x) for x in s] + [0.0] * (size - len(s)) for s in first_stage_scores
            ]
        return encoded

    def arrays(self, queries, documents, first_stage_scores=None) -> dict:
        """``encode``'s inputs as numpy arrays of the signature's dtypes."""
        import numpy as np

        encoded = self.encode(queries, documents, first_stage_scores)
        ids = np.array(encoded.pop("document_ids"), np.int32)
        if ids.ndim < 3:  # no document in the batch: [B, 0, 1]
            ids = ids.reshape(len(queries), 0, 1)
        dtypes = {"query_ids": np.int32, "document_mask": bool, FIRST_STAGE_INPUT: np.float32}
        arrays = {name: np.array(value, dtypes[name]) for name, value in encoded.items()}
        for name in ("document_mask", FIRST_STAGE_INPUT):
            if name in arrays:
                arrays[name] = arrays[name].reshape(ids.shape[:2])
        return {**arrays, "document_ids": ids}

    def rest_request(self, queries, documents, first_stage_scores=None) -> dict:
        """A TF Serving REST ``:predict`` body (columnar ``inputs``) for the lists."""
        inputs = self.encode(queries, documents, first_stage_scores)
        return {"signature_name": "serving_default", "inputs": inputs}

    def grpc_request(self, queries, documents, first_stage_scores=None, *, model_name: str):
        """A TF Serving gRPC ``PredictRequest`` for the lists (imports TensorFlow)."""
        from tfr_rankformer.serving.serving_requests import predict_request

        inputs = self.arrays(queries, documents, first_stage_scores)
        return predict_request(inputs, model_name=model_name, signature_name="serving_default")


def tokenizer_settings(tokenizer, *, first_stage: bool = False) -> dict:
    """``tokenizer.json``'s content: what :class:`ClientTokenizer` needs besides ``vocab.txt``
    to split as ``tokenizer`` (the export's ``TextTokenizer``) does."""
    return {
        "vocabulary": VOCAB_FILE,
        **{key: getattr(tokenizer, key) for key in _SETTINGS[:4]},
        "unknown_token": "[UNK]",
        "suffix_indicator": "##",
        "max_bytes_per_word": 100,
        "padding_id": PADDING_ID,
        FIRST_STAGE_INPUT: first_stage,
        "client": "tfr_rankformer/serving/client_tokenizer.py (HF tokenizers)",
    }
