"""The dashboard in a real browser (Playwright driving Debian's /usr/bin/chromium) over a REAL engine.

One ``skewlab engine`` subprocess (generator, 4 workers, 5 state partitions: one worker can be added, 1 s
intervals, shadows hash and pkg) writes to
a temporary SQLite database; the dashboard is served from a thread on a free loopback port.  In order:
the page loads with live data; an invalid θmax is refused in the form with its range; switching the
algorithm becomes a command that turns from pending to applied and an annotation on the time axes;
adding a worker shows one more bar; a read-only dashboard disables its controls; the history tab
exports the run; and a synthetic 128-worker run shows the roll-up.  That engine is the browser tests'
one live run: a move's interval and figure are checked on a recorded run
(tests/dashboard/test_dashboard_truth_browser.py, tests/storage/test_moves.py), ``skewlab demo`` by
tests/end_to_end/test_readme.py::test_demo_main_command.

Screenshots of the main views go to ``docs/screenshots/`` when ``SKEWLAB_SCREENSHOTS=1`` (as for the
README), otherwise to the test's temporary directory.

Missing Chromium or Playwright: the module is skipped, or fails with the reason when ``CI`` is set.
Install with ``apt-get install chromium`` and ``pip install playwright`` (no ``playwright install``).
"""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from tests.browser_fixtures import CHROMIUM, LAUNCH_ARGS, sync_playwright_or_skip

ROOT = Path(__file__).resolve().parents[2]
VIEWPORT = {"width": 1600, "height": 1000}

pytestmark = [pytest.mark.browser, pytest.mark.timeout(600)]

sync_playwright, expect = sync_playwright_or_skip()
pytest.importorskip("pyspark")

from skewlab.dashboard.app import create_app  # noqa: E402
from skewlab.storage import IntervalRecord, connect  # noqa: E402


def _shots_dir(tmp: Path) -> Path:
    if os.environ.get("SKEWLAB_SCREENSHOTS"):
        d = ROOT / "docs" / "screenshots"
    else:
        d = tmp / "screenshots"
    d.mkdir(parents=True, exist_ok=True)
    return d


class Served:
    """A Dash app on a free loopback port, served from a thread."""

    def __init__(self, app) -> None:
        from werkzeug.serving import make_server

        logging.getLogger("werkzeug").setLevel(logging.WARNING)
        self.srv = make_server("127.0.0.1", 0, app.server, threaded=True)
        self.thread = threading.Thread(target=self.srv.serve_forever, daemon=True)
        self.thread.start()
        self.url = f"http://127.0.0.1:{self.srv.server_port}/"

    def close(self) -> None:
        self.srv.shutdown()
        self.thread.join(timeout=10)
        self.srv.server_close()


# ------------------------------------------------------------------------------------ fixtures
@pytest.fixture(scope="module")
def workdir(tmp_path_factory):
    return tmp_path_factory.mktemp("dashboard-browser")


@pytest.fixture(scope="module")
def engine(workdir):
    """A real engine subprocess; yields (db url, run id, log path)."""
    db = f"sqlite:///{workdir}/db.sqlite"
    log_path = workdir / "engine.log"
    cmd = [sys.executable, "-m", "skewlab", "engine", "--db", db, "--checkpoint", str(workdir / "ck"),
           "--interval", "1", "--rate", "5000", "--workers", "4", "--max-workers", "5", "--shadow", "hash,pkg",
           "--algorithm", "mixed", "--duration", "420"]
    env = dict(os.environ, SKEWLAB_DATA_DIR=str(workdir / "data"), PYTHONUNBUFFERED="1")
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(cmd, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, env=env,
                                start_new_session=True)
    store = connect(db)
    try:
        deadline = time.monotonic() + 300
        run_id = None
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                pytest.fail(f"engine exited with {proc.returncode}:\n{log_path.read_text()[-3000:]}")
            runs = store.list_runs()
            if runs and runs[0]["intervals"] >= 3:
                run_id = int(runs[0]["id"])
                break
            time.sleep(0.5)
        if run_id is None:
            pytest.fail(f"no data from the engine in 300 s:\n{log_path.read_text()[-3000:]}")
        yield db, run_id, log_path
    finally:
        store.close()
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


@pytest.fixture(scope="module")
def browser():
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=LAUNCH_ARGS)
        yield b
        b.close()


