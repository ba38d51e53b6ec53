"""Deterministic text ranking lists whose relevance depends on the list's majority topic,
written as TREC-layout files so they take the real data's conversion path."""

from __future__ import annotations

import dataclasses
import functools
import os
import zlib

import numpy as np

from tfr_rankformer.core.atomic_files import atomic_write
from tfr_rankformer.core.config_io import require_positive_ints
from tfrecords_tools.synthetic import list_sizes

NUM_TOPICS = 16
TOPIC_WORDS = 40
QUERY_WORDS = 400
BACKGROUND_WORDS = 600
INTENT_SHARE = 0.8
INTENT_EFFECT = 1.2
COVERAGE_WEIGHT = 3.0
THRESHOLDS = (1.0, 1.9, 2.6, 3.2)
MAX_RELEVANCE = len(THRESHOLDS)
_STUFFING_RATE = 0.15
_NOISE = 0.35


@dataclasses.dataclass(frozen=True)
class SyntheticTextConfig:
    """Size and seed of a synthetic text dataset (lists per split, mean list size)."""

    train_queries: int = 300
    vali_queries: int = 100
    test_queries: int = 100
    mean_list_size: int = 20
    seed: int = 0

    def __post_init__(self):
        require_positive_ints(
            self, "train_queries", "vali_queries", "test_queries", "mean_list_size"
        )
        if isinstance(self.seed, bool) or not isinstance(self.seed, int) or self.seed < 0:
            raise ValueError(f"`seed` must be a non-negative int, got {self.seed!r}")


@dataclasses.dataclass(frozen=True)
class Vocabulary:
    """The pseudo-words of the generator, the same for every seed: each topic's words,
    the words of queries, and background words, most frequent first."""

    topics: tuple
    query: tuple
    background: tuple

    def topic_of(self, tokens) -> int | None:
        """The topic whose words ``tokens`` holds most (``None`` if none)."""
        counts = np.zeros(NUM_TOPICS, dtype=np.int64)
        for token in tokens:
            topic = self._topic_index.get(token)
            if topic is not None:
                counts[topic] += 1
        return int(counts.argmax()) if counts.any() else None

    @functools.cached_property
    def _topic_index(self) -> dict:
        return {word: topic for topic, words in enumerate(self.topics) for word in words}


def _make_vocabulary() -> Vocabulary:
    rng = np.random.default_rng(20221)  # fixed, independent of the data's seed
    onsets = list("bdfgklmnprstvz") + ["br", "st", "tr", "kl"]
    syllables = [o + v for o in onsets for v in "aeiou"]
    total = NUM_TOPICS * TOPIC_WORDS + QUERY_WORDS + BACKGROUND_WORDS
    words: list[str] = []
    seen: set[str] = set()
    while len(words) < total:
        length = int(rng.integers(2, 4))
        word = "".join(syllables[j] for j in rng.integers(len(syllables), size=length))
        if word not in seen:
            seen.add(word)
            words.append(word)
    topics = tuple(tuple(words[t * TOPIC_WORDS : (t + 1) * TOPIC_WORDS]) for t in range(NUM_TOPICS))
    start = NUM_TOPICS * TOPIC_WORDS
    query = tuple(words[start : start + QUERY_WORDS])
    background = tuple(words[start + QUERY_WORDS :])
    return Vocabulary(topics, query, background)


VOCABULARY = _make_vocabulary()
_ZIPF = 1.0 / np.arange(1, BACKGROUND_WORDS + 1)
_ZIPF /= _ZIPF.sum()


@dataclasses.dataclass(frozen=True)
class SyntheticTextList:
    """One generated list with its hidden topics and query-term coverage."""

    query_tokens: list
    document_tokens: list
    labels: np.ndarray
    topics: np.ndarray
    coverage: np.ndarray


def _document(rng, query_terms, covered, stuffed_term, topic, other_topic) -> list[str]:
    length = 20 + int(rng.poisson(30))
    num_topic = int(rng.binomial(length, 0.30))
    num_other = int(rng.binomial(length - num_topic, 0.05 / 0.70))
    num_background = length - num_topic - num_other
    tokens = [VOCABULARY.topics[topic][j] for j in rng.integers(TOPIC_WORDS, size=num_topic)]
    tokens += [VOCABULARY.topics[other_topic][j] for j in rng.integers(TOPIC_WORDS, size=num_other)]
    tokens += [
        VOCABULARY.background[j] for j in rng.choice(BACKGROUND_WORDS, size=num_background, p=_ZIPF)
    ]
    for term, present in zip(query_terms, covered):
        if present:
            tokens += [term] * (1 + int(rng.poisson(0.7)))
    if stuffed_term is not None:
        tokens += [stuffed_term] * int(rng.integers(5, 10))
    order = rng.permutation(len(tokens))
    return [tokens[j] for j in order]


