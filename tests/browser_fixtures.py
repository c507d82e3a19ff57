"""What the browser tests share: Debian's Chromium driven by Playwright, and the module-level check
that both are there (skipped without them, failed with the reason when ``CI`` is set).

Install with ``apt-get install chromium`` and ``pip install playwright`` (no ``playwright install``).
"""

from __future__ import annotations

import os

import pytest

CHROMIUM = "/usr/bin/chromium"
LAUNCH_ARGS = ["--no-sandbox", "--headless=new", "--disable-gpu", "--disable-background-networking",
               "--disable-component-update", "--disable-sync", "--no-first-run"]


def require(what: str, ok: bool) -> None:
    """Skip the calling test module (fail it under ``CI``) when ``ok`` is false, naming ``what`` is missing."""
    if not ok:
        msg = f"dashboard browser tests need {what}"
        if os.environ.get("CI"):
            pytest.fail(msg, pytrace=False)
        pytest.skip(msg, allow_module_level=True)


def sync_playwright_or_skip():
    """Playwright's ``(sync_playwright, expect)``, after checking that Playwright and Chromium are there."""
    try:
        from playwright.sync_api import expect, sync_playwright
    except ImportError:  # pragma: no cover - depends on the machine
        sync_playwright = expect = None
    require("Playwright ('pip install playwright')", sync_playwright is not None)
    require(f"Chromium at {CHROMIUM} ('apt-get install chromium')", os.access(CHROMIUM, os.X_OK))
    return sync_playwright, expect
