"""The measured tables of README.md and docs/results.md, printed from docs/records/.

Each sits between ``<!-- results:NAME -->`` and ``<!-- /results:NAME -->``, printed by its
benchmark's own table functions, so that a page cannot show a figure no record holds.
"""

from __future__ import annotations

import json
import os
import re
import sys
from functools import partial

from pipelines.benchmarks import record_tables as tables
from pipelines.benchmarks import speed_records
from pipelines.benchmarks.bench_support import REPO, parser
from tfr_rankformer.core.atomic_files import atomic_write

README = "README.md"
RESULTS = "docs/results.md"
_BLOCK = re.compile(
    r"(?P<open><!-- results:(?P<name>[\w.-]+) -->\n)(?P<body>.*?)"
    r"(?P<close><!-- /results:(?P=name) -->)",
    re.S,
)


# === The blocks and their pages ===

_PARITY = {"mq2008-30": tables.PARITY_30, "mq2008-200": tables.PARITY_200}
_PARITY.update({"mq2008-200-seeds-0-1": tables.PARITY_200_SEEDS})
_PARITY.update({"mq2008-200-keras-epsilon": tables.PARITY_200_KERAS})
_SPEED = {"train-step": speed_records.STEP_RECORD, "serving-latency": speed_records.SERVING_RECORD}
_SPEED["input-pipeline"] = speed_records.INPUT_RECORD
_SPEED["text-serving-latency"] = speed_records.TEXT_SERVING_RECORD
_WEB30K = {"web30k-clicks": tables.WEB30K_CLICKS}
_WEB30K["web30k-clicks-batch-sizes"] = tables.WEB30K_BATCHES
BLOCKS = {  # name -> (page, its table of the records under a root)
    "headline": (README, tables.headline),
    "web30k_path": (README, tables.web30k_path),
    "cranfield": (RESULTS, tables.cranfield_table),
    **{name: (RESULTS, partial(tables.web30k_table, directory=d)) for name, d in _WEB30K.items()},
    **{name: (RESULTS, partial(tables.speed_table, name=r)) for name, r in _SPEED.items()},
    **{name: (RESULTS, partial(tables.parity_table, parity=p)) for name, p in _PARITY.items()},
}


def render(name: str, root: str = REPO) -> str:
    """Block ``name`` as the records under ``root`` print it."""
    return BLOCKS[name][1](root)


def replace_blocks(text: str, rendered: dict[str, str]) -> tuple[str, list[str]]:
    """``text`` with the blocks ``rendered`` holds rewritten; the names of those changed."""
    changed = []

    def body(match: re.Match) -> str:
        if match["name"] not in rendered:
            return match[0]
        new = "\n" + rendered[match["name"]].strip("\n") + "\n\n"
        if new != match["body"]:
            changed.append(match["name"])
        return match["open"] + new + match["close"]

    return _BLOCK.sub(body, text), changed


def stale_blocks(root: str = REPO, rendered: dict | None = None, *, write=False) -> list[str]:
    """``PAGE: NAME`` of every block that differs from what the records print (``(missing)``,
    ``(no such block)``: one a page lacks or no record prints); ``write`` rewrites them."""
    rendered = {name: render(name, root) for name in BLOCKS} if rendered is None else rendered
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
            with atomic_write(path) as f:
                f.write(new)
    return found


def main(argv: list[str] | None = None) -> int:
    p = parser(__doc__, prog="results_tables")
    what = p.add_mutually_exclusive_group()
    what.add_argument("--write", action="store_true", help="rewrite the pages' blocks too")
    what.add_argument("--check", action="store_true", help="only name each stale block; exit 1")
    p.add_argument("--root", default=REPO, help="the repository holding the pages and records")
    args = p.parse_args(argv)
    try:
        rendered = {name: render(name, args.root) for name in BLOCKS}
        if not args.check:
            for name, text in rendered.items():
                print(f"<!-- results:{name} ({BLOCKS[name][0]}) -->\n\n{text}")
        if not (args.write or args.check):
            return 0
        stale = stale_blocks(args.root, rendered, write=args.write)
    except (ValueError, KeyError, OSError, json.JSONDecodeError) as error:
        print(f"results_tables: error: {error!r}", file=sys.stderr)
        return 1
    broken = [line for line in stale if line.endswith(")")]
    if args.write:
        rewritten = [line for line in stale if line not in broken]
        print("rewrote: " + (", ".join(rewritten) or "nothing (every block was current)"))
        stale = broken
    for line in stale:
        fix = "" if line in broken else "; `make docs-results` rewrites it"
        print(f"results_tables: stale block {line}{fix}", file=sys.stderr)
    return 1 if stale else 0


if __name__ == "__main__":
    sys.exit(main())
