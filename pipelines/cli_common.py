"""Pieces the command lines share: the parser, LightGBM's options and metric tables."""

from __future__ import annotations

import argparse
import dataclasses
import json
import math

from tfr_rankformer.core.config_io import setting


def make_parser(prog: str, description: str, module_doc: str) -> argparse.ArgumentParser:
    """A parser whose epilog is the examples section of the command module's docstring."""
    return argparse.ArgumentParser(
        prog=prog,
        description=description,
        epilog=module_doc.split("Examples::")[1],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )


@dataclasses.dataclass(frozen=True)
class LightGBMOptions:
    """The options of the GBDTs' LightGBM (``tfr-train``, ``tfr-distill``)."""

    trees: int | None = setting(
        None,
        "trees to grow (all kept unless --early-stopping-rounds). Default: the preset's "
        "(1,000 or 10,000)",
    )
    lgb_param: list | None = setting(
        None,
        "any LightGBM parameter over the preset's (repeatable), e.g. num_leaves=255; a "
        'config file\'s "params" object does the same',
        action="append",
        metavar="KEY=VALUE",
    )
    early_stopping_rounds: int = setting(
        0,
        "stop when the validation score has not improved for this many trees, keeping the "
        "best tree count (0: never; the whole budget is kept). Default: 0",
    )
    num_threads: int | None = setting(None, "LightGBM threads. Default: one per core")


def format_metrics(metrics: dict[str, dict], keys: list[str]) -> str:
    """A plain-text table, a row per split and a column per metric; then what no list of a
    split could measure."""
    rows = [["split", *keys]]
    for split, values in metrics.items():
        row = [split]
        for key in keys:
            value = values.get(key)
            if isinstance(value, float) and not math.isnan(value):
                row.append(f"{value:.2f}" if "ndcg" in key else f"{value:.3f}")
            else:
                row.append("-" if value is None else str(value))
        rows.append(row)
    lines = aligned(rows)
    lines += [
        f"{s}: not measured: {v['not_measured']}" for s, v in metrics.items() if "not_measured" in v
    ]
    return "\n".join(lines)


def aligned(rows: list[list[str]], *, left: bool = False) -> list[str]:
    """Rows of cells as lines of right-aligned columns, the first left-aligned if ``left``."""
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return [
        "  ".join(
            c.ljust(w) if left and not i else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths))
        )
        for r in rows
    ]


def json_value(text: str):
    """``text`` as JSON where it parses, else as it is."""
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text


def parse_lgb_params(pairs: list[str] | None) -> dict:
    """``KEY=VALUE`` strings as LightGBM parameters; values are read as JSON when they parse."""
    params = {}
    for pair in pairs or []:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise ValueError(f"--lgb-param takes KEY=VALUE, got {pair!r}")
        params[key.strip()] = json_value(value)
    return params


def data_loss_message(data_dir: str, error) -> str:
    """One line for a ``tf.errors.DataLossError`` (a shard changed after the checks)."""
    return f"{data_dir}: corrupt or truncated TFRecord data ({error.message.strip()})"
