"""The docs site as a reader gets it: built by mkdocs, served over HTTP, opened in headless Chromium
(Debian's package, from scripts/system-deps)."""

from __future__ import annotations

import functools
import json
import shutil
import subprocess
import sys
import threading
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from conftest import REPO

pytestmark = pytest.mark.integration


class QuietHandler(SimpleHTTPRequestHandler):
    def log_message(self, format, *args):  # noqa: A002 (http.server's name)
        pass


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    """The site built once into a temporary directory and served on a free loopback port: (the
    directory, its base URL)."""
    built = tmp_path_factory.mktemp("docs") / "site"
    subprocess.run(
        [str(Path(sys.executable).parent / "mkdocs"), "build", "--strict", "--quiet", "-d", str(built)],
        cwd=REPO,
        check=True,
        timeout=120,
        env={"PATH": "/usr/bin:/bin", "NO_MKDOCS_2_WARNING": "1"},
    )
    server = ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(QuietHandler, directory=str(built)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield built, f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()


def chromium(tmp_path: Path, *args: str) -> str:
    browser = shutil.which("chromium")
    assert browser, "chromium is not installed: run scripts/system-deps"
    command = [
        browser,
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--hide-scrollbars",
        f"--user-data-dir={tmp_path / 'profile'}",
        *args,
    ]
    return subprocess.run(command, capture_output=True, text=True, check=True, timeout=60).stdout


@pytest.mark.parametrize("page", ["", "reference/manifest/"], ids=["home", "manifest-reference"])
def test_a_reader_gets_the_navigation_and_the_search_box(site, tmp_path, page):
    built, base = site
    shot = tmp_path / f"{page.strip('/').replace('/', '-') or 'home'}.png"
    chromium(tmp_path, f"--screenshot={shot}", "--window-size=1280,900", base + page)
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size > 10_000
    dom = chromium(tmp_path, "--dump-dom", base + page)
    assert 'class="md-nav md-nav--primary"' in dom
    assert 'class="md-search__input"' in dom
    for title in ("Getting started", "What tftrain guarantees", "Coming from Azure ML", "Command line"):
        assert title in dom
    if page:
        assert "<h1" in dom and "Manifest reference" in dom and "ComputeSpec" in dom
    index = json.loads((built / "search" / "search_index.json").read_text())
    assert any(doc["location"].startswith("reference/cli/") for doc in index["docs"])