@pytest.fixture(scope="module")
def live(engine, browser, workdir):
    """The operator's page on the live dashboard (loopback, controls enabled)."""
    db, run_id, _ = engine
    served = Served(create_app(db))
    page = browser.new_page(viewport=VIEWPORT)
    page.set_default_timeout(60_000)  # generous: CI's 2 cores also run Spark
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    yield page, served, run_id, db, errors
    page.close()
    served.close()


def _bars(page) -> int:
    return page.evaluate("() => { const g = document.querySelector('#fig-workers .js-plotly-plot');"
                         " return g && g.data && g.data.length ? g.data[0].x.length : 0; }")


def _imbalance_x(page) -> list:
    return page.evaluate("() => { const g = document.querySelector('#fig-imbalance .js-plotly-plot');"
                         " return g && g.data && g.data.length ? g.data[0].x : []; }")


def _annotations(page) -> list[str]:
    return page.evaluate("() => { const g = document.querySelector('#fig-imbalance .js-plotly-plot');"
                         " return ((g && g.layout && g.layout.annotations) || []).map(a => a.text); }")


# ------------------------------------------------------------------------------------ tests
def test_page_loads_with_live_data(live, workdir):
    page, served, run_id, _, errors = live
    urls: list[str] = []
    console: list[str] = []
    page.on("request", lambda r: urls.append(r.url))
    page.on("console", lambda m: console.append(m.text) if m.type == "error" else None)
    t0 = time.monotonic()
    page.goto(served.url)
    page.wait_for_function("() => { const g = document.querySelector('#fig-imbalance .js-plotly-plot');"
                           " return g && g.data && g.data.length > 5 && g.data[0].x.length > 0; }")
    load_s = time.monotonic() - t0
    # every figure drawn by the vendored plotly.js basic bundle (issue #5): Dash's full 4.8 MB bundle
    # is never fetched, the preloaded layout is fetched once, and the polyfill's slow String#trim is gone
    page.wait_for_function("() => ['fig-imbalance', 'fig-workers', 'fig-shadow', 'fig-hotkeys', 'fig-throughput',"
                           " 'fig-routing', 'fig-migrations'].every(id => { const g = document.querySelector("
                           "'#' + id + ' .js-plotly-plot'); return g && g._fullLayout && g.data && g.data.length; })")
    assert not [u for u in urls if "plotly.min.js" in u or "/plotly/package_data/" in u], urls
    assert sum(1 for u in urls if u.endswith("/_dash-layout")) == 1, urls
    assert page.evaluate("() => Object.keys(Plotly.PlotSchema.get().traces).sort()") == ["bar", "pie", "scatter"]
    assert page.evaluate("() => { const f = document.createElement('iframe'); document.body.appendChild(f);"
                         " const native = /\\[native code\\]/.test(f.contentWindow.Function.prototype.toString"
                         ".call(String.prototype.trim)); f.remove(); return native; }")
    assert not console, console
    assert _bars(page) == 4
    expect(page.locator("#run-status")).to_have_text("running")
    expect(page.locator("#kpi-imbalance .kpi-value")).not_to_have_text("—")
    first = _imbalance_x(page)
    # live refresh: new intervals are appended by the tick (Patch), in order, without duplicates
    page.wait_for_function(f"() => document.querySelector('#fig-imbalance .js-plotly-plot').data[0].x.length"
                           f" >= {len(first) + 3}", timeout=45_000)
    xs = _imbalance_x(page)
    assert xs[: len(first)] == first and all(b > a for a, b in zip(xs, xs[1:])), xs
    assert page.locator("#fig-shadow .js-plotly-plot").count() == 1
    assert "pkg" in page.evaluate("() => document.querySelector('#fig-shadow .js-plotly-plot').data[0].y")
    title = page.locator("#kpi-imbalance").get_attribute("title")
    assert "max_w L_w / mean_w L_w" in title and "window" in title  # the definition, one hover away
    page.screenshot(path=str(_shots_dir(workdir) / "live.png"), full_page=True)
    assert not errors, errors
    print(f"page load with data: {load_s:.2f} s")


def test_invalid_theta_max_is_refused_with_the_range(live):
    page, _, run_id, db, _ = live
    store = connect(db)
    before = len(store.recent_commands(100))
    field = page.locator(".param-input-theta_max input")
    field.fill("500")
    msg = page.locator("[id*='param-msg'][id*='theta_max']")
    expect(msg).to_contain_text("out of range [0, 100]")
    page.click("#apply-btn")
    expect(page.locator("#control-msg")).to_contain_text("refused")
    expect(page.locator("#control-msg")).to_contain_text("[0, 100]")
    assert len(store.recent_commands(100)) == before, "an invalid form must not create a command"
    field.fill("0.08")
    expect(msg).to_have_text("")
    store.close()


