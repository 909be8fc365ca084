"""A griffe extension of the documentation build (``mkdocs.yml``): the package's docstrings are Google style but
name other objects with Sphinx roles (``:class:`IsingProblem```, ``:func:`~hybrid_attention.exact.marginals```),
which Markdown would print as ``:class:`` followed by code. They become plain code spans (``~`` keeps the last
component, as in Sphinx). A section headed ``Example:`` (Napoleon reads it as ``Examples:``; griffe as a note of
free text, whose ``>>>`` lines Markdown would then mangle) is read as an examples section: code and its output. A
reStructuredText literal block (``text::`` then an indented block) keeps its code block and loses the second colon.
A reference to ``docs/theory.md section N`` becomes a link to that section of the site's Concepts page (the API pages
sit one folder below it). The source files are not changed."""

from __future__ import annotations

import re

import griffe

LITERAL = re.compile(r"::[ \t]*$(?=\n[ \t]*\n[ \t]+\S)", flags=re.M)
THEORY = re.compile(r"(?<![\[`/])docs/theory\.md section ([1-6])\b")
SECTIONS = {  # docs/theory.md's section headings as anchors
    "1": "1-the-idea",
    "2": "2-conventions-fixed",
    "3": "3-boltzmann-attention",
    "4": "4-diabatic-quantum-annealing-dqa",
    "5": "5-tasks-and-the-papers-findings",
    "6": "6-quantum-enhanced-mcmc-qemcmc",
}
EXAMPLE = re.compile(r"^(\s*)Example:[ \t]*$", flags=re.M)
ROLE = re.compile(r":(?:class|func|mod|meth|attr|data|exc|obj|py:\w+):`(~?)([^`]+)`")


def _code(match: re.Match) -> str:
    tilde, target = match.groups()
    return f"`{target.rsplit('.', 1)[-1] if tilde else target}`"


class GoogleDialect(griffe.Extension):
    def on_instance(self, *, obj: griffe.Object, **kwargs) -> None:
        if obj.docstring is not None:
            text = ROLE.sub(_code, obj.docstring.value)
            text = LITERAL.sub(":", text)
            text = THEORY.sub(
                lambda m: (
                    f"[docs/theory.md section {m[1]}](../theory.md#{SECTIONS[m[1]]})"
                ),
                text,
            )
            obj.docstring.value = EXAMPLE.sub(r"\1Examples:", text)
