"""What the dashboard says about stored runs, in a real browser (Playwright driving Debian's
/usr/bin/chromium; issue 26 items 8–12).  No engine: the runs are written through the store as the
engine and ``skewlab simulate --db`` write them, so every number on the page is known in advance.

Missing Chromium or Playwright: skipped, or failed with the reason when ``CI`` is set (as
``test_dashboard_browser.py``).
"""

from __future__ import annotations

import contextlib
import logging
import re
import threading

import pytest

from tests.browser_fixtures import CHROMIUM, LAUNCH_ARGS, sync_playwright_or_skip

pytestmark = [pytest.mark.browser, pytest.mark.timeout(300)]

sync_playwright, expect = sync_playwright_or_skip()

from skewlab.dashboard.app import create_app  # noqa: E402
from skewlab.storage import IntervalRecord, MigrationRow, connect  # noqa: E402

SIM, LIVE = 1, 2  # run ids


def _interval(i: int, workers: int, tuples: int = 1000, amax: int | None = 200, params=None, **metrics):
    loads = [tuples / workers] * workers
    return IntervalRecord.from_parts(i, i, {
        "tuples": tuples, "n_workers": workers, "imbalance": 0.1 if tuples else 0.0,
        "theta_max_observed": 0.05 if tuples else 0.0, "replication": 1.0, "routing_table_size": 10 + i,
        "migration_cost": 0.0, "throughput": 5000.0, "batch_latency_ms": 200.0, **metrics},
        workers=[{"worker": w, "tuples": int(v), "cost": float(v)} for w, v in enumerate(loads)],
        routing={"entries": 10 + i, "amax": amax}, params=params)


@pytest.fixture(scope="module")
def db(tmp_path_factory):
    """Run 1: a finished ``simulate`` run (routing throughput).  Run 2: a running engine run that
    started with 4 workers and runs on 6 since interval 5, whose first batch (0) had no tuples."""
    url = f"sqlite:///{tmp_path_factory.mktemp('truth')}/db.sqlite"
    store = connect(url)
    sim = store.create_run("hash", {}, n_workers=4, config={"runtime": "local"}, name="sim")
    for i in range(10):
        store.record_interval(sim, _interval(i, 4, throughput=2_000_000.0))
    store.finish_run(sim)
    live = store.create_run("mixed", {"theta_max": 0.08, "amax": 200}, n_workers=4, name="live",
                            config={"interval": 1.0, "max_workers": 16})
    assert (sim, live) == (SIM, LIVE)
    mixed = {"theta_max": 0.08, "amax": 200}
    for i in range(12):
        # interval 11 is written after a switch to dchoices took effect (from interval 12): the routing
        # row's Amax is the planner's at writing time (none), the interval's own settings are mixed's
        rec = _interval(i, 4 if i < 5 else 6, tuples=0 if i == 0 else 1000, amax=None if i == 11 else 200,
                        params=mixed, algorithm="mixed", migration_cost=0.25 if i == 8 else 0.0)
        if i == 10:  # a rebalance planned in interval 8 whose import completed in interval 10
            rec.migrations.append(MigrationRow(algorithm="mixed", keys_moved=5, state_moved=50.0, migration_cost=0.25,
                                               detail={"reason": "rebalance", "planned_interval": 8}))
        store.record_interval(live, rec)
    store.record_event(live, "algorithm", {"algorithm": "dchoices", "params": {}}, interval=12)
    store.close()
    return url


@pytest.fixture(scope="module")
def browser():
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=LAUNCH_ARGS)
        yield b
        b.close()


@contextlib.contextmanager
def _served(browser, url: str, figure: str):
    """A page of the dashboard on the database at ``url``, once ``figure`` has drawn its first trace."""
    from werkzeug.serving import make_server

    logging.getLogger("werkzeug").setLevel(logging.WARNING)
    srv = make_server("127.0.0.1", 0, create_app(url).server, threaded=True)
    thread = threading.Thread(target=srv.serve_forever, daemon=True)
    thread.start()
    pg = browser.new_page(viewport={"width": 1600, "height": 1000})
    try:
        pg.set_default_timeout(30_000)
        pg.goto(f"http://127.0.0.1:{srv.server_port}/")
        pg.wait_for_function(f"() => {{ const g = document.querySelector('#{figure} .js-plotly-plot');"
                             " return g && g.data && g.data.length && g.data[0].x.length > 0; }")
        yield pg
    finally:
        pg.close()
        srv.shutdown()
        thread.join(timeout=10)
        srv.server_close()


