"""MkDocs hooks of the documentation site (``hooks:`` in ``mkdocs.yml``); nothing here is part of the package.

The hooks do two things at build time, so that nothing on the site is a hand copy:

* ``cli_reference()`` renders the ``hybrid-attention`` command's argparse parsers
  (:func:`hybrid_attention.apps.cli.build_parser`) as Markdown; it replaces the ``<!-- cli-reference -->`` marker of
  ``docs/cli.md``. ``tests/test_docs.py`` imports this file to check it.
* The Markdown files and plots of ``results/`` are added to the site under ``results/`` (the Results page,
  ``docs/results.md``, links to them; ``results/README.md`` becomes ``results/readme/``). They stay where they are
  committed.
"""

from __future__ import annotations

import argparse
import functools
import importlib.util
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
CLI_MARKER = "<!-- cli-reference -->"
RESULT_SUFFIXES = (".md", ".png")
USAGE_WIDTH = 80  # usage lines that fit the content column


@functools.cache
def _docstrings():
    """``docs/griffe_docstrings.py``, which owns the links to the sections of the Concepts page."""
    spec = importlib.util.spec_from_file_location(
        "docs_griffe_docstrings", Path(__file__).parent / "griffe_docstrings.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def api_modules(root: Path = REPO) -> list[str]:
    """The public modules of the package under ``root`` (the repository): dotted names, none with a part that starts
    with an underscore."""
    names = []
    for path in sorted((root / "hybrid_attention").rglob("*.py")):
        parts = list(path.relative_to(root).with_suffix("").parts)
        parts = parts[:-1] if parts[-1] == "__init__" else parts
        if not any(part.startswith("_") for part in parts):
            names.append(".".join(parts))
    return names


def _md(text: str) -> str:
    """Help text as one Markdown table cell (a ``docs/theory.md section N`` becomes a link to that section)."""
    text = " ".join(text.split())
    for raw, escaped in (
        ("\\", "\\\\"),
        ("|", "\\|"),
        ("*", "\\*"),
        ("<", "&lt;"),
        (">", "&gt;"),
        ("`", "\\`"),
    ):
        text = text.replace(raw, escaped)
    return _docstrings().link_theory(text, "theory.md")


def _option_cell(action: argparse.Action) -> str:
    if not action.option_strings:
        return f"`{action.metavar or action.dest}`"
    metavar = ""
    if action.nargs != 0:
        if action.choices is not None and action.metavar is None:
            metavar = " {" + ",".join(map(str, action.choices)) + "}"
        else:
            metavar = f" {action.metavar or action.dest.upper()}"
            if action.nargs in ("+", "*"):
                metavar += " ..."
    return ", ".join(f"`{opt}{metavar}`" for opt in action.option_strings)


def _parser_section(
    name: str, parser: argparse.ArgumentParser, level: str = "##"
) -> list[str]:
    formatter = parser.formatter_class(
        prog=parser.prog, width=USAGE_WIDTH
    )  # not the terminal's width
    lines = [f"{level} `{name}`", ""]
    if parser.description:
        text = _md(parser.description).rstrip(".") + "."
        lines += [text[0].upper() + text[1:], ""]
    formatter.add_usage(
        parser.usage, parser._actions, parser._mutually_exclusive_groups
    )
    lines += ["```text", formatter.format_help().strip(), "```", ""]
    for group in parser._action_groups:
        actions = [
            a
            for a in group._group_actions
            if a.help != argparse.SUPPRESS and a.dest != "help"
        ]
        actions = [a for a in actions if not isinstance(a, argparse._SubParsersAction)]
        if not actions:
            continue
        lines += [
            f"**{group.title.capitalize()}**",
            "",
            "| argument | meaning |",
            "| --- | --- |",
        ]
        for action in actions:
            required = (
                " (required)" if action.required and action.option_strings else ""
            )
            help_ = formatter._expand_help(action) if action.help else ""
            lines.append(f"| {_option_cell(action)} | {_md(help_)}{required} |")
        lines.append("")
    return lines


def cli_reference(parser: argparse.ArgumentParser | None = None) -> str:
    """The reference of every ``hybrid-attention`` subcommand, from the parser the console script builds."""
    if parser is None:
        from hybrid_attention.apps.cli import build_parser

        parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    lines = _parser_section(parser.prog, parser)
    helps = {choice.dest: choice.help for choice in sub._choices_actions}
    lines += ["| command | what it does |", "| --- | --- |"]
    lines += [
        f"| [`{name}`](#{name}) | {_md(helps.get(name) or '')} |"
        for name in sub.choices
    ]
    lines.append("")
    for name, subparser in sub.choices.items():
        lines += _parser_section(f"{parser.prog} {name}", subparser)
    text = "\n".join(lines)
    for name in sub.choices:  # headings get stable anchors: #train, #ablate, ...
        text = text.replace(
            f"## `{parser.prog} {name}`\n", f"## `{parser.prog} {name}` {{#{name}}}\n"
        )
    return text


# ----------------------------------------------------------------------------------------------------------- hooks
def on_files(files, config, **kwargs):
    from mkdocs.structure.files import File

    for path in sorted((REPO / "results").rglob("*")):
        if path.suffix in RESULT_SUFFIXES and path.is_file():
            uri = path.relative_to(REPO).as_posix()
            if uri == "results/README.md":  # docs/results.md is the page at results/
                uri = "results/readme.md"
            files.append(File.generated(config, uri, abs_src_path=str(path)))
    return files


def on_page_markdown(markdown, page, config, files, **kwargs):
    if page.file.src_uri == "cli.md":
        assert CLI_MARKER in markdown, f"docs/cli.md lost its {CLI_MARKER} marker"
        markdown = markdown.replace(CLI_MARKER, cli_reference())
    return markdown
