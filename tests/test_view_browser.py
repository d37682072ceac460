"""The live job view in a real browser: Debian's headless chromium, driven by selenium through
Debian's chromium-driver, opens the page of a streaming job running on LocalEngine, shows the
DAG's vertices (in the tables and the picture) and numbers that change while the job runs.
`.ci/run` installs chromium, so CI never skips this test."""

from __future__ import annotations

import contextlib
import shutil
from collections.abc import Iterator

import pytest
from selenium import webdriver
from selenium.webdriver.support.wait import WebDriverWait
from test_processors_examples import load

from jetspark.core import JobCancelledError, LocalEngine
from jetspark.core.view import JobView

CHROMIUM = shutil.which("chromium")
CHROMEDRIVER = shutil.which("chromedriver")
WAIT_SECONDS = 60.0
"""How long a step may wait for the page (a generous bound, never a speed claim)."""
FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--window-size=1400,1000",
)

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(
        CHROMIUM is None or CHROMEDRIVER is None,
        reason="Debian's chromium and chromium-driver are not installed "
        "(.ci/run installs them: apt-get install chromium chromium-driver)",
    ),
]


@pytest.fixture
def browser(tmp_path) -> Iterator[webdriver.Chrome]:
    """Headless chromium with a fresh profile, driven by Debian's chromedriver (selenium
    downloads nothing: both paths are given)."""
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in (*FLAGS, f"--user-data-dir={tmp_path / 'profile'}"):
        options.add_argument(flag)
    driver = webdriver.Chrome(
        options=options, service=webdriver.ChromeService(executable_path=CHROMEDRIVER)
    )
    try:
        yield driver
    finally:
        driver.quit()


def text_of(browser: webdriver.Chrome, selector: str) -> str | None:
    """The text of the first element `selector` matches, read in one step (the page replaces
    its rows every second), or None."""
    return browser.execute_script(
        "const e = document.querySelector(arguments[0]); return e && e.textContent", selector
    )


def test_the_page_shows_the_vertices_and_counts_that_change_while_the_job_runs(browser):
    live_view = load("live_view")
    dag = live_view.build_dag(rate=500)
    names = [vertex.name for vertex in dag.vertices()]
    with JobView.serve() as view:
        job = LocalEngine(members=2, job_view=view).new_job(dag, live_view.JOB_CONFIG)
        try:
            browser.get(view.url)
            wait = WebDriverWait(browser, WAIT_SECONDS, poll_frequency=0.1)
            wait.until(lambda b: text_of(b, "#job-status") == "running")
            assert text_of(browser, "#job-name") == "page-views"
            assert text_of(browser, "#job-mode") == "local"
            shown = wait.until(
                lambda b: b.execute_script(
                    "return [...document.querySelectorAll('#vertices tbody tr')]"
                    ".map(row => row.dataset.key)"
                )
            )
            assert shown == names
            pictured = wait.until(
                lambda b: b.execute_script(
                    "return [...document.querySelectorAll('#dag g.node title')]"
                    ".map(title => title.textContent)"
                )
            )
            assert sorted(pictured) == sorted(names)
            emitted = '#vertices tr[data-key="page-views"] td[data-figure="emitted"]'
            first = wait.until(lambda b: _positive(text_of(b, emitted)))
            later = wait.until(lambda b: (n := _positive(text_of(b, emitted))) != first and n)
            assert later > first
            received = '#vertices tr[data-key="sink"] td[data-figure="received"]'
            assert wait.until(lambda b: _positive(text_of(b, received)))
        finally:
            job.cancel()
            with contextlib.suppress(JobCancelledError):
                job.join()


def _positive(count: str | None) -> int | None:
    """A count the page shows ("1,234"), or None while it shows none or zero."""
    if count is None or not count.replace(",", "").isdigit():
        return None
    return int(count.replace(",", "")) or None
