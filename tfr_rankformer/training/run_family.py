"""What a model family plugs into the one training loop (``training.train``).

Every neural run, feature vectors or text, goes through the same loop: the
run plan and its memory refusal, the run directory and its state, the
callbacks (throughput, validation, best weights and early stopping, backups
for ``--resume``, history, TensorBoard, progress lines), the fit and the final
evaluation. A family supplies only what differs, as a ``RunFamily``:

- ``prepare``: read the data, settle the run's settings and plan its batches
  and memory (``run_plan.RunPlan``), before anything is written;
- ``write_start``: files the run needs besides ``config.json``;
- ``build``: the model, and the model ``fit`` trains (compiled with the run's
  losses and optimizer);
- ``training_data``: the epoch's ``(inputs, targets)`` batches;
- ``validation``: the callback that adds the ``val_*`` metrics;
- ``evaluate``: the final metrics of every split;
- ``fitting``: a context the fit runs in (the compiled pieces that suit the
  batches' shapes);
- ``summary``: what the family adds to ``metrics.json``'s ``training`` entry.

``training.family_of`` picks the family of a model name from
``model_families``, whose ``ModelFamily.run_family`` names it. The GBDTs are not
trained by a Keras loop (``gbdt.lightgbm_ranker``) and are not a ``RunFamily``.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Protocol

__all__ = ["PreparedRun", "RunFamily"]


@dataclasses.dataclass(frozen=True)
class PreparedRun:
    """A run ready to open its directory: what ``RunFamily.prepare`` settled.

    Attributes:
      config: the run's resolved settings (a pretrained text start's sizes
        replace the architecture's), as ``config.json`` records them.
      plan: the batches and the memory estimate (``run_plan.RunPlan``).
      levels: label levels above 0 the losses and metrics use.
      splits: the data's splits, ``train`` first.
      data: the family's view of the data (a ``Manifest``, a ``TextData`` ...).
      extra: whatever else the family needs later (vocabulary, tokenizer ...).
      memory_hints: ``run_plan.check_memory``'s options for the family's flags.
    """

    config: Any
    plan: Any
    levels: int
    splits: tuple[str, ...]
    data: Any
    extra: Any = None
    memory_hints: dict = dataclasses.field(default_factory=dict)

    @property
    def has_vali(self) -> bool:
        return "vali" in self.splits


class RunFamily(Protocol):
    """A model family's plug-in points (see the module docstring)."""

    name: str

    def prepare(self, config, *, worker) -> PreparedRun: ...

    def write_start(self, run: PreparedRun) -> None: ...

    def build(self, run: PreparedRun, *, steps_per_epoch: int, xla: bool) -> tuple: ...

    def training_data(self, run: PreparedRun, model, cache_dir: str): ...

    def validation(self, run: PreparedRun, model): ...

    def evaluate(self, run: PreparedRun, model, splits: tuple[str, ...]) -> dict: ...

    def fitting(self, run: PreparedRun): ...

    def summary(self, run: PreparedRun) -> dict: ...
