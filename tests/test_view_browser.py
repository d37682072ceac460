"""The live job view in a real browser: Debian's headless chromium, driven by selenium through
Debian's chromium-driver, opens the page of a streaming job running on LocalEngine, shows the
DAG's vertices (in the tables and the picture) and numbers that change while the job runs.
`.ci/run` installs chromium, so CI never skips this test."""

from __future__ import annotations

import contextlib

from chromium import WAIT_SECONDS, needs_chromium
from selenium import webdriver
from selenium.webdriver.support.wait import WebDriverWait
from test_processors_examples import load

from jetspark.core import JobCancelledError, LocalEngine
from jetspark.core.view import JobView

pytestmark = needs_chromium


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
