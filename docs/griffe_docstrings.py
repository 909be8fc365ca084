"""A griffe extension of the documentation build (``mkdocs.yml``): the package's docstrings are Google style but
name other objects with Sphinx roles (``:class:`IsingProblem```, ``:func:`~hybrid_attention.exact.marginals```),
which Markdown would print as ``:class:`` followed by code. They become plain code spans (``~`` keeps the last
component, as in Sphinx). A section headed ``Example:`` (Napoleon reads it as ``Examples:``; griffe as a note of
free text, whose ``>>>`` lines Markdown would then mangle) is read as an examples section: code and its output. The
source files are not changed."""

from __future__ import annotations

import re

import griffe

EXAMPLE = re.compile(r"^(\s*)Example:[ \t]*$", flags=re.M)
ROLE = re.compile(r":(?:class|func|mod|meth|attr|data|exc|obj|py:\w+):`(~?)([^`]+)`")


def _code(match: re.Match) -> str:
    tilde, target = match.groups()
    return f"`{target.rsplit('.', 1)[-1] if tilde else target}`"


class GoogleDialect(griffe.Extension):
    def on_instance(self, *, obj: griffe.Object, **kwargs) -> None:
        if obj.docstring is not None:
            text = ROLE.sub(_code, obj.docstring.value)
            obj.docstring.value = EXAMPLE.sub(r"\1Examples:", text)