@pytest.fixture(scope="module")
def page(browser, db):
    with _served(browser, db, "fig-imbalance") as pg:
        yield pg


def _select(page, dropdown: str, label_start: str) -> None:
    page.click(dropdown)
    page.get_by_role("option", name=re.compile("^" + re.escape(label_start))).click()


RUN_BUTTONS = ("#workers-minus", "#workers-plus", "#workers-set", "#pause-btn", "#resume-btn", "#apply-btn")


def test_worker_box_refuses_in_the_range_it_shows(page):
    """Item 12: the box says [1, 16] (the run's --max-workers), and 0, −3, "x" are refused in that range."""
    expect(page.locator("#workers-range")).to_have_text("[1, 16]")
    expect(page.locator("#workers-input")).to_have_value("6")
    page.wait_for_timeout(2000)  # the first refresh has re-synced the box (it would overwrite the typed text)
    for bad in ("0", "-3", "x"):
        page.fill("#workers-input", bad)
        expect(page.locator("#workers-input")).to_have_value(bad)
        page.click("#workers-set")
        expect(page.locator("#control-msg")).to_contain_text("enter a worker count in [1, 16]")
        expect(page.locator("#control-msg")).to_contain_text(f"got '{bad}'" if bad == "x" else f"{bad} is out of range [1, 16]")
        expect(page.locator("#control-msg")).not_to_contain_text("1024")


def test_runs_table_and_comparison_say_what_they_show(page):
    """Item 12: the runs table shows the workers a run has now; the comparison never puts the engine's
    throughput and simulate's routing throughput under one label."""
    page.click("text=Runs & comparison")
    row = page.locator("#runs-table tr", has_text="live")
    expect(row).to_contain_text("6 (started with 4)")
    _select(page, "#compare-a", f"#{SIM} ")
    _select(page, "#compare-b", f"#{LIVE} ")
    table = page.locator("#compare-summary")
    routing = table.locator("tr", has_text="routing throughput, simulate")
    engine = table.locator("tr", has_text="engine throughput")
    expect(routing).to_contain_text("2,000,000")
    expect(routing.locator("td").nth(2)).to_have_text("—")
    expect(engine.locator("td").nth(1)).to_have_text("—")
    expect(engine.locator("td").nth(2)).to_have_text("5,000")
    page.locator(".tab", has_text=re.compile("^Live$")).click()


def test_controls_disabled_for_a_run_that_is_not_live(page):
    """Item 11: the finished run's controls are disabled and say why; the running run's are not."""
    for bid in RUN_BUTTONS[:-1]:
        expect(page.locator(bid)).to_be_enabled()
    page.get_by_role("checkbox", name="follow newest").uncheck()  # else the page returns to the newest run
    _select(page, "#run-select", f"#{SIM} ")
    expect(page.locator("#controls-note")).to_contain_text(f"run {SIM} is finished")
    for bid in RUN_BUTTONS:
        expect(page.locator(bid)).to_be_disabled()
    expect(page.locator("#workers-input")).to_be_disabled()
    _select(page, "#run-select", f"#{LIVE} ")
    expect(page.locator("#controls-note")).to_have_text("")
    expect(page.locator("#pause-btn")).to_be_enabled()


def _trace(page, fig: str, name: str) -> dict:
    return page.evaluate(f"""() => {{ const g = document.querySelector('#{fig} .js-plotly-plot');
        const t = g.data.find(t => t.name === {name!r}) || {{}}; return {{x: t.x, y: t.y}}; }}""")


def test_an_empty_batch_is_a_gap_not_perfect_balance(page):
    """Item 9: batch 0 of run 2 had no tuples: no imbalance point there (a gap), not 0."""
    names = page.evaluate("() => document.querySelector('#fig-imbalance .js-plotly-plot').data.map(t => t.name)")
    assert "imbalance" in names, names
    t = _trace(page, "fig-imbalance", "imbalance")
    assert t["x"][:3] == [0, 1, 2], t
    assert t["y"][0] is None and t["y"][1] == pytest.approx(0.1), t


