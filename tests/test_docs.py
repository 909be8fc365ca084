"""The documentation site: every code block of ``docs/`` runs, its commands parse, and the site builds strictly.

* Each ```` ```python ```` block of ``docs/**/*.md`` runs on its own, in a fresh namespace and a temporary working
  directory. A block whose first line is ``# Not run by the tests: REASON`` is skipped with that reason (the reader
  sees the same line). A ```` ```text ```` block right after a python block is what it prints, and must stay so.
* Each ``hybrid-attention ...`` line of a ```` ```bash ```` block parses with the real command-line parser, so no
  documented command or option can go stale (running them all would mean hours of training).
* The generated CLI reference (``docs/hooks.py``) covers every subcommand and option.
* ``mkdocs build --strict`` succeeds (into a temporary directory); ``docs/check_site.py`` opens the built site in
  headless Chromium (``slow``; skipped without Chromium).
"""

from __future__ import annotations

import contextlib
import importlib.util
import io
import itertools
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO
from tests.shown import mismatches

DOCS = REPO / "docs"
SKIP = "# Not run by the tests:"
FENCE = re.compile(r"^```(\w*)[^\n]*\n(.*?)^```[ \t]*$", flags=re.M | re.S)


def blocks(path: Path) -> list[tuple[str, int, str, str | None]]:
    """``(language, line, code, expected output or None)`` of every fenced block of a Markdown file."""
    text = path.read_text()
    found = [
        (m.group(1), text.count("\n", 0, m.start()) + 1, m.group(2), m.start(), m.end()) for m in FENCE.finditer(text)
    ]
    out = []
    for i, (lang, line, code, _, end) in enumerate(found):
        expected = None
        if lang == "python" and i + 1 < len(found):
            nxt_lang, _, nxt_code, nxt_start, _ = found[i + 1]
            if nxt_lang == "text" and not text[end:nxt_start].strip():
                expected = nxt_code
        out.append((lang, line, code, expected))
    return out


def _pages() -> list[Path]:
    return sorted(p for p in DOCS.rglob("*.md") if "api" not in p.relative_to(DOCS).parts)


def _cases(lang: str) -> list:
    return [
        pytest.param(page, code, expected, id=f"{page.relative_to(DOCS)}:{line}")
        for page in _pages()
        for block_lang, line, code, expected in blocks(page)
        if block_lang == lang
    ]


