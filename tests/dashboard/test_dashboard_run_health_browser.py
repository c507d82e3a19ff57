"""What the dashboard shows of a run's health, in Chromium (Playwright), on a run recorded by the
engine's own driver step (tests/migration_run.py: ``mixed``, switched to ``llfd`` from interval 4):
dead letters per interval and reason with readable samples (issue 38 item 4), the run picker's
groupings and a restart marker on the timeline (item 7), the best reachable imbalance beside the
imbalance (item 10), and the time balance of the workers' tasks (issue 36 item 4).

Every expected number is computed here from what the test fed the driver step, and checked against
what the store holds, so the page is compared with the truth, not with itself.

Missing Chromium or Playwright: skipped, or failed with the reason when ``CI`` is set.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
from pathlib import Path

import numpy as np
import pytest

from tests.browser_fixtures import CHROMIUM, LAUNCH_ARGS, sync_playwright_or_skip

pytestmark = [pytest.mark.browser, pytest.mark.timeout(300)]

sync_playwright, expect = sync_playwright_or_skip()

from skewlab.dashboard.app import create_app  # noqa: E402
from skewlab.storage import connect  # noqa: E402
from tests.migration_run import SKEW, record_run  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
BATCHES = 7
#: what the source reports per batch (reason -> (count, samples)): JSON records as the producer wrote them
DEAD = {
    1: {"bad_json": (3, ('{"user": {"id": 7', "not json", "[]"))},
    2: {"missing_value": (2, ('{"user": {"id": 3}, "latency": 12}', '{"user": {"id": 4}}'))},
    4: {"bad_json": (1, ('\\xff{"user": 1}',)), "missing_value": (5, ('{"user": {"id": 9}, "lat": 1}',))},
}
TASKS = {0: 0.2, 1: 0.1, 2: 0.1, 3: 0.2}  # seconds; each batch's wall time is 0.25 s (migration_run)
RESTART_INTERVAL = 4
#: one key ten times as heavy as in the other recorded runs: heavier than a quarter of the tuples, so that
#: no single-owner grouping can balance 4 workers (a bound above 0)
HEAVY = SKEW * np.where(np.arange(SKEW.size) == 0, 10, 1)


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    """The recorded run, and a restart event as the engine records it on restoring the run
    (tests/engine/test_engine_restart.py checks that the engine writes it)."""
    url = f"sqlite:///{tmp_path_factory.mktemp('health')}/db.sqlite"
    run, _, rows = record_run(url, batches=BATCHES, dead=lambda b: DEAD.get(b, {}), task_seconds=lambda b: TASKS,
                              skew=HEAVY)
    store = connect(url)
    store.record_event(run, "restart", {"after_batch": RESTART_INTERVAL - 1}, interval=RESTART_INTERVAL)
    yield url, run, rows, store
    store.close()


@pytest.fixture(scope="module")
def page(recorded):
    from werkzeug.serving import make_server

    url = recorded[0]
    logging.getLogger("werkzeug").setLevel(logging.WARNING)
    srv = make_server("127.0.0.1", 0, create_app(url).server, threaded=True)
    thread = threading.Thread(target=srv.serve_forever, daemon=True)
    thread.start()
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=LAUNCH_ARGS)
        pg = browser.new_page(viewport={"width": 1600, "height": 1000})
        errors: list[str] = []
        pg.on("pageerror", lambda exc: errors.append(str(exc)))
        try:
            pg.set_default_timeout(60_000)
            pg.goto(f"http://127.0.0.1:{srv.server_port}/")
            pg.wait_for_function("() => { const g = document.querySelector('#fig-imbalance .js-plotly-plot');"
                                 " return g && g.data && g.data.length && g.data[0].x.length > 0; }")
            yield pg
            shots = Path(os.environ["SKEWLAB_SHOTS_DIR"]) if os.environ.get("SKEWLAB_SHOTS_DIR") else None
            if shots is not None:
                shots.mkdir(parents=True, exist_ok=True)
                pg.screenshot(path=str(shots / "run-health.png"), full_page=True)
            assert not errors, errors
        finally:
            pg.close()
            browser.close()
            srv.shutdown()
            thread.join(timeout=10)
            srv.server_close()


def _figure(page, fig: str) -> dict:
    page.wait_for_function(f"() => {{ const g = document.querySelector('#{fig} .js-plotly-plot');"
                           " return g && g.data && g.data.length; }")
    return page.evaluate(f"""() => {{ const g = document.querySelector('#{fig} .js-plotly-plot');
        return {{data: g.data.map(t => ({{name: t.name, x: t.x, y: t.y, hovertext: t.hovertext}})),
                 annotations: ((g.layout && g.layout.annotations) || []).map(a => ({{text: a.text, x: a.x}})),
                 shapes: ((g.layout && g.layout.shapes) || []).map(s => s.x0)}}; }}""")


def test_dead_letters_per_interval_and_reason_equal_what_was_stored(page, recorded):
    """Item 4: one bar series per reason, its counts per interval those the source reported and the
    store holds; the run's total per reason; the latest samples as the records read (not hex)."""
    _, run, _, store = recorded
    expect(page.locator("#dead-letter-total")).to_have_text("11 malformed records: missing_value 7 · bad_json 4")
    fig = _figure(page, "fig-dead-letters")
    shown = {t["name"]: dict(zip(t["x"], t["y"])) for t in fig["data"]}
    fed = {}
    for b, reasons in DEAD.items():  # one batch per interval
        for reason, (count, _) in reasons.items():
            fed.setdefault(reason, {})[b] = count
    assert {r: {x: y for x, y in v.items() if y} for r, v in shown.items()} == fed
    stored = {}
    for r in store.dead_letter_counts(run):
        stored.setdefault(r["reason"], {})[r["interval"]] = r["count"]
    assert stored == fed
    assert {r["reason"]: r["count"] for r in store.dead_letters(run)} == {k: sum(v.values()) for k, v in fed.items()}
    rows = page.locator("#dead-letter-samples tr.dead-reason")
    expect(rows).to_have_count(2)
    first = rows.nth(0).locator("td")
    expect(first.nth(0)).to_have_text("missing_value")
    expect(first.nth(1)).to_have_text("7")
    expect(first.nth(2)).to_have_text("4")
    samples = rows.nth(0).locator("code.dead-sample")
    expect(samples.nth(0)).to_have_text('{"user": {"id": 9}, "lat": 1}')  # newest first
    expect(samples.nth(1)).to_have_text('{"user": {"id": 4}}')
    expect(rows.nth(1).locator("code.dead-sample").nth(0)).to_have_text('\\xff{"user": 1}')


