"""The subcommands' flags, recorded, so that ``hybrid-attention --help`` and ``hybrid-attention COMMAND --help`` (and
:func:`hybrid_attention.apps.cli.build_parser`) need no torch, qiskit or pennylane.

A subcommand's flags are defined by its module's ``add_arguments(parser)``, and those modules import torch (their
defaults and choices come from the training configuration and the samplers). :func:`record` turns a subcommand's
parser into plain data (every action's class, option strings, ``dest``, ``nargs``, ``const``, default, type, choices,
``required``, help and metavar; argument groups, mutually exclusive groups and ``set_defaults`` values);
:func:`restore` rebuilds the same parser from it: the same help text, the same attributes (types and custom actions
are resolved from their module only when a value is parsed). The record lives in :mod:`.cli_flags_data`;
``tests/apps/test_cli_flags.py`` fails when it no longer matches the modules (regenerate it with
``python -m hybrid_attention.apps.cli_flags``). A command that runs is parsed by its module's own parser.
"""

from __future__ import annotations

import argparse
import ast
import importlib
import json
from pathlib import Path
from typing import Any

__all__ = ["record", "restore", "recorded", "write"]

#: argparse's own action classes, by registry name (their parsing is reproduced exactly)
_STANDARD = {
    cls: name
    for name, cls in argparse.ArgumentParser()._registries["action"].items()
    if name is not None and isinstance(cls, type)
}
_STANDARD[argparse.BooleanOptionalAction] = "boolean_optional"
_CLASSES = {name: cls for cls, name in _STANDARD.items()}
#: action attributes that are not data (the group an action sits in is recorded separately)
_SKIP = {"container"}
#: every action's attributes (recorded only when not ``None``)
_ATTRS = tuple(k for k in vars(argparse.Action(["-x"], "x")) if k not in _SKIP)


# subcommand -> (module, one-line help)
COMMANDS = {
    "demo": ("hybrid_attention.apps.demo", "the main demonstration on local defaults (no account, no network)"),
    "train": ("hybrid_attention.apps.train.command", "train a decoder with Boltzmann or softmax attention on a task"),
    "ablate": (
        "hybrid_attention.apps.ablate.command",
        "run the four-way ablation (modes x block sizes x seeds) and tabulate it",
    ),
    "fidelity": ("hybrid_attention.apps.fidelity.command", "measure sampler fidelity against exact enumeration"),
    "estimate": (
        "hybrid_attention.apps.estimate",
        "what a run on the IBM route would submit and cost (jobs, circuits, shots, QPU seconds), submitting nothing",
    ),
    "mixing": (
        "hybrid_attention.apps.mixing",
        "spectral gaps and autocorrelation times of quantum and classical chains on your problems",
    ),
    "claims": (
        "hybrid_attention.apps.claims.command",
        "the paper's findings against the experiment plan's runs: paired CIs, Holm tests, verdicts, plots",
    ),
}


class HelpFormatter(argparse.ArgumentDefaultsHelpFormatter):
    """Appends ``(default: X)`` to the help of every option taking a value, except where the help already says it
    or there is no default to show (``None`` or suppressed)."""

    def _get_help_string(self, action: argparse.Action) -> str:
        help_ = action.help or ""
        return help_ if "(default" in help_ or not shows_default(action) else f"{help_} (default: %(default)s)".lstrip()


def shows_default(action: argparse.Action) -> bool:
    """Options taking a value, with a default to show (a flag's ``True``/``False`` says nothing useful)."""
    return action.nargs != 0 and action.default is not None and action.default is not argparse.SUPPRESS


def command_parser(name: str) -> argparse.ArgumentParser | None:
    """The parser of subcommand ``name`` from its module (imported here; ``None`` when the module is missing), as
    :func:`build_parser` places it (``prog`` ``hybrid-attention NAME``); its ``_run`` default is the module's ``run``."""
    module, help_ = COMMANDS[name]
    try:
        mod = importlib.import_module(module)
    except ModuleNotFoundError as exc:
        if exc.name != module:
            raise
        return None
    sub = argparse.ArgumentParser(prog="hybrid-attention").add_subparsers(dest="command", metavar="COMMAND")
    p = subparser(sub, name, help_)
    mod.add_arguments(p)
    for action in p._actions:  # argparse prints nothing, not even the default, for an option without help text
        if action.help is None and action.option_strings and shows_default(action):
            action.help = "(default: %(default)s)"
    p.set_defaults(_run=mod.run)
    return p


def subparser(sub: Any, name: str, help_: str) -> argparse.ArgumentParser:
    return sub.add_parser(name, help=help_, description=help_, formatter_class=HelpFormatter)


def _path(obj: Any) -> str:
    return f"{obj.__module__}:{obj.__qualname__}"


def _encode(value: Any) -> Any:
    """A value as JSON: Python literals by ``repr`` (tuples, sets and dicts survive), anything else by its ``str`` and
    ``repr`` (enough for help text)."""
    if value is None or value is argparse.SUPPRESS:
        return {"special": "None" if value is None else "SUPPRESS"}
    if isinstance(value, type) or callable(value) and hasattr(value, "__qualname__"):
        return {"callable": _path(value)}
    try:
        if ast.literal_eval(repr(value)) == value:
            return {"literal": repr(value)}
    except (ValueError, SyntaxError, TypeError):
        pass
    return {"str": str(value), "repr": repr(value)}


def _decode(data: Any) -> Any:
    if "special" in data:
        return None if data["special"] == "None" else argparse.SUPPRESS
    if "callable" in data:
        return _Lazy(data["callable"])
    if "literal" in data:
        return ast.literal_eval(data["literal"])
    return _Shown(data["str"], data["repr"])


