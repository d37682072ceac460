"""The documentation site (mkdocs.yml, docs/): `mkdocs build --strict` builds it with an API
reference entry for every public name, fails on a broken link or reference, and the built site
works in Debian's headless chromium: the home page's quickstart, the API reference, the search.
Needs the `docs` extra (`pip install -e '.[docs]'`, as `.ci/run` does)."""

from __future__ import annotations

import contextlib
import functools
import importlib
import importlib.util
import os
import shutil
import subprocess
import sys
import threading
import zlib
from collections.abc import Iterator
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from chromium import WAIT_SECONDS, needs_chromium
from selenium.webdriver.common.by import By
from selenium.webdriver.support.wait import WebDriverWait

ROOT = Path(__file__).resolve().parent.parent

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("mkdocs") is None,
    reason="mkdocs is not installed: the docs extra is missing (pip install -e '.[docs]')",
)

DOCUMENTED_MODULES = (
    "jetspark.core",
    "jetspark.core.spark",
    "jetspark.core.pipeline",
    "jetspark.core.test_support",
    "jetspark.edges",
    "jetspark.partitioning",
    "jetspark.processors",
    "jetspark.processors.aggregate",
    "jetspark.processors.windowing",
)
"""The modules whose every public name the API reference documents."""


def build(config: Path, site: Path) -> subprocess.CompletedProcess[str]:
    """`mkdocs build --strict` of `config` into `site`."""
    return subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-f", str(config), "-d", str(site)],
        capture_output=True,
        text=True,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
        timeout=300,
    )


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The site built from the repository, once for this module's tests."""
    site = tmp_path_factory.mktemp("site")
    result = build(ROOT / "mkdocs.yml", site)
    assert result.returncode == 0, f"mkdocs build --strict failed:\n{result.stderr}"
    return site


def inventory(site: Path) -> set[str]:
    """The identifiers the site documents (mkdocstrings' objects.inv, Sphinx's format 2: four
    header lines, then zlib-compressed lines `name domain:role priority uri display`)."""
    data = (site / "objects.inv").read_bytes()
    body = data.split(b"\n", 4)[4]
    return {line.split(" ", 1)[0] for line in zlib.decompress(body).decode().splitlines()}


def public_names(module_name: str) -> list[str]:
    """`__all__`, or for a module without one the names it defines without a leading `_`."""
    module = importlib.import_module(module_name)
    if hasattr(module, "__all__"):
        return list(module.__all__)
    return [
        name
        for name, value in vars(module).items()
        if not name.startswith("_") and getattr(value, "__module__", None) == module_name
    ]


def test_the_api_reference_documents_every_public_name(site):
    documented = inventory(site)
    missing = [
        f"{module}.{name}"
        for module in DOCUMENTED_MODULES
        for name in public_names(module)
        if f"{module}.{name}" not in documented
    ]
    assert missing == []
    assert "jetspark.core.spark.SparkEngine.new_job" in documented


INHERITED_STAGE_METHODS = {
    "BatchStage": ("map", "filter", "flat_map", "drain_to", "hash_join", "add_timestamps"),
    "StreamStage": ("map", "merge", "drain_to", "hash_join_builder", "set_name"),
    "BatchStageWithKey": ("map_stateful", "map_using_service", "distinct"),
    "StreamStageWithKey": ("map_stateful", "filter_using_context", "rolling_aggregate"),
    "StageWithWindow": ("aggregate2", "aggregate_builder"),
    "StageWithKeyAndWindow": ("aggregate3", "aggregate_builder"),
}
"""Methods each stage kind has from a base class, which its API reference entry lists too."""


def test_each_stage_kind_lists_the_methods_it_inherits(site):
    documented = inventory(site)
    missing = [
        f"jetspark.core.pipeline.{kind}.{method}"
        for kind, methods in INHERITED_STAGE_METHODS.items()
        for method in methods
        if f"jetspark.core.pipeline.{kind}.{method}" not in documented
    ]
    assert missing == []