def draw_text_list(rng: np.random.Generator, n: int) -> SyntheticTextList:
    """Draws one list of ``n`` documents for an ambiguous query: relevance rises with query
    term coverage and with the document's topic matching the list's majority."""
    pair = rng.choice(NUM_TOPICS, size=2, replace=False)
    intent = int(pair[rng.integers(2)])
    num_terms = int(rng.choice([2, 3, 4], p=[0.3, 0.4, 0.3]))
    query = [VOCABULARY.query[j] for j in rng.choice(QUERY_WORDS, size=num_terms, replace=False)]
    other = int(pair[0] if pair[1] == intent else pair[1])
    topics = np.where(rng.random(n) < INTENT_SHARE, intent, other)
    quality = rng.normal(0.0, 1.0, size=n)
    p_term = 1.0 / (1.0 + np.exp(-(1.6 * quality - 0.3)))
    covered = rng.random((n, num_terms)) < p_term[:, None]
    stuffed = rng.random(n) < _STUFFING_RATE
    stuffed_terms = rng.integers(num_terms, size=n)
    covered[np.arange(n), stuffed_terms] |= stuffed
    documents = []
    for i in range(n):
        own = int(topics[i])
        rival = int(pair[0] if pair[1] == own else pair[1])
        term = query[stuffed_terms[i]] if stuffed[i] else None
        covered_without_stuffing = covered[i].copy()
        if term is not None:
            covered_without_stuffing[stuffed_terms[i]] = False
        documents.append(_document(rng, query, covered_without_stuffing, term, own, rival))
    coverage = covered.mean(axis=1)
    noise = rng.normal(0.0, _NOISE, size=n)
    matches = (topics == intent).astype(np.float64)
    utility = COVERAGE_WEIGHT * coverage + INTENT_EFFECT * (matches - INTENT_SHARE) + noise
    labels = np.digitize(utility, THRESHOLDS)
    return SyntheticTextList(query, documents, labels, topics, coverage)


def generate_text_lists(
    num_lists: int, *, mean_list_size: int, rng: np.random.Generator
) -> list[SyntheticTextList]:
    """``num_lists`` lists of log-normal lengths with mean about ``mean_list_size``."""
    sizes = list_sizes(rng, num_lists, mean_list_size)
    return [draw_text_list(rng, int(n)) for n in sizes]


# === Oracle scorers (from the text alone, knowing how the data was made) ===


def query_coverage(query_tokens, document_tokens) -> np.ndarray:
    """``[n]`` the share of the query's distinct terms each document holds (``v_i``)."""
    query = set(query_tokens)
    return np.array([len(query & set(d)) / max(len(query), 1) for d in document_tokens])


def majority_topic_match(document_tokens) -> np.ndarray:
    """``[n]`` whether each document's topic (whose words it holds most) is the most
    common of its list, which estimates the query's intent ``m_q``."""
    topics = np.array([-1 if t is None else t for t in map(VOCABULARY.topic_of, document_tokens)])
    values, counts = np.unique(topics, return_counts=True)
    return topics == values[counts.argmax()]


def oracle_scores(query_tokens, document_tokens, *, sees_list: bool) -> np.ndarray:
    """``[n]`` each document's expected utility as far as the text reveals it: ``3 v_i``,
    plus with ``sees_list`` ``1.2 [c_i = the list's majority topic]``."""
    scores = COVERAGE_WEIGHT * query_coverage(query_tokens, document_tokens)
    if sees_list:
        scores = scores + INTENT_EFFECT * majority_topic_match(document_tokens)
    return scores


SPLIT_FILES = {
    "train": "queries.train.tsv",
    "vali": "queries.vali.tsv",
    "test": "queries.test.tsv",
}


def generate_trec_layout(
    directory: str, config: SyntheticTextConfig = SyntheticTextConfig()
) -> dict[str, str]:
    """Writes the lists as TREC-layout files into ``directory``; returns ``TrecConfig`` fields."""
    os.makedirs(directory, exist_ok=True)
    paths = {
        f"{split}_queries": os.path.join(directory, name) for split, name in SPLIT_FILES.items()
    }
    paths.update(
        collection=os.path.join(directory, "collection.tsv"),
        qrels=os.path.join(directory, "qrels.txt"),
        run=os.path.join(directory, "run.txt"),
    )
    qid, docid = 0, 0
    with (
        atomic_write(paths["collection"], newline="\n") as collection,
        atomic_write(paths["qrels"], newline="\n") as qrels,
        atomic_write(paths["run"], newline="\n") as run,
    ):
        for split in SPLIT_FILES:
            count = getattr(config, f"{split}_queries")
            rng = np.random.default_rng([config.seed, zlib.crc32(split.encode())])
            lists = generate_text_lists(count, mean_list_size=config.mean_list_size, rng=rng)
            with atomic_write(paths[f"{split}_queries"], newline="\n") as queries:
                for text_list in lists:
                    qid += 1
                    queries.write(f"{qid}\t{' '.join(text_list.query_tokens)}\n")
                    for rank, (tokens, label) in enumerate(
                        zip(text_list.document_tokens, text_list.labels.tolist()), start=1
                    ):
                        docid += 1
                        collection.write(f"D{docid}\t{' '.join(tokens)}\n")
                        qrels.write(f"{qid} 0 D{docid} {label}\n")
                        run.write(f"{qid} Q0 D{docid} {rank} {-rank} synthetic-random\n")
    return paths