def test_switching_the_algorithm_is_applied_and_annotated(live, workdir):
    page, _, run_id, db, _ = live
    page.click("#algo-select")
    page.get_by_role("option", name="pkg", exact=True).click()
    expect(page.locator("#apply-btn")).to_have_text("Switch to pkg")
    page.click("#apply-btn")
    expect(page.locator("#control-msg")).to_contain_text("submitted")
    item = page.locator(".cmd").first
    expect(item).to_contain_text("set-algorithm")
    expect(item).to_have_attribute("data-status", "applied", timeout=60_000)
    expect(item).to_contain_text("applied at interval")
    page.wait_for_function("() => { const g = document.querySelector('#fig-imbalance .js-plotly-plot');"
                           " return (g.layout.annotations || []).some(a => a.text === '→ pkg'); }", timeout=60_000)
    assert "→ pkg" in _annotations(page)
    expect(page.locator("#event-log")).to_contain_text("→ pkg")
    # the event names the first interval in effect and is written when the command is applied; the card
    # shows the latest *finished* interval, so it turns to pkg when that batch ends (seconds later under load)
    expect(page.locator("#kpi-algorithm-value")).to_contain_text("pkg", timeout=60_000)
    store = connect(db)
    cmd = store.recent_commands(1, run_id=run_id)[0]
    assert cmd["kind"] == "set-algorithm" and cmd["status"] == "applied"
    assert any(e["kind"] == "algorithm" and e["command_id"] == cmd["id"] for e in store.events(run_id))
    store.close()
    page.locator(".side-col").screenshot(path=str(_shots_dir(workdir) / "controls.png"))


def test_adding_a_worker_shows_one_more_bar(live, workdir):
    page, _, _, _, errors = live
    assert _bars(page) == 4
    page.click("#workers-plus")
    expect(page.locator("#control-msg")).to_contain_text("submitted")
    page.wait_for_function("() => document.querySelector('#fig-workers .js-plotly-plot').data[0].x.length === 5",
                           timeout=60_000)
    expect(page.locator("#event-log")).to_contain_text("workers 4→5")
    page.wait_for_function("() => { const g = document.querySelector('#fig-imbalance .js-plotly-plot');"
                           " return (g.layout.annotations || []).some(a => a.text === 'workers 4→5'); }")
    xs = _imbalance_x(page)
    assert all(b > a for a, b in zip(xs, xs[1:])), "ticks must never duplicate points"
    page.screenshot(path=str(_shots_dir(workdir) / "live-after-actions.png"), full_page=True)
    assert not errors, errors


def test_history_tab_lists_and_exports_the_run(live, workdir):
    page, served, run_id, _, _ = live
    page.click("text=Runs & comparison")
    expect(page.locator("#runs-table")).to_contain_text("mixed")
    link = page.locator(f"#runs-table a[href$='run-{run_id}.json']")
    expect(link).to_have_count(1)
    r = page.request.get(served.url.rstrip("/") + link.get_attribute("href"))
    assert r.ok and r.json()["format"] == "skewlab-run" and r.json()["run"]["id"] == run_id
    r = page.request.get(served.url + f"export/run-{run_id}-csv.zip")
    assert r.ok and r.body()[:2] == b"PK"
    page.click("#compare-a")
    page.get_by_role("option", name=f"#{run_id} ").first.click()
    page.wait_for_function("() => { const g = document.querySelector('#fig-compare .js-plotly-plot');"
                           " return g && g.data && g.data.length === 3; }")
    expect(page.locator("#compare-summary")).to_contain_text("mean imbalance")
    page.screenshot(path=str(_shots_dir(workdir) / "history.png"), full_page=True)
    page.click("text=Live")


