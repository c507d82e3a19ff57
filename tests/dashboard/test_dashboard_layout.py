"""The dashboard's layout measured in Chromium at 1400, 1000 and 760 px, over synthetic runs (no engine).

At each width: a full-page screenshot (under the test's temporary directory), and bounding-box checks
that the change labels of the imbalance chart do not overlap one another, that the per-worker
subtitle is not cut by the figure's edge, that the mean / tolerance labels cover no bar, that the
per-worker history draws its three maps (load, task time, state bytes) with two colour bars apart, that no
chart's toolbar covers its legend, that the workers field shows six digits, and (at 1000 px) that
the operator controls start within the first viewport.  A run of four intervals has integer interval
ticks only.

Missing Chromium or Playwright: the module is skipped, or fails with the reason when ``CI`` is set.
"""

from __future__ import annotations

import numpy as np
import pytest

from tests.browser_fixtures import sync_playwright_or_skip
from tests.dashboard.test_dashboard_browser import Served, browser  # noqa: F401 - browser: the fixture

pytestmark = [pytest.mark.browser, pytest.mark.timeout(300)]

sync_playwright, _ = sync_playwright_or_skip()

from skewlab.dashboard.app import create_app  # noqa: E402
from skewlab.engine.algorithms import registry  # noqa: E402
from skewlab.storage import IntervalRecord, connect  # noqa: E402

WIDTHS = (1400, 1000, 760)
HEIGHT = 900
TIME_FIGURES = ("fig-imbalance", "fig-throughput", "fig-routing", "fig-migrations")
ALL_FIGURES = TIME_FIGURES + ("fig-workers", "fig-shadow", "fig-hotkeys", "fig-heat")


def _fill(db: str, intervals: int, events: dict[int, list[dict]] | None = None, n_workers: int = 8,
          interval_seconds: float = 60.0) -> None:
    """A run of ``intervals`` synthetic intervals: one hot worker, hot keys, shadows, migrations, task times
    and state bytes."""
    store = connect(db)
    params = registry.validate_params("mixed", {})
    run = store.create_run("mixed", params, n_workers=n_workers, config={"interval": interval_seconds, "operator": "count"})
    rng = np.random.default_rng(7)
    for i in range(intervals):
        loads = rng.integers(9_000, 11_000, n_workers).astype(float)
        loads[0] = 20_000.0
        mean = loads.mean()
        moved = i % 3 == 0
        store.record_interval(
            run, IntervalRecord.from_parts(batch_id=i, interval=i,
            metrics={"tuples": int(loads.sum()), "algorithm": "mixed", "n_workers": n_workers,
                     "imbalance": loads.max() / mean - 1, "theta_max_observed": loads.max() / mean - 1,
                     "seeds_imbalance": 0.01, "replication": 1.0, "routing_table_size": 100 + i,
                     "migration_cost": 0.01 if moved else 0.0, "throughput": 50_000.0 + 100 * i,
                     "batch_latency_ms": 800.0},
            workers=[{"worker": w, "tuples": int(loads[w]), "cost": loads[w], "distinct_keys": 500,
                      "state_size": 5000.0, "processing_seconds": loads[w] / 1e5, "state_bytes": int(120 * loads[w])}
                     for w in range(n_workers)],
            hot_keys=[{"key": f"key-{r}", "count": 1000 - 10 * r, "share": (1000 - 10 * r) / loads.sum(),
                       "workers": [r % n_workers]} for r in range(6)],
            shadow={"hash": {"imbalance": 0.9, "replication": 1.0, "migration_cost": 0.0},
                    "pkg": {"imbalance": 0.02, "replication": 1.4, "migration_cost": 0.0}},
            migrations=[{"algorithm": "mixed", "keys_moved": 12, "state_moved": 900.0, "migration_cost": 0.01,
                         "pause_ms": 2.0, "detail": {"reason": "rebalance"}, "bytes_moved": 108_000,
                         "pause_batches": 1}] if moved else None,
            routing={"entries": 100 + i, "amax": 3000},
            events=(events or {}).get(i),
        ))
    store.close()


def _operator_events() -> dict[int, list[dict]]:
    """Five operator changes on consecutive intervals: labels that would sit on top of one another."""
    mixed = registry.validate_params("mixed", {})
    return {
        40: [{"kind": "params", "detail": {"algorithm": "mixed", "params": {**mixed, "theta_max": 0.2}}}],
        41: [{"kind": "workers", "detail": {"previous": 8, "workers": 9}}],
        42: [{"kind": "algorithm", "detail": {"previous": "mixed", "algorithm": "pkg", "params": {}}}],
        43: [{"kind": "pause", "detail": {}}],
        44: [{"kind": "resume", "detail": {}}],
    }


@pytest.fixture(scope="module")
def workdir(tmp_path_factory):
    return tmp_path_factory.mktemp("dashboard-layout")


