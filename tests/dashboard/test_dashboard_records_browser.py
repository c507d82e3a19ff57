"""The dashboard in Chromium names a run's operator with the field of the records it reads (issue 24,
item 7: ``mean(amount)``, from the run's stored configuration) in the live header and the runs table,
and its form refuses a split-key switch for a non-mergeable operator with the reason, sending nothing.

Missing Chromium or Playwright: the module is skipped, or fails with the reason when ``CI`` is set.
"""

from __future__ import annotations

import pytest

from tests.browser_fixtures import sync_playwright_or_skip
from tests.dashboard.test_dashboard_browser import VIEWPORT, Served, browser  # noqa: F401 - browser: the fixture

pytestmark = [pytest.mark.browser, pytest.mark.timeout(300)]

sync_playwright, expect = sync_playwright_or_skip()

from skewlab.dashboard.app import create_app  # noqa: E402
from skewlab.engine.algorithms import registry  # noqa: E402
from skewlab.storage import connect  # noqa: E402
from tests.dashboard.test_dashboard import record  # noqa: E402


def test_operator_and_value_field_named_and_split_switch_refused(browser, tmp_path):  # noqa: F811
    db = f"sqlite:///{tmp_path}/db.sqlite"
    store = connect(db)
    params = registry.validate_params("mixed", {})
    older = store.create_run("mixed", params, n_workers=4, config={
        "interval": 1.0, "source": "file", "operator": "mean", "value_field": "amount", "operator_mergeable": True})
    newest = store.create_run("mixed", params, n_workers=4, config={
        "interval": 1.0, "source": "kafka", "operator": "my_ops:Median", "value_field": "order.latency_ms",
        "operator_mergeable": False})
    for rid in (older, newest):
        for i in range(3):
            record(store, rid, i)
    served = Served(create_app(db))
    page = browser.new_page(viewport=VIEWPORT)
    page.set_default_timeout(60_000)
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    try:
        page.goto(served.url)
        expect(page.locator("#run-operator")).to_have_text("operator my_ops:Median(order.latency_ms)")
        page.click("#algo-select")
        page.get_by_role("option", name="pkg", exact=True).click()
        expect(page.locator("#apply-btn")).to_have_text("Switch to pkg")  # the form now holds pkg's fields
        page.click("#apply-btn")
        msg = page.locator("#control-msg")
        expect(msg).to_contain_text("refused")
        expect(msg).to_contain_text("pkg splits keys over workers, and operator my_ops:Median cannot merge")
        assert store.recent_commands(10) == [], "a refused switch must send nothing"
        page.click("text=Runs & comparison")
        table = page.locator("#runs-table")
        expect(table).to_contain_text("mean(amount)")
        expect(table).to_contain_text("my_ops:Median(order.latency_ms)")
        assert not errors, errors
    finally:
        page.close()
        served.close()
        store.close()
