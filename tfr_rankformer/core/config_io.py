"""Settings declared once, on dataclass fields: command-line options generated from them,
their checks, and JSON settings files.

>>> @dataclasses.dataclass(frozen=True)
... class Demo:
...     list_size: int | None = setting(None, "items a list keeps at most")
>>> parser = argparse.ArgumentParser()
>>> add_options(parser, Demo)
>>> given(parser.parse_args(["--list-size", "3"]), Demo)
{'list_size': 3}
"""

from __future__ import annotations

import argparse
import dataclasses
import difflib
import functools
import json
import types
import typing

from tfr_rankformer.core.atomic_files import atomic_write


def setting(default=None, help: str = "", **options):
    """A dataclass field with its option's ``help`` and ``add_argument`` keywords (``flag``
    renames the option; ``off_flag``/``off_help`` add a flag that turns it off)."""
    if isinstance(default, (dict, list)):
        return dataclasses.field(
            default_factory=lambda: type(default)(default), metadata={"help": help, **options}
        )
    return dataclasses.field(default=default, metadata={"help": help, **options})


def on_off(text: str) -> bool | None:
    """An ``on``/``off``/``auto`` option's value: ``True``, ``False``, or ``None`` (auto)."""
    values = {"on": True, "off": False, "auto": None}
    if text not in values:
        raise argparse.ArgumentTypeError(f"expected on, off or auto, got {text!r}")
    return values[text]


def _flag(field: dataclasses.Field) -> str:
    return field.metadata.get("flag") or "--" + field.name.replace("_", "-")


def _dest(field: dataclasses.Field) -> str:
    """The flag's name: fields of several classes may share one option (``--seed``)."""
    return _flag(field)[2:].replace("-", "_")


def _base_type(hint):
    """``int`` of ``int | None``; ``None`` for containers and unions of several types."""
    args = [a for a in typing.get_args(hint) if a is not type(None)]
    if typing.get_origin(hint) in (typing.Union, types.UnionType) and len(args) == 1:
        hint = args[0]
    return hint if hint in (int, float, str, bool) else None


def _stated(text: str, default) -> str:
    if "Default" in text or default is None or default is False or default in ("", ()):
        return text
    if isinstance(default, bool):
        default = "on"
    return f"{text}{'' if text.endswith('.') else '.'} Default: {default}"


def add_options(group, cls, *, only=(), skip=(), overrides: dict | None = None) -> None:
    """Adds to ``group`` an option per field of ``cls`` with a help text (``only`` picks and
    orders), parsed to ``None`` when not given so that only given flags override
    ``--config``; ``overrides``: a field's ``add_argument`` keywords replacing its own."""
    hints = _hints(cls)
    fields = {f.name: f for f in dataclasses.fields(cls) if "help" in f.metadata}
    for name in only or fields:
        if name in skip:
            continue
        field = fields[name]
        options = {k: v for k, v in field.metadata.items() if k != "flag"}
        options.update((overrides or {}).get(name, {}))
        if callable(options.get("choices")):  # e.g. the models registered when parsing
            options["choices"] = options["choices"]()
        kind = _base_type(hints[name])
        if kind is bool and "action" not in options and "type" not in options:
            options["action"] = "store_true"
        elif kind in (int, float) and "action" not in options:
            options.setdefault("type", kind)
        default = field.default if field.default is not dataclasses.MISSING else None
        if options.get("action") == "store_false":  # the flag turns the default off
            default = None
        options["help"] = _stated(options.get("help") or "", default)
        options.setdefault("default", None)
        off_flag, off_help = options.pop("off_flag", None), options.pop("off_help", None)
        where = group.add_mutually_exclusive_group() if off_flag else group
        where.add_argument(_flag(field), dest=_dest(field), **options)
        if off_flag:  # a pair such as --include-empty-lists / --exclude-empty-lists
            where.add_argument(off_flag, dest=_dest(field), action="store_false", help=off_help)


def given(args: argparse.Namespace, cls) -> dict:
    """Field name -> value of ``cls``'s options given on the command line."""
    fields = [f for f in dataclasses.fields(cls) if "help" in f.metadata]
    values = {f.name: getattr(args, _dest(f), None) for f in fields}
    return {name: value for name, value in values.items() if value is not None}


def from_args(args: argparse.Namespace, cls):
    """A ``cls`` of the options given, its defaults for the rest."""
    return cls(**given(args, cls))


def write_json(path: str, values: dict) -> None:
    """Writes ``values`` as JSON under a temporary name, then renames it into place."""
    with atomic_write(path) as f:
        json.dump(values, f, indent=1, sort_keys=True)
        f.write("\n")


def require_positive_ints(config, *names: str, optional: bool = False) -> None:
    """Raises ``ValueError`` unless each named field is an int >= 1 (or ``optional`` None)."""
    for name in names:
        value = getattr(config, name)
        if optional and value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"`{name}` must be a positive int, got {value!r}")


# Annotation -> the JSON values it takes, and how an error names them.
_KINDS = {bool: bool, int: int, float: (int, float), str: str, type(None): type(None)}
_KINDS |= {tuple: (list, tuple), list: (list, tuple), dict: dict}
_NAMES = {bool: "true or false", int: "an int", float: "a number", str: "a string"}
_NAMES |= {type(None): "null", tuple: "a list", list: "a list", dict: "an object"}


