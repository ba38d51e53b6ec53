"""The README and docs/ agree with the commands: every option is documented, every link resolves.

Each command's page ends with its options as ``--help`` gives them;
``make docs-options`` rewrites those tables, and this suite fails when one is
out of date.
"""

from __future__ import annotations

import argparse
import importlib
import os
import re

import pytest

from pipelines import COMMANDS

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DOCS = os.path.join(REPO, "docs")
_LINK = re.compile(r"\]\(([^)#\s]+\.md)(#[^)\s]*)?\)")


def _read(path: str) -> str:
    with open(path, encoding="utf-8") as f:
        return f.read()


BEGIN = "<!-- options: generated from --help by `make docs-options` -->"
END = "<!-- end of options -->"


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def _rows(parser: argparse.ArgumentParser) -> list[str]:
    rows = ["| option | what it does |", "|---|---|"]
    for action in parser._actions:
        if "--help" in action.option_strings or not action.option_strings:
            continue
        names = ", ".join(f"`{o}`" for o in action.option_strings)
        if action.choices:
            metavar = "{" + ",".join(str(c) for c in action.choices) + "}"
        elif action.nargs == 0:
            metavar = ""
        else:
            metavar = action.metavar or action.dest.upper()
        flag = f"{names} {_cell(metavar)}".strip()
        if action.required:
            flag += " (required)"
        rows.append(f"| {flag} | {_cell(action.help or '')} |")
    return rows


def options_table(command: str) -> str:
    """The page's "Options" section, made from the command's parser (and its subcommands')."""
    parser = importlib.import_module(f"pipelines.{command}_cli").build_parser()
    lines = [BEGIN, "## Options", ""]
    subcommands = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    if len(_rows(parser)) > 2 or not subcommands:
        lines += _rows(parser)
    for action in subcommands:
        for name, sub in action.choices.items():
            lines += ["", f"### `tfr-{command} {name}`", "", *_rows(sub)]
    return "\n".join([*lines, END])


def _generated_block(text: str) -> str | None:
    if BEGIN not in text or END not in text:
        return None
    return text[text.index(BEGIN) : text.index(END) + len(END)]


@pytest.mark.parametrize("command", COMMANDS)
def test_every_page_lists_its_command_options_as_help_does(command):
    path = os.path.join(DOCS, f"tfr-{command}.md")
    text = _read(path)
    expected = options_table(command)
    if os.environ.get("REWRITE_DOCS_OPTIONS"):
        block = _generated_block(text)
        text = text.replace(block, expected) if block else text.rstrip() + "\n\n" + expected + "\n"
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)
    assert _generated_block(text) == expected, (
        f"docs/tfr-{command}.md's options differ from tfr-{command} --help: run make docs-options"
    )


def _anchors(text: str) -> set[str]:
    """GitHub's anchors of a Markdown file's headings."""
    anchors = set()
    in_code = False
    for line in text.splitlines():
        if line.startswith("```"):
            in_code = not in_code
        if not in_code and line.startswith("#"):
            title = line.lstrip("#").strip().lower()
            anchors.add("#" + re.sub(r"[^\w\- ]", "", title).replace(" ", "-"))
    return anchors


def test_links_between_the_readme_and_docs_resolve():
    pages = [os.path.join(REPO, "README.md")]
    pages += [os.path.join(DOCS, n) for n in sorted(os.listdir(DOCS)) if n.endswith(".md")]
    broken = []
    for page in pages:
        for target, anchor in _LINK.findall(_read(page)):
            path = os.path.normpath(os.path.join(os.path.dirname(page), target))
            if not os.path.isfile(path):
                broken.append(f"{os.path.relpath(page, REPO)} -> {target}")
            elif anchor and anchor not in _anchors(_read(path)):
                broken.append(f"{os.path.relpath(page, REPO)} -> {target}{anchor}")
    assert not broken, broken


def test_the_readme_links_every_docs_page():
    readme = _read(os.path.join(REPO, "README.md"))
    linked = {os.path.basename(t) for t, _ in _LINK.findall(readme)}
    pages = {n for n in os.listdir(DOCS) if n.endswith(".md")}
    assert pages <= linked, f"not linked from the README: {sorted(pages - linked)}"


def test_a_changed_help_text_shows_in_the_table():
    # The comparison must be able to fail: the table holds every help text.
    table = options_table("eval")
    assert "| `--model-dir` MODEL_DIR (required) | a tfr-train output directory |" in table
    assert "`--split`" in table and "`--verbose`" in table


def test_the_command_list_is_setup_py_console_scripts():
    scripts = re.findall(r'"tfr-([\w-]+)=pipelines\.(\w+)_cli:main"', _read(f"{REPO}/setup.py"))
    assert [name for name, _ in scripts] == list(COMMANDS)
    assert all(name == module for name, module in scripts)


# A user's manual speaks of the product as it is: no run dates, commit hashes or
# development history (those belong in a changelog).
_HISTORY = re.compile(
    r"commit [0-9a-f]{7}|\b20[0-9]{2}-[01][0-9]-[0-3][0-9]\b|this session|before this change"
    r"|\bas at commit\b|the issue's figures"
)

# Phrases that only narrate how the project got here (matched case-insensitively).
HISTORY_PHRASES = (
    "before this change",
    "earlier code",
    "earlier versions",
    "earlier findings",
    "earlier variant",
    "earlier default",
    "this project's before",
    "as at commit",
    "the issue's",
    "is the next step",
    "not shown yet",
    "older measurements",
    "runs before",
    "the old default",
    "predate",
    "we changed",
    "was fixed",
)
_PHRASE = re.compile("|".join(re.escape(p) for p in HISTORY_PHRASES), re.IGNORECASE)


def _manual_pages() -> list[str]:
    """README.md and every docs/*.md (not docs/records/, which holds run records)."""
    pages = [os.path.join(REPO, "README.md")]
    pages += [os.path.join(DOCS, n) for n in sorted(os.listdir(DOCS)) if n.endswith(".md")]
    return pages


def _lines_matching(pattern: re.Pattern) -> list[str]:
    found = []
    for path in _manual_pages():
        with open(path, encoding="utf-8") as f:
            for number, line in enumerate(f, start=1):
                match = pattern.search(line)
                if match:
                    where = f"{os.path.relpath(path, REPO)}:{number}"
                    found.append(f"{where}: {match.group(0)!r} in {line.strip()[:80]}")
    return found


def test_the_readme_and_docs_hold_no_run_dates_or_commit_hashes():
    found = _lines_matching(_HISTORY)
    assert not found, "\n".join(found)


def test_the_readme_and_docs_hold_no_development_history():
    found = _lines_matching(_PHRASE)
    assert not found, "development history in the manual:\n" + "\n".join(found)


def test_the_history_check_can_fail():
    for phrase in HISTORY_PHRASES:
        assert _PHRASE.search(f"Some text {phrase.upper()} more text")
    assert not _PHRASE.search("the earlier line of the file, as the code does today")