def test_kpi_cards_show_the_interval_with_its_own_settings(page):
    """Item 8: interval 11 (mixed, Amax 200, θmax 0.08) is shown with its own settings although the run
    has switched to dchoices since; θ is not uppercased into Θ; the algorithm card is not cut."""
    expect(page.locator("#kpi-algorithm-value")).to_have_text("mixed · #11")
    expect(page.locator("#kpi-routing_table_size .kpi-value")).to_have_text("21 / 200")
    expect(page.locator("#kpi-theta_max_observed .kpi-value")).to_have_text("0.050 / 0.080")
    label = page.locator("#kpi-theta_max_observed .kpi-label").inner_text()
    assert "θmax" in label and "Θ" not in label, label
    cut = page.evaluate("() => { const e = document.querySelector('#kpi-algorithm-value');"
                        " return e.scrollWidth > e.clientWidth; }")
    assert not cut


def test_a_migration_is_numbered_by_the_interval_that_planned_it(page):
    """Item 10: the migration planned in interval 8 (the interval whose metric carries its cost, and the
    numbering of "applied at interval N") is listed under 8, imported at 10, with that cost."""
    row = page.locator("#migration-table tbody tr").first
    cells = row.locator("td")
    expect(cells.nth(0)).to_have_text("8")
    expect(cells.nth(1)).to_have_text("10")
    expect(cells.nth(6)).to_have_text("0.25")


@pytest.fixture(scope="module")
def moves_page(browser, tmp_path_factory):
    """The dashboard on a run recorded by the engine's driver step (tests/migration_run.py): interval 3
    rebalances while a switch to llfd arrives (in effect from interval 4, which rebalances too)."""
    from tests.migration_run import record_run

    url = f"sqlite:///{tmp_path_factory.mktemp('moves')}/db.sqlite"
    _, _, rows = record_run(url)
    with _served(browser, url, "fig-migrations") as pg:
        yield pg, rows


def test_one_move_one_interval_one_figure_on_a_recorded_run(moves_page):
    """Item 10: the command applied at interval 4 and interval 4's rebalance are one move, #4, with the
    state interval 4 moved and its figure (0.9406 under the hash-aligned base), in the card, the table and the migration figure;
    interval 3's rebalance, which left in the same export as the switch, stays #3 with its own."""
    page, rows = moves_page
    figure = f"{rows[4]['migration_cost']:.4g}"  # 0.9406
    expect(page.locator("#commands")).to_contain_text("applied at interval 4")
    expect(page.locator("#kpi-migration_cost .kpi-value")).to_have_text(f"{figure} · #4")
    table = page.locator("#migration-table tbody tr")
    first, second = table.nth(0).locator("td"), table.nth(1).locator("td")
    expect(first.nth(0)).to_have_text("4")
    expect(first.nth(3)).to_have_text("switch+rebalance")
    expect(first.nth(5)).to_have_text(f"{rows[4]['state_moved']:,.0f}")
    expect(first.nth(7)).to_have_text(figure)
    expect(second.nth(0)).to_have_text("3")
    expect(second.nth(3)).to_have_text("rebalance")
    expect(second.nth(5)).to_have_text(f"{rows[3]['state_moved']:,.0f}")
    expect(second.nth(7)).to_have_text(f"{rows[3]['migration_cost']:.4g}")  # 0.2525
    bars = _trace(page, "fig-migrations", "state moved")
    moved = {}
    for x, y in zip(bars["x"], bars["y"]):
        moved[x] = moved.get(x, 0.0) + y
    assert moved[4] == pytest.approx(rows[4]["state_moved"]) and moved[3] == pytest.approx(rows[3]["state_moved"])
    # the rebalance markers give the move's figure too (not the rebalance's part of it)
    marks = page.evaluate("""() => { const g = document.querySelector('#fig-imbalance .js-plotly-plot');
        const t = g.data.find(t => t.name === 'rebalance'); return Object.fromEntries(t.x.map((x, i) => [x, t.text[i]])); }""")
    assert f"migration #4 cost {figure}" in marks["4"] and f"migration #3 cost {rows[3]['migration_cost']:.4g}" in marks["3"], marks
