"""WordPiece in the graph: the vocabulary builder, vocabulary files and the caps."""

import collections

import numpy as np
import pytest
import tensorflow as tf

from tfr_rankformer.text.text_tokenizer import (
    SPECIAL_TOKENS,
    TextTokenizer,
    build_vocabulary,
    count_words,
    read_vocabulary,
)


def test_the_vocabulary_is_deterministic_and_prefers_frequent_whole_words():
    texts = ["Running runs, the runner ran!", "the cat runs", "the the cat"]
    counts = count_words(texts)
    assert counts["the"] == 4 and counts[","] == 1 and counts["running"] == 1
    first = build_vocabulary(counts, size=40)
    shuffled = collections.Counter(dict(reversed(list(counts.items()))))
    assert build_vocabulary(shuffled, size=40) == first
    assert first[: len(SPECIAL_TOKENS)] == list(SPECIAL_TOKENS)
    assert len(first) == 40 and len(set(first)) == 40
    chars = {c for word in counts for c in word}
    assert chars <= set(first) and {"##" + c for c in chars} <= set(first)
    pieces = first[len(SPECIAL_TOKENS) + 2 * len(chars) :]
    assert pieces[0] == "the"  # the most frequent whole word first
    with pytest.raises(ValueError, match="--vocab-size of at least"):
        build_vocabulary(counts, size=10)


@pytest.mark.parametrize(
    "lines, message",
    [
        (["[UNK]", "a", "a"], ":3: 'a' repeats line 2"),
        (["[UNK]", "", "a"], ":2: an empty token"),
        (["a", "b"], "no \\[UNK\\] token"),
    ],
)
def test_bad_vocabulary_files_are_refused_with_their_line(tmp_path, lines, message):
    path = tmp_path / "vocab.txt"
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(ValueError, match=message):
        read_vocabulary(str(path))
    with pytest.raises(FileNotFoundError):
        read_vocabulary(str(tmp_path / "missing.txt"))


def test_encode_lowercases_pads_with_minus_one_and_flags_cut_text():
    vocabulary = [*SPECIAL_TOKENS, "what", "is", "apple", "app", "##le", "a", "##s", "!"]
    tokenizer = TextTokenizer(vocabulary, max_query_tokens=2, max_document_tokens=3)
    encoded = tokenizer.encode(
        tf.constant(["What is apple", "apps"]),
        tf.constant([["Apple!", "zzz is is is"], ["", "apple"]]),
    )
    ids = {token: i for i, token in enumerate(vocabulary)}
    np.testing.assert_array_equal(
        encoded["query_ids"], [[ids["what"], ids["is"]], [ids["app"], ids["##s"]]]
    )
    np.testing.assert_array_equal(encoded["query_cut"], [True, False])
    documents = encoded["document_ids"].numpy()
    np.testing.assert_array_equal(documents[0, 0], [ids["apple"], ids["!"], -1])
    np.testing.assert_array_equal(documents[0, 1], [ids["[UNK]"], ids["is"], ids["is"]])
    np.testing.assert_array_equal(documents[1, 0], [-1, -1, -1])
    np.testing.assert_array_equal(encoded["documents_cut"], [[False, True], [False, False]])