def test_read_only_dashboard_disables_controls(engine, browser, workdir):
    db, _, _ = engine
    served = Served(create_app(db, host="0.0.0.0"))  # a non-loopback bind without a token
    page = browser.new_page(viewport=VIEWPORT)
    page.set_default_timeout(60_000)  # generous: CI's 2 cores also run Spark
    try:
        page.goto(served.url)
        expect(page.locator("#mode-banner")).to_contain_text("Read-only dashboard")
        for bid in ("#apply-btn", "#workers-plus", "#workers-minus", "#pause-btn", "#resume-btn"):
            expect(page.locator(bid)).to_be_disabled()
        expect(page.locator("#algo-select")).to_be_disabled()
        page.wait_for_function("() => { const g = document.querySelector('#fig-imbalance .js-plotly-plot');"
                               " return g && g.data && g.data[0].x.length > 0; }")
        page.screenshot(path=str(_shots_dir(workdir) / "read-only.png"))
    finally:
        page.close()
        served.close()


def test_roll_up_at_128_workers(browser, workdir):
    """A synthetic 128-worker run (no engine): the bars show the top 16 and a roll-up line."""
    import numpy as np

    store = connect(f"sqlite:///{workdir}/w128.sqlite")
    run = store.create_run("mixed", {"theta_max": 0.08, "amax": 3000}, n_workers=128, config={"interval": 2.0})
    rng = np.random.default_rng(3)
    for i in range(60):
        loads = rng.gamma(150, 8.0, 128)
        loads[[5, 77, 101]] *= (1.6, 1.35, 1.2)  # three hot workers
        mean = loads.mean()
        moved = i % 4 == 0
        store.record_interval(run, IntervalRecord.from_parts(i, i, {
            "tuples": int(loads.sum()), "n_workers": 128, "imbalance": loads.max() / mean - 1,
            "theta_max_observed": np.abs(loads - mean).max() / mean, "seeds_imbalance": (loads.max() - mean) / loads.sum(),
            "replication": 1.0, "routing_table_size": 200 + 5 * i, "migration_cost": 0.01 if moved else 0.0,
            "throughput": 40_000 + 500 * rng.standard_normal(), "batch_latency_ms": 900 + 50 * rng.standard_normal()},
            workers=[{"worker": w, "tuples": int(v), "cost": float(v), "distinct_keys": int(v / 6),
                      "state_size": float(10 * v)} for w, v in enumerate(loads)],
            hot_keys=[{"key": f"key-{r}", "count": int(loads.sum() * (0.03 - 0.003 * r)), "share": 0.03 - 0.003 * r,
                       "workers": sorted({int(x) for x in rng.integers(0, 128, 1 + (r == 0))})} for r in range(8)],
            shadow={"hash": {"imbalance": 0.9, "replication": 1.0, "migration_cost": 0.0},
                    "pkg": {"imbalance": 0.02, "replication": 1.4, "migration_cost": 0.0}},
            routing={"entries": 200 + 5 * i, "amax": 3000},
            migrations=[{"algorithm": "mixed", "keys_moved": 12, "state_moved": 900.0, "migration_cost": 0.01,
                         "pause_ms": 2.0, "detail": {"reason": "rebalance"}}] if moved else None,
            events=[{"kind": "rebalance", "detail": {"keys": 12, "state_moved": 900.0, "migration_cost": 0.01}}]
            if moved else None))
    store.close()
    served = Served(create_app(f"sqlite:///{workdir}/w128.sqlite"))
    page = browser.new_page(viewport=VIEWPORT)
    page.set_default_timeout(60_000)  # generous: CI's 2 cores also run Spark
    try:
        page.goto(served.url)
        page.wait_for_function("() => { const g = document.querySelector('#fig-workers .js-plotly-plot');"
                               " return g && g.data && g.data.length && g.data[0].x.length === 16; }")
        rollup = page.evaluate("() => document.querySelector('#fig-workers .js-plotly-plot').layout.annotations[0].text")
        assert rollup.startswith("top 16 of 128 workers")
        page.locator("#fig-workers").scroll_into_view_if_needed()  # the KPI strip may take two rows
        box = page.locator("#fig-workers .js-plotly-plot .point").first.bounding_box()
        page.mouse.click(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)  # drill down: top worker
        expect(page.locator("#worker-detail")).to_contain_text("worker w")
        page.wait_for_selector("#fig-worker-detail .js-plotly-plot")
        page.mouse.move(5, 5)  # no hover label in the screenshot
        page.wait_for_timeout(300)
        page.screenshot(path=str(_shots_dir(workdir) / "live-128-workers.png"), full_page=True)
        page.locator("#worker-view label", has_text="all").click()
        page.wait_for_function("() => document.querySelector('#fig-workers .js-plotly-plot').data[0].x.length === 128")
    finally:
        page.close()
        served.close()