def _matches(hint, value) -> bool:
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        return any(_matches(arm, value) for arm in typing.get_args(hint))
    if dataclasses.is_dataclass(hint):
        return isinstance(value, (dict, hint))
    kinds = _KINDS.get(typing.get_origin(hint) or hint)
    if kinds is None:
        return True
    return isinstance(value, kinds) and not (isinstance(value, bool) and hint in (int, float))


def _describe(hint) -> str:
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        return " or ".join(_describe(arm) for arm in typing.get_args(hint))
    return _NAMES.get(typing.get_origin(hint) or hint, "an object")


@functools.cache
def _hints(cls) -> dict:
    return typing.get_type_hints(cls)


def check_fields(config) -> None:
    """Raises ``ValueError`` naming the field of ``config`` not of its type or choices."""
    hints = _hints(type(config))
    for field in dataclasses.fields(config):
        value, hint = getattr(config, field.name), hints[field.name]
        if dataclasses.is_dataclass(hint):
            continue
        if not _matches(hint, value):
            raise ValueError(f"`{field.name}` must be {_describe(hint)}, got {value!r}")
        choices = field.metadata.get("choices")
        if value is not None and choices and not callable(choices) and value not in choices:
            raise ValueError(f"`{field.name}` must be one of {list(choices)}, got {value!r}")


def check_types(cls, values: dict, *, where: str, flat: bool = False) -> None:
    """Raises ``ValueError`` naming ``where`` and the field of ``values`` not of its type in
    ``cls`` (``flat``: nested classes' keys may stand at the top; unknown keys pass)."""
    hints = _hints(cls)
    nested = {n: h for n, h in hints.items() if dataclasses.is_dataclass(h)}
    for name, value in values.items():
        hint = hints.get(name)
        for section in nested.values() if hint is None and flat else ():
            hint = hint or _hints(section).get(name)
        if hint is None:
            continue
        if name in nested and isinstance(value, dict):
            check_types(nested[name], value, where=where)
        elif not _matches(hint, value):
            raise ValueError(f"{where}: `{name}` must be {_describe(hint)}, got {value!r}")


class SettingsFileError(ValueError):
    """A settings file that does not hold valid settings; the message names the file."""


def read_settings(path: str) -> dict:
    """The JSON object in ``path``, unchecked; else ``SettingsFileError`` naming the file."""
    with open(path, encoding="utf-8") as f:
        try:
            values = json.load(f)
        except json.JSONDecodeError as e:
            raise SettingsFileError(
                f"{path}:{e.lineno}:{e.colno}: not valid JSON: {e.msg}"
            ) from None
        except UnicodeDecodeError:
            raise SettingsFileError(f"{path}: not UTF-8 text") from None
    if not isinstance(values, dict):
        found = _NAMES.get(type(values), type(values).__name__)
        raise SettingsFileError(
            f'{path}: must hold a JSON object of settings ({{"name": value}}), not {found}'
        )
    return values


def load_settings(path: str, cls, *, flat: bool = False, extra: tuple = ()) -> dict:
    """The settings in ``path``, each a field of ``cls`` (``flat``: or of its nested
    classes; ``extra``: other keys) of its type, else ``SettingsFileError`` naming both."""
    values = read_settings(path)
    hints = _hints(cls)
    known = set(hints) | set(extra)
    for hint in hints.values() if flat else ():
        known |= set(_hints(hint)) if dataclasses.is_dataclass(hint) else set()
    unknown = sorted(set(values) - known)
    if unknown:
        close = difflib.get_close_matches(unknown[0], known, n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        raise SettingsFileError(f"{path}: unknown settings {', '.join(map(repr, unknown))}{hint}")
    try:
        check_types(cls, values, where=path, flat=flat)
    except ValueError as e:
        raise SettingsFileError(str(e)) from None
    return values


def from_dict(cls, values: dict, *, nested: dict | None = None, what: str = "settings"):
    """``cls`` from JSON ``values`` (``nested`` fields' classes, given as dicts); a
    ``ValueError`` names keys that are not fields."""
    values = dict(values)
    for name, field_cls in (nested or {}).items():
        if isinstance(values.get(name), dict):
            values[name] = field_cls(**values[name])
    unknown = set(values) - {f.name for f in dataclasses.fields(cls)}
    if unknown:
        raise ValueError(f"Unknown {what} {sorted(unknown)}")
    return cls(**values)


def nest_flat(settings: dict, sections: dict) -> dict:
    """``settings`` with each key of a section (``sections``: name -> its keys) moved into
    it; a section may be given whole too, and a flat key overrides it there."""
    values, nested = {}, {}
    for name in sections:
        given = settings.get(name)
        if dataclasses.is_dataclass(given):
            given = dataclasses.asdict(given)
        if given is not None and not isinstance(given, dict):
            raise ValueError(f"`{name}` must be an object of settings, got {given!r}")
        nested[name] = dict(given or {})
    owner = {field: name for name, fields in sections.items() for field in fields}
    for key, value in settings.items():
        if key in owner:
            nested[owner[key]][key] = value
        elif key not in sections:
            values[key] = value
    return {**values, **nested}
