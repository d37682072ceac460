"""Debian's headless chromium, driven by selenium through Debian's chromium-driver, for the
browser tests (the `browser` fixture in conftest.py). `.ci/run` installs both, so CI never
skips them."""

from __future__ import annotations

import contextlib
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from selenium import webdriver

CHROMIUM = shutil.which("chromium")
CHROMEDRIVER = shutil.which("chromedriver")
WAIT_SECONDS = 60.0
"""How long a step may wait for a page (a generous bound, never a speed claim)."""
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

needs_chromium = [
    pytest.mark.browser,
    pytest.mark.skipif(
        CHROMIUM is None or CHROMEDRIVER is None,
        reason="Debian's chromium and chromium-driver are not installed "
        "(.ci/run installs them: apt-get install chromium chromium-driver)",
    ),
]
"""The marks of a test that drives chromium."""


@contextlib.contextmanager
def headless_chromium(profile: Path) -> Iterator[webdriver.Chrome]:
    """Headless chromium with a fresh profile in `profile`, driven by Debian's chromedriver
    (selenium downloads nothing: both paths are given)."""
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in (*FLAGS, f"--user-data-dir={profile}"):
        options.add_argument(flag)
    driver = webdriver.Chrome(
        options=options, service=webdriver.ChromeService(executable_path=CHROMEDRIVER)
    )
    try:
        yield driver
    finally:
        driver.quit()