class _Shown:
    """A default that is not a Python literal, kept as its ``str`` and ``repr`` (all help text uses)."""

    def __init__(self, s: str, r: str) -> None:
        self._s, self._r = s, r

    def __str__(self) -> str:
        return self._s

    def __repr__(self) -> str:
        return self._r


class _Lazy:
    """A type (or other callable) resolved from ``module:qualname`` when first called, i.e. when a value is parsed."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.__name__ = path.rpartition(":")[2].rpartition(".")[2]  # argparse names a failing type by __name__

    def resolve(self) -> Any:
        module, _, qualname = self.path.partition(":")
        obj: Any = importlib.import_module(module)
        for part in qualname.split("."):
            obj = getattr(obj, part)
        return obj

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.resolve()(*args, **kwargs)

    def __repr__(self) -> str:
        return self.__name__


class _Recorded(argparse.Action):
    """A custom action class, stood in for (its attributes are recorded; parsing resolves the real class)."""

    action_path = ""

    def __call__(self, parser: Any, namespace: Any, values: Any, option_string: Any = None) -> None:
        real = _Lazy(self.action_path).resolve()
        action = real.__new__(real)
        action.__dict__.update(self.__dict__)
        action(parser, namespace, values, option_string)


def record(parser: argparse.ArgumentParser) -> dict[str, Any]:
    """A subcommand parser's flags as plain data (module docstring)."""
    groups = parser._action_groups
    mutex = parser._mutually_exclusive_groups
    actions = []
    for action in parser._actions:
        cls = type(action)
        attrs = {k: _encode(v) for k, v in vars(action).items() if k not in _SKIP and v is not None}
        if action.choices is not None and "literal" not in attrs["choices"]:  # e.g. dict keys: kept as a list
            attrs["choices"] = _encode(list(action.choices))
        actions.append(
            {
                "class": _STANDARD.get(cls) or _path(cls),
                "attrs": attrs,
                "group": next(i for i, g in enumerate(groups) if action in g._group_actions),
                "mutex": next((i for i, g in enumerate(mutex) if action in g._group_actions), None),
            }
        )
    return {
        "parser": {k: getattr(parser, k) for k in ("description", "epilog", "usage")},
        "groups": [{"title": g.title, "description": g.description} for g in groups],
        "mutex": [
            {"required": g.required, "group": groups.index(g._container) if g._container in groups else -1}
            for g in mutex
        ],
        "actions": actions,
        "defaults": {k: _encode(v) for k, v in parser._defaults.items() if not k.startswith("_")},
    }


def restore(spec: dict[str, Any], parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """Add the recorded flags to ``parser`` (a fresh subparser, as ``add_parser`` returns it: its help action and
    default groups present)."""
    for k, v in spec["parser"].items():
        setattr(parser, k, v)
    groups = list(parser._action_groups)
    for g in spec["groups"][len(groups) :]:
        groups.append(parser.add_argument_group(g["title"], g["description"]))
    containers: list[Any] = [*groups, parser]  # index -1: a mutually exclusive group made on the parser itself
    mutex = [containers[m["group"]].add_mutually_exclusive_group(required=m["required"]) for m in spec["mutex"]]
    have = {a.dest for a in parser._actions}
    for a in spec["actions"]:
        attrs = {k: None for k in _ATTRS} | {k: _decode(v) for k, v in a["attrs"].items()}  # None: not recorded
        if attrs["dest"] in have and attrs["option_strings"] == ["-h", "--help"]:
            continue  # add_parser's own help action
        cls = _CLASSES.get(a["class"])
        if cls is None:
            cls = type("Recorded", (_Recorded,), {"action_path": a["class"]})
        action = cls.__new__(cls)
        action.__dict__.update(attrs)
        (mutex[a["mutex"]] if a["mutex"] is not None else groups[a["group"]])._add_action(action)
    parser.set_defaults(**{k: _decode(v) for k, v in spec["defaults"].items()})
    return parser


def recorded() -> dict[str, dict[str, Any]]:
    """Every subcommand's recorded flags, by name (from :mod:`.cli_flags_data`)."""
    from .cli_flags_data import FLAGS

    return json.loads(FLAGS)


def write(path: Path | None = None) -> Path:
    """Record every subcommand's flags from its module (imports them all) into :mod:`.cli_flags_data`."""
    flags = {}
    for name in COMMANDS:
        parser = command_parser(name)
        if parser is not None:
            flags[name] = record(parser)
    commands = []
    for name, spec in flags.items():
        head = ", ".join(f"{json.dumps(k)}: {json.dumps(v, sort_keys=True)}" for k, v in spec.items() if k != "actions")
        actions = ",\n".join(f"    {json.dumps(a, sort_keys=True)}" for a in spec["actions"])
        commands.append(f'  {json.dumps(name)}: {{{head}, "actions": [\n{actions}\n  ]}}')
    body = ",\n".join(commands)
    if '"""' in body:
        raise ValueError('a help text holds """ and cannot be written inside a raw string literal')
    path = Path(__file__).with_name("cli_flags_data.py") if path is None else path
    path.write_text(
        '"""Generated by ``python -m hybrid_attention.apps.cli_flags`` from the subcommands\' ``add_arguments``: the\n'
        'recorded flags of :mod:`hybrid_attention.apps.cli_flags`. Do not edit; regenerate."""\n\n'
        f'FLAGS = r"""{{\n{body}\n}}"""\n'
    )
    return path


if __name__ == "__main__":
    print(f"wrote {write()}")
