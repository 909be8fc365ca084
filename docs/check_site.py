"""Look at the documentation site as a reader would: open pages of the built site in headless Chromium.

Usage (from the repository root, after ``pip install -e ".[docs]"`` and ``apt-get install chromium``)::

    python docs/check_site.py                      # builds the site into a temporary folder; screenshots: build/site-screenshots/
    python docs/check_site.py site --out shots     # checks an existing build, screenshots into shots/

For the home page, the sampler guide and one API page it serves the site on 127.0.0.1 (a local HTTP server, as
``mkdocs serve`` would), loads each page in headless Chromium and checks what a reader would see: the page title
and its section headings, its code blocks, its images (every one requested and served, a real PNG/SVG), the API
page's rendered objects, no message on the browser console, no request that failed and no resource from outside
the site. It saves a screenshot of each page (``<name>.png``) and exits with status 1 listing the problems, if any.
``tests/test_docs.py`` runs it (marked ``slow``; skipped when no Chromium is installed).
"""

from __future__ import annotations

import argparse
import functools
import html.parser
import http.server
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
BROWSERS = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
CONSOLE = re.compile(r":CONSOLE[^\]]*\] (.*)$")


@dataclass(frozen=True)
class PageCheck:
    """What a page must show: its URL path in the site and the least a reader should find on it."""

    name: str
    path: str
    min_headings: int  # h2 sections of the article
    min_code: int  # highlighted code blocks
    min_images: int = 0
    min_objects: int = 0  # mkdocstrings objects (API pages)


PAGES = (
    PageCheck("home", "", min_headings=2, min_code=1),
    PageCheck("samplers", "samplers/", min_headings=5, min_code=5, min_images=1),
    PageCheck("api-core", "api/core/", min_headings=3, min_code=1, min_objects=10),
)


def find_chromium() -> str | None:
    """The path of a Chromium (or Chrome) executable, or None."""
    return next((path for name in BROWSERS if (path := shutil.which(name))), None)


class _Dom(html.parser.HTMLParser):
    """Counts what matters in the rendered page (inside ``<article>``, the page body) and lists external resources."""

    def __init__(self) -> None:
        super().__init__()
        self.depth = 0  # > 0 inside <article>
        self.h1: list[str] = []
        self.h2 = 0
        self.code = 0
        self.images: list[str] = []
        self.objects = 0
        self.external: list[str] = []
        self._in_h1 = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        for key in ("src", "href"):
            url = a.get(key) or ""
            if (
                tag in ("script", "img", "link")
                and re.match(r"(https?:)?//", url)
                and "127.0.0.1" not in url
            ):
                if tag != "link" or a.get("rel") in (
                    "stylesheet",
                    "preload",
                    "icon",
                    "preconnect",
                ):
                    self.external.append(url)
        if tag == "article":
            self.depth += 1
        if not self.depth:
            return
        classes = (a.get("class") or "").split()
        if tag == "h1":
            self._in_h1 = True
            self.h1.append("")
        elif tag == "h2":
            self.h2 += 1
        elif tag == "pre":
            self.code += 1
        elif tag == "img":
            self.images.append(a.get("src") or "")
        elif tag == "div" and "doc-object" in classes:
            self.objects += 1

    def handle_endtag(self, tag: str) -> None:
        if tag == "article":
            self.depth -= 1
        elif tag == "h1":
            self._in_h1 = False

    def handle_data(self, data: str) -> None:
        if self._in_h1 and self.h1:
            self.h1[-1] += data.strip()


class _Handler(http.server.SimpleHTTPRequestHandler):
    """Serves the site and records every request with its status (images, scripts, the search index...)."""

    def log_request(self, code="-", size="-") -> None:
        self.server.requests.append(
            (self.path.split("?")[0], int(code) if str(code).isdigit() else 0)
        )

    def log_message(self, format, *args) -> None:  # quiet
        pass


def _serve(site: Path) -> http.server.ThreadingHTTPServer:
    server = http.server.ThreadingHTTPServer(
        ("127.0.0.1", 0), functools.partial(_Handler, directory=str(site))
    )
    server.requests = []
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def _chromium(
    browser: str, url: str, profile: Path, *args: str
) -> subprocess.CompletedProcess:
    command = [
        browser,
        "--headless",
        "--no-sandbox",  # root in a container has no user namespace to sandbox with
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--no-first-run",
        "--hide-scrollbars",
        f"--user-data-dir={profile}",
        "--enable-logging=stderr",
        "--v=0",
        "--virtual-time-budget=8000",  # let the page's scripts run (navigation, search, highlighting)
        *args,
        url,
    ]
    return subprocess.run(command, capture_output=True, text=True, timeout=120)


