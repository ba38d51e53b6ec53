"""The layer's row-chunked table search: tf.searchsorted's indices, whole or split."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

from tfr_rankformer.model.table_search import row_chunked_search  # noqa: E402


@pytest.mark.parametrize("d, n, chunks", [(1, 50, 4), (3, 50, 4), (7, 3000, 3), (136, 128, 4)])
def test_the_split_search_equals_searchsorted_whole_and_split(d, n, chunks):
    rng = np.random.default_rng(d)
    table = np.sort(np.round(rng.lognormal(size=(d, 200)), 1), axis=1).astype(np.float32)
    x = np.round(rng.lognormal(size=(d, n)), 1).astype(np.float32)
    x[:, :2] = [-1.0, 1e30]
    expected = tf.searchsorted(tf.constant(table), tf.constant(x), side="right").numpy()
    for split_from in (1, 10**9):  # always split, never split
        search = tf.function(row_chunked_search(table, chunks=chunks, split_from=split_from))
        got = search(tf.constant(table), tf.constant(x)).numpy()
        np.testing.assert_array_equal(got, expected)


def test_the_split_runs_one_search_per_chunk_only_for_large_inputs():
    table = np.tile(np.arange(5, dtype=np.float32), (8, 1))
    search = row_chunked_search(table, chunks=4, split_from=100)
    specs = tf.TensorSpec([8, 5], tf.float32), tf.TensorSpec([8, None], tf.float32)
    graph = tf.function(search).get_concrete_function(*specs).graph
    # Both branches are traced into the cond: the whole search and four chunks.
    searches = [
        op
        for function in graph.as_graph_def().library.function
        for op in function.node_def
        if op.op == "UpperBound"
    ]
    assert len(searches) == 5