def test_a_broken_link_or_reference_fails_the_build(tmp_path):
    shutil.copy(ROOT / "mkdocs.yml", tmp_path / "mkdocs.yml")
    shutil.copytree(ROOT / "docs", tmp_path / "docs")
    index = tmp_path / "docs" / "index.md"
    index.write_text(
        index.read_text()
        + "\n[gone](no_such_page.md) and [`DAG.gone`][jetspark.core.DAG.no_such_method]\n"
    )
    result = build(tmp_path / "mkdocs.yml", tmp_path / "site")
    assert result.returncode != 0
    assert "no_such_page.md" in result.stderr
    assert "jetspark.core.DAG.no_such_method" in result.stderr


class _QuietHandler(SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        pass


@contextlib.contextmanager
def served(directory: Path) -> Iterator[str]:
    """`directory` served over HTTP on 127.0.0.1 and a free port; yields its base URL."""
    handler = functools.partial(_QuietHandler, directory=str(directory))
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, name="docs-site", daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


@pytest.fixture(scope="module")
def site_url(site: Path) -> Iterator[str]:
    """The built site served on 127.0.0.1 for this module's browser tests."""
    with served(site) as url:
        yield url


class TestTheSiteInChromium:
    pytestmark = needs_chromium

    def test_the_quickstart_shows_both_commands_and_leads_to_the_main_job(self, browser, site_url):
        browser.get(site_url)
        wait = WebDriverWait(browser, WAIT_SECONDS, poll_frequency=0.1)
        commands = wait.until(
            lambda b: b.execute_script(
                "const h = document.getElementById('quickstart');"
                "let e = h && h.nextElementSibling;"
                "while (e && !e.querySelector('pre')) e = e.nextElementSibling;"
                "return e && e.textContent"
            )
        )
        assert "jetspark tfidf" in commands
        assert "python -m pytest" in commands
        browser.find_element(By.LINK_TEXT, "the main job").click()
        assert "TF-IDF" in wait.until(lambda b: text_of(b, "article h1, article h2"))

    def test_the_api_reference_leads_to_spark_engine_and_its_methods(self, browser, site_url):
        browser.get(site_url)
        wait = WebDriverWait(browser, WAIT_SECONDS, poll_frequency=0.1)
        browser.find_element(By.CSS_SELECTOR, "article a[href='api/core/']").click()
        wait.until(lambda b: text_of(b, "article h1") == "jetspark.core")
        browser.find_element(By.CSS_SELECTOR, "article a[href='../spark/']").click()
        engine = wait.until(lambda b: text_of(b, "[id='jetspark.core.spark.SparkEngine']"))
        assert "SparkEngine" in engine
        assert "new_job" in text_of(browser, "[id='jetspark.core.spark.SparkEngine.new_job']")

    def test_searching_pipeline_finds_the_pipeline_chapter(self, browser, site_url):
        browser.get(site_url)
        wait = WebDriverWait(browser, WAIT_SECONDS, poll_frequency=0.1)
        box = wait.until(lambda b: b.find_element(By.CSS_SELECTOR, "input.md-search__input"))
        box.click()
        box.send_keys("Pipeline")
        found = wait.until(
            lambda b: b.execute_script(
                "return [...document.querySelectorAll('.md-search-result__item > a')]"
                ".map(a => a.getAttribute('href'))"
            )
        )
        assert any("pipeline/" in href for href in found), found


def text_of(browser, selector: str) -> str | None:
    """The trimmed text of the first element `selector` matches, without the heading's
    permalink sign, or None."""
    return browser.execute_script(
        "const e = document.querySelector(arguments[0]); if (!e) return null;"
        "const copy = e.cloneNode(true);"
        "copy.querySelectorAll('.headerlink').forEach(link => link.remove());"
        "return copy.textContent.trim()",
        selector,
    )