def _image_ok(path: Path) -> bool:
    head = path.read_bytes()[:16] if path.is_file() else b""
    return head.startswith(b"\x89PNG\r\n\x1a\n") or head.lstrip().startswith(
        (b"<svg", b"<?xml")
    )


def check_page(
    browser: str, site: Path, base: str, page: PageCheck, shots: Path, server
) -> list[str]:
    """The problems a reader would meet on one page (an empty list when it renders as it should)."""
    url = base + page.path
    problems = []
    with tempfile.TemporaryDirectory() as profile:
        first = len(server.requests)
        dump = _chromium(browser, url, Path(profile), "--dump-dom")
        requests = server.requests[first:]
        shot = shots / f"{page.name}.png"
        _chromium(
            browser,
            url,
            Path(profile),
            f"--screenshot={shot}",
            "--window-size=1280,2000",
        )
    dom = _Dom()
    dom.feed(dump.stdout)
    where = f"{page.name} ({page.path or '/'})"
    if dump.returncode != 0 or not dump.stdout.strip():
        return [f"{where}: Chromium could not load the page: {dump.stderr[-500:]}"]
    if len(dom.h1) != 1 or not dom.h1[0]:
        problems.append(f"{where}: expected one non-empty title (h1), found {dom.h1}")
    checks = [
        ("section headings (h2)", dom.h2, page.min_headings),
        ("code blocks", dom.code, page.min_code),
        ("images", len(dom.images), page.min_images),
        ("API objects", dom.objects, page.min_objects),
    ]
    problems += [
        f"{where}: {found} {what}, expected at least {least}"
        for what, found, least in checks
        if found < least
    ]
    served = {path: status for path, status in requests}
    for src in dom.images:
        target = (site / page.path / src).resolve()
        request = (
            "/" + target.relative_to(site.resolve()).as_posix()
            if target.is_relative_to(site.resolve())
            else src
        )
        if served.get(request) != 200 or not _image_ok(target):
            problems.append(
                f"{where}: image {src} not shown (request {request}: {served.get(request, 'never made')})"
            )
    problems += [
        f"{where}: request {path} failed with {status}"
        for path, status in requests
        if status >= 400
    ]
    problems += [
        f"{where}: console: {m.group(1)}"
        for line in dump.stderr.splitlines()
        if (m := CONSOLE.search(line))
    ]
    problems += [
        f"{where}: loads {url} from outside the site (the docs must work offline)"
        for url in dom.external
    ]
    if not shot.is_file() or not _image_ok(shot):
        problems.append(f"{where}: no screenshot written")
    return problems


def check(
    site: Path, shots: Path, *, browser: str | None = None, pages=PAGES
) -> list[str]:
    """Check ``pages`` of the built ``site`` in headless Chromium; screenshots go to ``shots``. Returns problems."""
    browser = browser or find_chromium()
    if browser is None:
        raise FileNotFoundError(
            "no Chromium found (apt-get install chromium); tried " + ", ".join(BROWSERS)
        )
    shots.mkdir(parents=True, exist_ok=True)
    server = _serve(site)
    try:
        base = f"http://127.0.0.1:{server.server_address[1]}/"
        return [
            p
            for page in pages
            for p in check_page(browser, site, base, page, shots, server)
        ]
    finally:
        server.shutdown()
        server.server_close()


def build(site: Path) -> None:
    """``mkdocs build --strict`` of the repository's site into ``site``."""
    command = [
        sys.executable,
        "-m",
        "mkdocs",
        "build",
        "--strict",
        "-q",
        "-f",
        str(REPO / "mkdocs.yml"),
        "-d",
        str(site),
    ]
    subprocess.run(
        command, cwd=REPO, check=True, env=dict(os.environ, NO_MKDOCS_2_WARNING="1")
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "site",
        nargs="?",
        type=Path,
        help="a built site (default: build one into a temporary folder)",
    )
    parser.add_argument(
        "--out",
        type=Path,
        default=REPO / "build" / "site-screenshots",
        help="where the screenshots go",
    )
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        site = args.site
        if site is None:
            site = Path(tmp) / "site"
            build(site)
        problems = check(site, args.out)
    for name in sorted(p.name for p in args.out.glob("*.png")):
        print(f"screenshot: {args.out / name}")
    for problem in problems:
        print(f"problem: {problem}")
    print(
        "the site renders as it should"
        if not problems
        else f"{len(problems)} problem(s)"
    )
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
