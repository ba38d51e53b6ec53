"""A text run's plan before its first step: its batches (items are documents; a
``--batch-items`` budget counts padded tokens) and its peak memory, from what a step keeps
for its backward pass over the ``1 + Q + N + N T`` tokens plus the weights' copies.

>>> shape = TextShape(width=384, layers=6, heads=12, ff=1536, window=256, query=32,
...                   document=128, parameters=25_000_000)
>>> round(text_step_bytes(shape, lists=1, documents=100) / 2**30, 1)
7.9
"""

from __future__ import annotations

import dataclasses

from tfr_rankformer.inputs.empty_splits import nothing_to_learn
from tfr_rankformer.training.memory_estimate import RUNTIME_BYTES, MemoryEstimate, available_memory
from tfr_rankformer.training.run_plan import RunPlan, batch_plan, largest_step

__all__ = ["TextShape", "text_shape", "text_step_bytes", "text_forward_bytes", "plan_text_run"]

_FLOAT = 4
_OVERHEAD = 1.25  # allocations over the tensors the backward pass keeps
_COPIES_OF_WEIGHTS = 4  # weights, their gradients and Adam's two moments
_PIPELINE_BYTES = 200 << 20  # strings and token ids of the parsed and prefetched batches


@dataclasses.dataclass(frozen=True)
class TextShape:
    """What a Listformer step's memory depends on (``frozen``: the similarity weights)."""

    width: int
    layers: int
    heads: int
    ff: int
    window: int
    query: int
    document: int
    parameters: int
    frozen: int = 0


def text_shape(config, parameters: int, frozen: int = 0) -> TextShape:
    """The ``TextShape`` of a resolved text ``TrainConfig``."""
    a, t = config.architecture, config.text
    return TextShape(
        width=a.width,
        layers=a.num_layers,
        heads=a.num_heads,
        ff=a.ff_dim,
        window=a.attention_window,
        query=t.max_query_tokens,
        document=t.max_document_tokens,
        parameters=parameters,
        frozen=frozen,
    )


def _layer_floats(shape: TextShape, documents: int) -> tuple[int, int]:
    """``(tokens, floats)`` one encoder layer keeps for one list of ``documents``."""
    t = shape.document
    local = documents * t
    global_tokens = 1 + shape.query + documents
    tokens = global_tokens + local
    # A local token's scores cover its window in its document and the global
    # tokens; a global token's cover the whole sequence.
    entries = local * (min(t, 2 * shape.window + 1) + global_tokens) + global_tokens * tokens
    # Per token ~8 x width and ~3 x ff; per attention entry and head ~3 (memory_estimate).
    return tokens, tokens * (8 * shape.width + 3 * shape.ff) + 3 * shape.heads * entries


def _tower_floats(shape: TextShape, documents: int) -> int:
    """What the frozen similarity encoder's layer holds for one list (forward only)."""
    if not shape.frozen:
        return 0
    t = shape.document + 2
    return documents * t * (4 * shape.width + shape.ff + 2 * shape.heads * t)


def text_step_bytes(shape: TextShape, *, lists: int, documents: int) -> int:
    """Bytes a training step on ``lists`` lists of ``documents`` documents holds."""
    tokens, per_layer = _layer_floats(shape, documents)
    floats = shape.layers * per_layer + 3 * tokens * shape.width  # and the embeddings
    floats += _tower_floats(shape, documents)
    return int(_OVERHEAD * _FLOAT * lists * floats)


def text_forward_bytes(shape: TextShape, *, lists: int, documents: int) -> int:
    """Bytes a forward pass on such a batch holds: one layer's input and output at a time."""
    tokens, per_layer = _layer_floats(shape, documents)
    floats = max(2 * per_layer, _tower_floats(shape, documents)) + 3 * tokens * shape.width
    return int(_OVERHEAD * _FLOAT * lists * floats)


def evaluation_lists(config, longest: int) -> int:
    """Lists of ``longest`` documents per evaluation batch within its token budget."""
    tokens = max(1, longest) * config.text.max_document_tokens
    return max(1, min(config.eval_batch_size, config.evaluation_batch_items() // tokens))


def plan_text_run(config, scan: dict, *, shape: TextShape, cap: int, include_empty: bool):
    """The ``RunPlan`` of a text run from its training split's ``scan_split``."""
    if not scan["lists_with_two_labels"]:
        raise nothing_to_learn(
            f"the 'train' split of {config.data} has no list with two different labels"
        )
    lengths = scan["lengths"] if include_empty else scan["lengths_with_relevant"]
    longest = max((int(n) for n in lengths), default=1)
    tokens = config.text.max_document_tokens
    one_bucket = not config.length_buckets
    plan = batch_plan(config, lengths, longest, cap, one_bucket=one_bucket, item_tokens=tokens)
    edge = plan.edges[-1]
    sampled_out = sum((int(n) - edge) * c for n, c in lengths.items() if int(n) > edge)
    items = sum(min(int(n), edge) * c for n, c in lengths.items())
    step, batch = largest_step(plan, lambda b, e: text_step_bytes(shape, lists=b, documents=e))
    longest = scan["longest_list"]
    eval_lists = evaluation_lists(config, longest)
    evaluation = text_forward_bytes(shape, lists=eval_lists, documents=longest)
    # TensorFlow, the trained weights' copies and the frozen weights.
    runtime = RUNTIME_BYTES + _FLOAT * (_COPIES_OF_WEIGHTS * shape.parameters + shape.frozen)
    memory = MemoryEstimate(runtime, _PIPELINE_BYTES, step, evaluation, batch)
    limit = int(config.memory_limit * 2**30) if config.memory_limit else available_memory()
    eval_items = eval_lists * longest
    return RunPlan(plan, cap, items, sampled_out, eval_items, memory, limit, unit="documents")
