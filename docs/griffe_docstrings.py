"""A griffe extension of the documentation build (``mkdocs.yml``): the package's docstrings are Google style but
name other objects with Sphinx roles (``:class:`IsingProblem```, ``:func:`~hybrid_attention.exact.marginals```),
which Markdown would print as ``:class:`` followed by code. They become plain code spans (``~`` keeps the last
component, as in Sphinx). A section headed ``Example:`` (Napoleon reads it as ``Examples:``; griffe as a note of
free text, whose ``>>>`` lines Markdown would then mangle) is read as an examples section: code and its output. A
reStructuredText literal block (``text::`` then an indented block) keeps its code block and loses the second colon.
A reference to ``docs/theory.md section N`` becomes a link to that section of the site's Concepts page (the API pages
sit one folder below it). The source files are not changed."""

from __future__ import annotations

import functools
import re
from pathlib import Path

import griffe

THEORY_PAGE = Path(__file__).resolve().parent / "theory.md"
LITERAL = re.compile(r"::[ \t]*$(?=\n[ \t]*\n[ \t]+\S)", flags=re.M)
THEORY = re.compile(r"(?<![\[`/])docs/theory\.md section ([1-9])\b")
EXAMPLE = re.compile(r"^(\s*)Example:[ \t]*$", flags=re.M)
ROLE = re.compile(r":(?:class|func|mod|meth|attr|data|exc|obj|py:\w+):`(~?)([^`]+)`")


@functools.cache
def theory_sections() -> dict[str, str]:
    """The numbered sections of ``docs/theory.md`` -> their anchors on the site (as the toc extension makes them)."""
    from markdown.extensions.toc import slugify

    found = re.findall(r"^## (\d+)\. (.+)$", THEORY_PAGE.read_text(), flags=re.M)
    return {number: slugify(f"{number}. {title}", "-") for number, title in found}


def link_theory(text: str, page: str) -> str:
    """Every ``docs/theory.md section N`` of ``text`` as a link to that section of ``page`` (the Concepts page,
    relative to the page the text lands on); a section that does not exist stays plain text."""
    sections = theory_sections()

    def link(m: re.Match) -> str:
        anchor = sections.get(m[1])
        return f"[{m[0]}]({page}#{anchor})" if anchor else m[0]

    return THEORY.sub(link, text)


def _code(match: re.Match) -> str:
    tilde, target = match.groups()
    return f"`{target.rsplit('.', 1)[-1] if tilde else target}`"


class GoogleDialect(griffe.Extension):
    def on_instance(self, *, obj: griffe.Object, **kwargs) -> None:
        if obj.docstring is not None:
            text = ROLE.sub(_code, obj.docstring.value)
            text = LITERAL.sub(":", text)
            text = link_theory(text, "../theory.md")  # the API pages sit in docs/api/
            obj.docstring.value = EXAMPLE.sub(r"\1Examples:", text)
