"""Every ```python block of README.md runs (in order, in one namespace), and the two set-up commands stay as CI runs them."""

from __future__ import annotations

import re

from tests.conftest import REPO


def _blocks(lang: str) -> list[str]:
    text = (REPO / "README.md").read_text()
    return re.findall(rf"```{lang}\n(.*?)```", text, flags=re.S)


def test_readme_python_examples_run():
    blocks = _blocks("python")
    assert blocks, "README.md has no python examples"
    ns: dict = {}
    for code in blocks:
        exec(compile(code, "README.md", "exec"), ns)


def test_ci_runs_the_readme_test_command():
    bash = [b.strip() for b in _blocks("bash")]
    commands = [line for b in bash for line in b.splitlines() if line and not line.startswith("#")]
    assert len(commands) >= 2
    test_cmd = next(c for c in commands if "pytest" in c)
    ci = (REPO / ".ci" / "run").read_text()
    assert test_cmd in ci, f"README test command {test_cmd!r} is not what .ci/run runs"