@pytest.fixture(scope="module")
def served(workdir):
    db = f"sqlite:///{workdir}/layout.sqlite"
    _fill(db, 60, _operator_events())
    s = Served(create_app(db))
    yield s
    s.close()


def _open(browser, url: str, width: int):
    page = browser.new_page(viewport={"width": width, "height": HEIGHT})
    page.set_default_timeout(60_000)
    page.goto(url)
    ids = ", ".join(f"'{g}'" for g in ALL_FIGURES)
    page.wait_for_function(f"() => [{ids}].every(id => {{ const g = document.querySelector('#' + id + "
                           "' .js-plotly-plot'); return g && g._fullLayout && g.data && g.data.length; })")
    page.wait_for_timeout(300)
    return page


def _overlap(a: dict, b: dict, tol: float = 0.5) -> bool:
    return (a["left"] < b["right"] - tol and b["left"] < a["right"] - tol and a["top"] < b["bottom"] - tol
            and b["top"] < a["bottom"] - tol)


_BOXES = """(sel) => Array.from(document.querySelectorAll(sel)).map(e => {
    const r = e.getBoundingClientRect();
    return {left: r.left, right: r.right, top: r.top, bottom: r.bottom, width: r.width, height: r.height,
            text: e.textContent};
}).filter(r => r.width > 0 && r.height > 0)"""


def _boxes(page, sel: str) -> list[dict]:
    return page.evaluate(_BOXES, sel)


@pytest.mark.parametrize("width", WIDTHS)
def test_layout_at_width(browser, served, workdir, width):
    page = _open(browser, served.url, width)
    try:
        page.screenshot(path=str(workdir / f"live-{width}.png"), full_page=True)
        problems: list[str] = []

        # change labels on the imbalance chart: five events on consecutive intervals, none overlapping
        labels = _boxes(page, "#fig-imbalance .infolayer g.annotation")
        assert len(labels) == 5, labels
        for i, a in enumerate(labels):
            for b in labels[i + 1:]:
                if _overlap(a, b):
                    problems.append(f"change labels overlap: {a['text']!r} / {b['text']!r}")

        # per-worker subtitle inside the figure; the mean / tolerance labels cover no bar
        svg = _boxes(page, "#fig-workers .main-svg")[0]
        notes = _boxes(page, "#fig-workers .infolayer g.annotation")
        for n in notes:
            if n["left"] < svg["left"] - 0.5 or n["right"] > svg["right"] + 0.5 or n["top"] < svg["top"] - 0.5:
                problems.append(f"worker chart text cut by the figure's edge: {n['text']!r}")
        bars = _boxes(page, "#fig-workers .barlayer .point path")
        assert len(bars) == 8
        for n in notes:
            for b in bars:
                if _overlap(n, b):
                    problems.append(f"{n['text']!r} covers a bar")
                    break

        # per-worker history: three maps, and the state map's colour bar apart from the relative one
        heat_titles = [b["text"] for b in _boxes(page, "#fig-heat .infolayer g.annotation")]
        assert len(heat_titles) == 3 and "keyed state" in heat_titles[2], heat_titles
        colorbars = _boxes(page, "#fig-heat .colorbar")
        assert len(colorbars) == 2, colorbars
        if _overlap(colorbars[0], colorbars[1]):
            problems.append("the per-worker history's colour bars overlap")
        svg = _boxes(page, "#fig-heat .main-svg")[0]
        if any(b["right"] > svg["right"] + 0.5 for b in colorbars):
            problems.append("a colour bar of the per-worker history is cut by the figure's edge")

        # no chart's toolbar covers its legend (the toolbar shows while the pointer is over the chart)
        for gid in ALL_FIGURES:
            legend = _boxes(page, f"#{gid} .legend")
            if not legend:
                assert gid not in TIME_FIGURES, f"{gid} has no legend"
                continue
            page.locator(f"#{gid} .js-plotly-plot").hover(position={"x": 5, "y": 5})
            page.wait_for_timeout(150)
            bar = _boxes(page, f"#{gid} .modebar")
            assert bar, f"{gid}: no toolbar while the pointer is over the chart"
            if _overlap(bar[0], legend[0]):
                problems.append(f"{gid}: the toolbar covers the legend")
                page.screenshot(path=str(workdir / f"toolbar-{gid}-{width}.png"))
        page.mouse.move(0, 0)

        # the workers field shows six digits and its range
        field = page.locator("#workers-input")
        field.fill("100000")
        if page.evaluate("() => { const e = document.querySelector('#workers-input');"
                         " return e.scrollWidth > e.clientWidth; }"):
            problems.append("the workers field cuts off 100000")
        if "[1, 1024]" not in page.evaluate("() => document.querySelector('#workers-input').closest('.field')"
                                            ".querySelector('label').textContent"):
            problems.append("the workers field shows no range")

        # at 1000 px the controls start within the first viewport, above the charts' end
        controls = page.evaluate("() => document.querySelector('.controls').getBoundingClientRect().top"
                                 " + window.scrollY")
        height = page.evaluate("() => document.documentElement.scrollHeight")
        print(f"{width} px: page {height} px high, operator controls at {controls:.0f} px")
        if width == 1000 and controls > HEIGHT:
            problems.append(f"at {width} px the controls start at {controls:.0f} px (page {height} px)")
        assert not problems, problems
    finally:
        page.close()