def _load(name: str):
    """A helper module of docs/ (not a package) by file name."""
    spec = importlib.util.spec_from_file_location(f"docs_{name}", DOCS / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize(("page", "code", "expected"), _cases("python"))
def test_python_block_runs(page, code, expected, tmp_path, monkeypatch):
    first = code.lstrip().splitlines()[0] if code.strip() else ""
    if first.startswith(SKIP):
        pytest.skip(first[len(SKIP) :].strip())
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("MPLBACKEND", "Agg")
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        exec(compile(code, str(page), "exec"), {"__name__": "__docs__"})
    if expected is not None:  # within one unit of each printed decimal's last digit (tests/shown.py)
        shown = printed.getvalue()
        problems = mismatches(shown, expected)
        assert not problems, f"{page.name}: the output shown is stale ({problems}); it prints now:\n{shown}"


@pytest.mark.parametrize(("page", "code", "expected"), _cases("python"))
def test_python_block_compiles(page, code, expected):
    """Every block compiles, the ones the tests do not run (real hardware) included: a reader copies them too."""
    compile(code, str(page), "exec")


def _commands(code: str) -> list[list[str]]:
    joined = re.sub(r"\\\n\s*", " ", code)
    argvs = [shlex.split(line, comments=True) for line in joined.splitlines()]
    return [argv for argv in argvs if argv and argv[0] == "hybrid-attention"]


@pytest.mark.parametrize(("page", "code", "expected"), _cases("bash"))
def test_shell_commands_parse(page, code, expected, capsys):
    from hybrid_attention.apps.cli import build_parser

    for argv in _commands(code):
        try:
            build_parser().parse_args(argv[1:])
        except SystemExit as exc:  # --help and --version exit with 0 after printing
            assert exc.code == 0, f"{' '.join(argv)}: {capsys.readouterr().err.strip()}"


# A documented training run's loss moves with the float kernels (AVX2, AVX-512, ATEN_CPU_CAPABILITY=default) by at
# most 4e-4 in the README's measurement (tests/test_readme.py); the same 3e-3 bound, over seven times that, applies.
TRAINING = 3e-3
# The demo's DQA row follows one sampling trajectory (reads of a simulated anneal): a kernel's last-bit difference
# flips a read and the training goes elsewhere. Measured on an AMD EPYC (2026-12-06, issue #44), ATEN_CPU_CAPABILITY
# default against avx2: 74.2 / 24.3 / 56.3 % against 84.7 / 52.3 / 58.9 %; the page shows 78.6 / 29.9 / 65.6 % from
# another machine. The widest move, 22.4 points (whole-string accuracy), times 1.3 is the bound: it still fails if
# DQA training collapses (val accuracy under 48.6 %) or catches up with exact training (whole-string accuracy over
# 59.9 %; exact: 100 %). Every other row measured unchanged between the kernels: one point for the qemcmc row (also
# sample-trained), one unit of the last digit elsewhere.
DEMO_TOLERANCES = {"DQA samples": 30.0, "qemcmc samples": 1.0}
#: the time column of the demo's table: machine- and load-dependent, not compared
_TIME = re.compile(r"\| \d+ s \|$")


def _shown_commands() -> list:
    """``(page, commands, output shown)`` of every ```` ```bash ```` block followed directly by a ```` ```text ````
    block in docs/: a command-line example with its output (a table shown: the table it prints)."""
    cases = []
    for page in _pages():
        text = page.read_text()
        found = list(FENCE.finditer(text))
        for m, nxt in zip(found, found[1:]):
            if m.group(1) == "bash" and nxt.group(1) == "text" and not text[m.end() : nxt.start()].strip():
                line = text.count("\n", 0, m.start()) + 1
                slow = [pytest.mark.slow] if "demo" in m.group(2) else []  # about 20 s on 2 cores, more under load
                cases.append(
                    pytest.param(page, m.group(2), nxt.group(2), id=f"{page.relative_to(DOCS)}:{line}", marks=slow)
                )
    return cases


@pytest.mark.parametrize(("page", "code", "expected"), _shown_commands())
def test_command_line_example_prints_what_is_shown(page, code, expected, tmp_path):
    """The output a page shows after a command is what the command prints now, within the tolerances above (each
    decimal otherwise within one unit of its last digit, tests/shown.py)."""
    printed = []
    for argv in _commands(code):
        command = [sys.executable, "-m", "hybrid_attention.apps", *argv[1:]]
        r = subprocess.run(command, cwd=tmp_path, capture_output=True, text=True, timeout=1800)
        assert r.returncode == 0, r.stderr[-2000:]
        printed.append(r.stdout)
    shown = "".join(printed)
    if expected.lstrip().startswith("|"):  # a table shown: the same table of what it prints, times aside
        header = expected.lstrip().splitlines()[0]
        lines = shown.splitlines()
        start = lines.index(header) if header in lines else 0
        table = [x for x in itertools.takewhile(lambda x: x.startswith("|"), lines[start:])]
        shown = "\n".join(_TIME.sub("| - |", x) for x in table)
        expected = "\n".join(_TIME.sub("| - |", x) for x in expected.strip().splitlines())
    tolerances = {"val_loss": TRAINING, **DEMO_TOLERANCES}
    problems = mismatches(shown, expected, tolerances)
    assert not problems, f"{page.name}: the output shown is stale ({problems}); it prints now:\n{shown}"


def test_every_documented_install_keeps_the_cpu_torch():
    """A ``pip install`` of this package (any extra) in README.md or docs/ pins the CPU torch the project's machines
    carry, or follows a line of its block that installs torch first: an unpinned install in a fresh environment
    resolves PyTorch's CUDA build (``.[docs]`` pulled 5.7 GB)."""
    installs = re.compile(r"pip install[^`\n]*")
    bad = []
    for page in [REPO / "README.md", *DOCS.rglob("*.md")]:
        lines = page.read_text().splitlines()
        for i, line in enumerate(lines):
            for cmd in installs.findall(line):
                ours = re.search(r"-e\s+\S*\.|hybrid-attention\[|\s\.(\s|$)", cmd)
                torch_first = i > 0 and "pip install torch" in lines[i - 1]
                if ours and "torch==2.13.0" not in cmd and not torch_first:
                    bad.append(f"{page.relative_to(REPO)}:{i + 1}: {cmd}")
    assert not bad, "installs without the CPU torch pin:\n" + "\n".join(bad)


def test_every_documented_page_has_code_that_runs():
    assert len(_cases("python")) >= 30, "the guides lost their examples"


def test_cli_reference_covers_the_parser():
    from hybrid_attention.apps.cli import COMMANDS, build_parser

    pytest.importorskip("mkdocs", reason="the docs extra is not installed: pip install -e '.[docs]'")
    text = _load("hooks").cli_reference()
    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    for name, subparser in sub.choices.items():
        assert f"## `hybrid-attention {name}` {{#{name}}}" in text
        for action in subparser._actions:
            for option in action.option_strings:
                if option not in ("-h", "--help"):
                    assert f"`{option}" in text, f"{name} {option} missing from the CLI reference"
    assert set(sub.choices) == set(COMMANDS)
    assert "<!-- cli-reference -->" in (DOCS / "cli.md").read_text()


def _documented() -> dict[str, bool]:
    """``{module: members rendered}`` of every ``::: module`` of the API pages."""
    found = {}
    for page in sorted((DOCS / "api").glob("*.md")):
        text = page.read_text()
        for m in re.finditer(r"^::: (\S+)\n((?:[ \t]+\S.*\n)*)", text, flags=re.M):
            found[m.group(1)] = "members: false" not in m.group(2)
    return found


def test_api_reference_covers_every_module():
    """A module that is new, moved or renamed shows up here (a removed one breaks the strict build)."""
    pytest.importorskip("mkdocs", reason="the docs extra is not installed: pip install -e '.[docs]'")
    hooks = _load("hooks")
    modules = hooks.api_modules()
    documented = _documented()

    def covered(module: str) -> bool:
        parts = module.split(".")
        parents = [".".join(parts[:i]) for i in range(2, len(parts))]  # a package's page renders its API
        return module in documented or any(documented.get(p, False) for p in parents)

    cli = [m for m in modules if m.endswith(".command")]  # subcommands: the generated CLI reference
    missing = [m for m in modules if not covered(m) and m not in cli and m != "hybrid_attention"]
    assert not missing, f"modules missing from docs/api/*.md: {missing}"
    assert "hybrid_attention.backends.registry" in modules and "hybrid_attention.apps.cli" in modules


def _build(site: Path) -> subprocess.CompletedProcess:
    env = dict(os.environ, NO_MKDOCS_2_WARNING="1")
    return subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-f", str(REPO / "mkdocs.yml"), "-d", str(site)],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )


def test_site_builds_strict(tmp_path):
    pytest.importorskip("mkdocs", reason="the docs extra is not installed: pip install -e '.[docs]'")
    pytest.importorskip("mkdocstrings_handlers.python", reason="pip install -e '.[docs]'")
    site = tmp_path / "site"
    result = _build(site)
    assert result.returncode == 0, result.stdout + result.stderr
    for page in ("index.html", "cli/index.html", "samplers/index.html", "api/core/index.html", "results/index.html"):
        assert (site / page).is_file(), page
    cli = (site / "cli" / "index.html").read_text()
    assert "--block-size" in cli and "--sampler-option" in cli  # generated from the parser
    api = (site / "api" / "core" / "index.html").read_text()
    assert "hybrid_attention.exact.marginals" in api  # rendered from the docstrings


@pytest.mark.slow
def test_site_renders_in_chromium(tmp_path):
    check_site = _load("check_site")
    browser = check_site.find_chromium()
    if browser is None:
        pytest.skip("no Chromium installed (apt-get install chromium); the headless rendering check needs it")
    pytest.importorskip("mkdocs", reason="pip install -e '.[docs]'")
    result = _build(tmp_path / "site")
    assert result.returncode == 0, result.stdout + result.stderr
    problems = check_site.check(tmp_path / "site", tmp_path / "shots", browser=browser)
    assert not problems, "\n".join(problems)
    assert sorted(p.name for p in (tmp_path / "shots").glob("*.png"))
    shutil.rmtree(tmp_path / "site")
