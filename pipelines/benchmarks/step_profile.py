"""Where a training step's time goes: TensorFlow's profiler over a few of our steps.

It builds the step ``train_bench`` times (2048 lists of 16 items, 46
features, in memory), traces ``--steps`` steps with ``tf.profiler`` and sums
the time of every TensorFlow op the trace records, over all threads, by op
type and by op. The XLA-compiled pieces (``tfr_rankformer.model.compiled_ops``)
run as asynchronous kernels, recorded as the executor's ``ProcessAsync::Start``
spans, shown as ``XlaLaunch``; matmuls are ``MatMul`` and ``BatchMatMulV2``.
Shares are of the summed op time, so they hold under load from other
processes better than wall-clock times do.

Run: ``python -m pipelines.benchmarks.step_profile --model transformer``.
"""

from __future__ import annotations

import argparse
import collections
import glob
import sys
import tempfile

import tensorflow as tf

from pipelines.benchmarks.train_bench import MODELS, prepare
from pipelines.flag_table import add_flag

_ASYNC_START = "ExecutorState::ProcessAsync::Start"


def op_times(logdir: str) -> collections.Counter:
    """Milliseconds per op (``name:type``) summed over the CPU trace in ``logdir``."""
    from tensorflow.tsl.profiler.protobuf import xplane_pb2

    totals = collections.Counter()
    for path in glob.glob(f"{logdir}/**/*.xplane.pb", recursive=True):
        space = xplane_pb2.XSpace()
        with open(path, "rb") as f:
            space.ParseFromString(f.read())
        for plane in space.planes:
            if plane.name != "/host:CPU":
                continue
            for line in plane.lines:
                for event in line.events:
                    name = plane.event_metadata[event.metadata_id].name
                    if name == _ASYNC_START:  # the step's asynchronous kernels: XlaLaunch
                        name = "compiled pieces:XlaLaunch"
                    elif "::" in name or not name.partition(":")[2].isidentifier():
                        continue  # the runtime's own spans, which enclose the ops
                    totals[name] += event.duration_ps / 1e9
    return totals


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_flag(parser, "model", default="transformer", choices=MODELS, help=None)
    add_flag(parser, "features", default=46)
    add_flag(parser, "batch_size", default=2048, help=None)
    add_flag(parser, "items")
    add_flag(parser, "steps", help=None)
    parser.add_argument("--top", type=int, default=12, help="ops listed one by one")
    args = parser.parse_args(argv)
    step, _ = prepare(args.model, args.features, batch=args.batch_size, items=args.items, xla=False)
    with tempfile.TemporaryDirectory() as logdir:
        tf.profiler.experimental.start(logdir)
        for _ in range(args.steps):
            step()
        tf.profiler.experimental.stop()
        totals = op_times(logdir)
    by_type = collections.Counter()
    for name, ms in totals.items():
        by_type[name.rsplit(":", 1)[1]] += ms
    total = sum(totals.values())
    print(f"{args.model}: {total / args.steps:,.0f} ms of op time per step, all threads")
    for kind, ms in by_type.most_common():
        if ms / total >= 0.005:
            print(f"  {ms / args.steps:8.1f} ms {ms / total:6.1%}  {kind}")
    print("largest ops:")
    for name, ms in totals.most_common(args.top):
        print(f"  {ms / args.steps:8.1f} ms {ms / total:6.1%}  {name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