def test_the_run_picker_names_the_groupings_in_order(page, recorded):
    """Item 7: after the switch to llfd the picker no longer says only "mixed"."""
    _, run, _, _ = recorded
    expect(page.locator("#run-select")).to_contain_text(f"#{run} moves · mixed → llfd")


def test_a_restart_is_marked_on_the_timeline_like_the_other_events(page):
    """Item 7: the restart event gets a dotted line and a label on the imbalance chart."""
    fig = _figure(page, "fig-imbalance")
    assert {"text": "restart", "x": RESTART_INTERVAL} in fig["annotations"], fig["annotations"]
    assert RESTART_INTERVAL in fig["shapes"]
    expect(page.locator("#event-log")).to_contain_text("restart")


def test_the_best_reachable_imbalance_is_drawn_beside_the_imbalance(page, recorded):
    """Item 10: per interval, max(mean, heaviest key) / mean − 1 (mixed and llfd give each key one
    owner), from the heaviest key the driver recorded; never above the live imbalance."""
    _, _, rows, _ = recorded
    fig = _figure(page, "fig-imbalance")
    traces = {t["name"]: t for t in fig["data"]}
    bound, live = traces["best reachable"], traces["imbalance"]
    expected = []
    for b in range(BATCHES):
        counts = np.roll(HEAVY, 7 * b) * (1 + b)  # what the driver step was fed (tests/migration_run.py)
        expected.append(max(0.0, counts.max() * 4 / counts.sum() - 1.0))
    assert bound["x"] == list(range(BATCHES))
    assert bound["y"] == pytest.approx(expected) and min(expected) > 0.5
    assert all(i >= b - 1e-9 for i, b in zip(live["y"], bound["y"])), (live["y"], bound["y"])
    assert "one owner per key" in bound["hovertext"][0] and "llfd" in bound["hovertext"][-1]


def test_the_time_balance_of_the_workers_tasks(page):
    """Issue 36 item 4: the KPI cards and the per-worker history show the busiest task against the mean
    task, and the batch time outside the workers (0.25 s batch − 0.2 s busiest task)."""
    expect(page.locator("#kpi-task_balance .kpi-value")).to_have_text("1.33×")
    expect(page.locator("#kpi-task_balance .kpi-label")).to_have_text("busiest / mean task (0.20 / 0.15 s)")
    expect(page.locator("#kpi-outside_workers .kpi-value")).to_have_text("0.05 s")
    expect(page.locator("#kpi-outside_workers .kpi-label")).to_have_text("outside the workers (of a 0.25 s batch)")
    for card in ("#kpi-task_balance .kpi-value", "#kpi-outside_workers .kpi-value"):  # not cut
        assert not page.evaluate(f"() => {{ const e = document.querySelector('{card}'); return e.scrollWidth > e.clientWidth; }}")
    fig = _figure(page, "fig-time-balance")
    traces = {t["name"]: t for t in fig["data"]}
    assert traces["busiest / mean task time"]["y"] == pytest.approx([0.2 / 0.15] * BATCHES)
    assert traces["busiest worker's task (s)"]["y"] == pytest.approx([0.2] * BATCHES)
    assert traces["outside the workers (s)"]["y"] == pytest.approx([0.05] * BATCHES)
    assert traces["mean task (s)"]["y"] == pytest.approx([0.15] * BATCHES)
