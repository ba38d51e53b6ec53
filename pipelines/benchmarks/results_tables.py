"""The measured tables of README.md and docs/results.md, printed from the records in docs/records/.

Every measured table of the two pages sits between ``<!-- results:NAME -->`` and
``<!-- /results:NAME -->`` and is printed here from a benchmark's record, with
that benchmark's own table functions (``reference_parity``'s, ``web30k_scale``'s
``report``, ``rerank_tables``' ``report`` and ``speed_records``' tables), so a
page cannot show a figure its record does not hold. ``BLOCKS`` names each
block, its page and what prints it; the README's ``headline`` block gathers
one row per record.

Usage::

    python -m pipelines.benchmarks.results_tables            # print every block
    python -m pipelines.benchmarks.results_tables --write    # rewrite the pages' blocks
    python -m pipelines.benchmarks.results_tables --check    # exit 1 naming a stale block

``make docs-results`` runs it with ``--write``.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from collections.abc import Callable

from pipelines.benchmarks.results_readme import headline, web30k_path
from pipelines.benchmarks.results_sources import (
    PARITY_30,
    PARITY_200,
    PARITY_200_KERAS,
    PARITY_200_SEEDS,
    WEB30K_BATCHES,
    WEB30K_CLICKS,
    cranfield_table,
    parity_table,
    speed_table,
    web30k_table,
)
from pipelines.benchmarks.speed_records import INPUT_RECORD, SERVING_RECORD, STEP_RECORD

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
README = "README.md"
RESULTS = "docs/results.md"
_BLOCK = re.compile(
    r"(?P<open><!-- results:(?P<name>[\w.-]+) -->\n)(?P<body>.*?)"
    r"(?P<close><!-- /results:(?P=name) -->)",
    re.S,
)


# === The blocks and their pages ===

BLOCKS: dict[str, tuple[str, Callable[[str], str]]] = {
    "headline": (README, headline),
    "web30k_path": (README, web30k_path),
    "cranfield": (RESULTS, cranfield_table),
    "web30k-clicks": (RESULTS, lambda root: web30k_table(root, WEB30K_CLICKS)),
    "web30k-clicks-batch-sizes": (RESULTS, lambda root: web30k_table(root, WEB30K_BATCHES)),
    "train-step": (RESULTS, lambda root: speed_table(root, STEP_RECORD)),
    "serving-latency": (RESULTS, lambda root: speed_table(root, SERVING_RECORD)),
    "input-pipeline": (RESULTS, lambda root: speed_table(root, INPUT_RECORD)),
    "mq2008-30": (RESULTS, lambda root: parity_table(root, PARITY_30)),
    "mq2008-200": (RESULTS, lambda root: parity_table(root, PARITY_200)),
    "mq2008-200-seeds-0-1": (RESULTS, lambda root: parity_table(root, PARITY_200_SEEDS)),
    "mq2008-200-keras-epsilon": (RESULTS, lambda root: parity_table(root, PARITY_200_KERAS)),
}


def render(name: str, root: str = REPO) -> str:
    """Block ``name`` as the records under ``root`` print it."""
    return BLOCKS[name][1](root)


def render_all(root: str = REPO) -> dict[str, str]:
    """Every block as the records under ``root`` print it, in ``BLOCKS``' order."""
    return {name: render(name, root) for name in BLOCKS}


def replace_blocks(text: str, rendered: dict[str, str]) -> tuple[str, list[str]]:
    """``text`` with each block ``rendered`` holds rewritten; the names of those that
    changed. A block named in ``text`` but not in ``rendered`` is left as it is."""
    changed = []

    def body(match: re.Match) -> str:
        name = match["name"]
        if name not in rendered:
            return match[0]
        new = "\n" + rendered[name].strip("\n") + "\n\n"
        if new != match["body"]:
            changed.append(name)
        return match["open"] + new + match["close"]

    return _BLOCK.sub(body, text), changed


def stale_blocks(
    root: str = REPO, rendered: dict[str, str] | None = None, *, write: bool = False
) -> list[str]:
    """``PAGE: NAME`` for every block of the pages under ``root`` that differs from
    what the records print (``rendered``, else :func:`render_all`), and ``PAGE: NAME
    (missing)`` or ``(no such block)`` for a block its page lacks or one no record
    prints; with ``write`` the pages are rewritten to hold what the records print."""
    rendered = render_all(root) if rendered is None else rendered
    found = []
    for page in (README, RESULTS):
        path = os.path.join(root, page)
        with open(path, encoding="utf-8") as f:
            text = f.read()
        names = [name for name, (where, _) in BLOCKS.items() if where == page]
        present = {match["name"] for match in _BLOCK.finditer(text)}
        found += [f"{page}: {name} (missing)" for name in names if name not in present]
        found += [f"{page}: {name} (no such block)" for name in sorted(present - set(names))]
        new, changed = replace_blocks(text, {n: rendered[n] for n in names if n in present})
        found += [f"{page}: {name}" for name in changed]
        if write and changed:
            with open(path, "w", encoding="utf-8") as f:
                f.write(new)
    return found


def _report(stale: list[str], write: bool) -> int:
    """Prints what ``--write`` rewrote or ``--check`` found stale; the exit status."""
    broken = [line for line in stale if line.endswith(")")]
    if write:
        rewritten = [line for line in stale if line not in broken]
        print("rewrote: " + (", ".join(rewritten) or "nothing (every block was current)"))
        stale = broken
    for line in stale:
        fix = "" if line in broken else "; `make docs-results` rewrites it"
        print(f"results_tables: stale block {line}{fix}", file=sys.stderr)
    return 1 if stale else 0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="results_tables",
        description=__doc__.split("\n\n")[0],
        epilog=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    what = p.add_mutually_exclusive_group()
    what.add_argument("--write", action="store_true", help="rewrite the pages' blocks too")
    what.add_argument(
        "--check", action="store_true", help="print nothing but each block that differs; exit 1"
    )
    p.add_argument(
        "--root", default=REPO, help="the repository holding the pages and docs/records/"
    )
    args = p.parse_args(argv)
    from pipelines.tf_log_level import set_tensorflow_log_level

    set_tensorflow_log_level(verbose=False)
    try:
        rendered = render_all(args.root)
        if not args.check:
            for name, text in rendered.items():
                print(f"<!-- results:{name} ({BLOCKS[name][0]}) -->\n\n{text}")
        if not (args.write or args.check):
            return 0
        stale = stale_blocks(args.root, rendered, write=args.write)
    except (ValueError, KeyError, OSError, json.JSONDecodeError) as error:
        print(f"results_tables: error: {error!r}", file=sys.stderr)
        return 1
    return _report(stale, args.write)


if __name__ == "__main__":
    sys.exit(main())