_HOVER = """([gid, curve, point]) => { const gd = document.querySelector('#' + gid + ' .js-plotly-plot');
    const t = gd.data[curve]; Plotly.Fx.unhover(gd);
    Plotly.Fx.hover(gd, [{curveNumber: curve, pointNumber: point}], (t.xaxis || 'x') + (t.yaxis || 'y'));
    return gd.querySelector('.hoverlayer').textContent; }"""


def test_hover_gives_state_bytes_and_bytes_moved(browser, served):
    """The vendored plotly.js bundle fills the hover lines the figures add (``%{hovertext}``, custom data)."""
    page = _open(browser, served.url, 1400)
    try:
        moved = page.evaluate(_HOVER, ["fig-migrations", 0, 0])  # interval 0: a migration
        held = page.evaluate(_HOVER, ["fig-migrations", 2, 0])
        cell = page.evaluate(_HOVER, ["fig-heat", 2, 0])  # worker 0 (hot: 20,000 tuples) at interval 0
        assert "108 kB of serialized state" in moved, moved
        assert "tuples held 1 micro-batch" in held, held
        assert "state 2.4 MB" in cell, cell
    finally:
        page.close()


def test_early_charts_have_integer_interval_ticks(browser, workdir):
    db = f"sqlite:///{workdir}/early.sqlite"
    _fill(db, 4)
    s = Served(create_app(db))
    page = _open(browser, s.url, 1400)
    try:
        page.screenshot(path=str(workdir / "early-1400.png"), full_page=True)
        for gid in TIME_FIGURES:
            ticks = page.evaluate(f"() => Array.from(document.querySelectorAll('#{gid} .xaxislayer-above text'))"
                                  ".map(t => t.textContent)")
            assert ticks, gid
            values = [float(t.replace(",", "").replace("−", "-")) for t in ticks]
            assert all(v.is_integer() for v in values), (gid, ticks)
    finally:
        page.close()
        s.close()


def test_forms_in_the_browser(browser, workdir):
    """Empty θmax: an inline error and nothing sent; Amax 1e3 accepted; a second Pause sends nothing; the
    submission line follows the command from pending to applied."""
    from playwright.sync_api import expect

    db = f"sqlite:///{workdir}/forms.sqlite"
    _fill(db, 12, interval_seconds=1.0)  # the page refreshes every second
    store = connect(db)
    (run,) = store.list_runs()
    s = Served(create_app(db))
    page = _open(browser, s.url, 1000)
    try:
        theta = page.locator(".param-input-theta_max input")
        theta.fill("")
        expect(page.locator("[id*='param-msg'][id*='theta_max']")).to_have_text(
            "parameter theta_max: required, [0, 100] (default 0.08)")
        page.click("#apply-btn")
        expect(page.locator("#control-msg")).to_contain_text("refused: parameter theta_max: required")
        assert store.recent_commands(10) == []
        theta.fill("0.08")
        page.locator(".param-input-amax input").fill("1e3")
        expect(page.locator("[id*='param-msg'][id*='amax']")).to_have_text("")
        page.click("#apply-btn")
        expect(page.locator("#control-msg")).to_contain_text("set-param submitted: pending")
        assert store.recent_commands(1)[0]["payload"] == {"params": {"amax": 1000}}

        page.click("#pause-btn")
        expect(page.locator("#control-msg")).to_contain_text("pause submitted: pending")
        cid = store.recent_commands(1)[0]["id"]
        store.mark_command(cid, "applied", applied_batch=12)
        store.record_interval(int(run["id"]), IntervalRecord.from_parts(batch_id=12, interval=12,
                              metrics={"tuples": 10, "algorithm": "mixed", "n_workers": 8, "imbalance": 0.1},
                              events=[{"kind": "pause", "detail": {}, "command_id": cid}]))
        expect(page.locator("#control-msg")).to_have_text(f"command #{cid} pause applied at interval 12",
                                                          timeout=30_000)
        page.click("#pause-btn")
        expect(page.locator("#control-msg")).to_have_text(f"already paused or pausing (command #{cid}): nothing sent")
        assert [c["kind"] for c in store.recent_commands(10)] == ["pause", "set-param"]
        page.locator(".side-col").screenshot(path=str(workdir / "forms-1000.png"))
    finally:
        page.close()
        s.close()
        store.close()
