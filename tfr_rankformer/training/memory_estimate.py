"""A run's peak memory, estimated before its first step: the runtime, the lists held in
memory, the input pipeline, the largest step's activations and evaluation, with constants
fitted to measured peaks (``docs/results.md``); and the memory the machine has.

>>> step_bytes(_Shape(width=136, layers=3, heads=1, ff=512, head=128, extra=1, units=()),
...            lists=2048, length=16, num_features=136) / 2**30  # doctest: +ELLIPSIS
1.46...
"""

from __future__ import annotations

import dataclasses
import os

from tfr_rankformer.core import model_families

RUNTIME_BYTES = 700 << 20  # TensorFlow's runtime and a small model, measured after start-up
_FLOAT = 4
_OVERHEAD = 1.25  # measured allocations over the tensors the backward pass keeps
_FORWARD_SHARE = 0.35  # a forward pass without gradients, against a training step


@dataclasses.dataclass(frozen=True)
class _Shape:
    """What a model's activations depend on (``width`` 0: no encoder; ``extra``: tokens
    added to each list; ``units``: an MLP's widths)."""

    width: int
    layers: int
    heads: int
    ff: int
    head: int
    extra: int
    units: tuple


def model_shape(model: str, architecture, num_features: int) -> _Shape:
    """The activation shape of a resolved ``ModelConfig`` for ``model``, from its traits."""
    a = architecture
    spec = model_families.get_model(model)
    if not spec.attention:
        return _Shape(0, 0, 0, 0, 0, 0, tuple(a.mlp_units))
    width = getattr(a, spec.item_width) if spec.item_width else num_features
    cls = 1 if spec.takes_cls_token and a.cls_token else 0
    extra = cls + (a.global_tokens if spec.summary_tokens else 0)
    return _Shape(width, a.num_layers, a.num_heads, a.ff_dim, a.head_hidden, extra, ())


def step_bytes(shape: _Shape, *, lists: int, length: int, num_features: int) -> int:
    """Bytes a training step on ``lists`` lists padded to ``length`` items holds."""
    tokens = length + shape.extra
    # Per token and layer: normalised input, queries, keys, values, attention
    # output, projection, residuals (~8 x width) and the feed-forward's hidden
    # pre- and post-activation and dropout (~3 x ff); per attention entry and
    # head: scores, probabilities and the dropped-out probabilities (~3).
    per_token = shape.layers * (8 * shape.width + 3 * shape.ff + 3 * shape.heads * tokens)
    per_item = 5 * num_features + 3 * shape.head + 3 * sum(shape.units)
    floats = lists * (tokens * per_token + length * per_item)
    return int(_OVERHEAD * _FLOAT * floats)


def format_gb(n: float) -> str:
    return f"{n / 2**30:.2f} GiB"


@dataclasses.dataclass(frozen=True)
class MemoryEstimate:
    """A run's estimated peak by part, in bytes; ``step_batch``: the largest training
    batch's ``(lists, length)``."""

    runtime: int
    pipeline: int
    step: int
    evaluation: int
    step_batch: tuple[int, int]
    resident: int = 0

    @property
    def peak(self) -> int:
        # Evaluation runs between epochs; loading the lists holds them twice for a moment.
        training = self.pipeline + max(self.step, self.evaluation)
        return self.runtime + self.resident + max(training, self.resident)

    def describe(self) -> str:
        lists, length = self.step_batch
        resident = f"lists in memory {format_gb(self.resident)}, " if self.resident else ""
        return (
            f"about {format_gb(self.peak)} at its peak: runtime {format_gb(self.runtime)}, "
            f"{resident}input pipeline {format_gb(self.pipeline)}, largest training step "
            f"{format_gb(self.step)} ({lists} lists x {length} items), evaluation "
            f"{format_gb(self.evaluation)}"
        )


def forward_bytes(shape: _Shape, *, lists: int, length: int, num_features: int) -> int:
    """Bytes a forward pass (evaluation, prediction) on such a batch holds."""
    return int(
        _FORWARD_SHARE * step_bytes(shape, lists=lists, length=length, num_features=num_features)
    )


def _read(path: str) -> str:
    try:
        with open(path, encoding="ascii") as f:
            return f.read()
    except OSError:
        return ""


def _meminfo_available() -> int | None:
    for line in _read("/proc/meminfo").splitlines():
        if line.startswith("MemAvailable:"):
            return int(line.split()[1]) * 1024
    return None


def _cgroup_room() -> int | None:
    """What a cgroup (v2 or v1) memory limit leaves this process's group."""
    for limit_path, usage_path in (
        ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory.current"),
        (
            "/sys/fs/cgroup/memory/memory.limit_in_bytes",
            "/sys/fs/cgroup/memory/memory.usage_in_bytes",
        ),
    ):
        limit, usage = _read(limit_path).strip(), _read(usage_path).strip()
        if limit.isdigit() and usage.isdigit() and int(limit) < 1 << 60:
            return int(limit) - int(usage)
    return None


def _own_rss() -> int:
    pages = _read("/proc/self/statm").split()
    return int(pages[1]) * os.sysconf("SC_PAGE_SIZE") if len(pages) > 1 else 0


def available_memory() -> int | None:
    """Bytes this process may grow to: its RSS plus what the machine or cgroup has free."""
    rooms = [r for r in (_meminfo_available(), _cgroup_room()) if r is not None]
    if not rooms:
        return None
    return min(rooms) + _own_rss()
