"""The panel list (dashboard/panels, docs/add-a-panel.md): a panel is on the page, on the live refresh and
in the callbacks exactly when it is in the list given to the app, and the worked example of the doc —
the "Hot keys" panel — is drawn from the store on page load and follows a new interval on a tick."""

import json
import re
from pathlib import Path

import pytest

pytest.importorskip("dash")

from skewlab.dashboard.app import create_app  # noqa: E402
from skewlab.dashboard.panels import PANELS, hot_keys  # noqa: E402
from skewlab.engine.algorithms import registry  # noqa: E402
from skewlab.storage import IntervalRecord  # noqa: E402
from tests.dashboard.test_dashboard import _call, store  # noqa: E402,F401  (store: the fixture)

ROOT = Path(__file__).resolve().parents[2]


def interval(store, run, i, keys):
    """One interval of 4 workers whose hot keys are ``keys`` (the first the hottest)."""
    store.record_interval(run, IntervalRecord.from_parts(
        batch_id=i, interval=i,
        metrics={"tuples": 4000, "algorithm": "mixed", "n_workers": 4, "imbalance": 0.1, "throughput": 4000.0,
                 "batch_latency_ms": 100.0},
        workers=[{"worker": w, "tuples": 1000, "cost": 1000.0} for w in range(4)],
        hot_keys=[{"key": k, "count": 400 - 50 * r, "share": (400 - 50 * r) / 4000, "workers": [r % 4]}
                  for r, k in enumerate(keys)]))


@pytest.fixture
def run(store):
    rid = store.create_run("mixed", registry.validate_params("mixed", {}), n_workers=4,
                           config={"interval": 1.0, "operator": "count"})
    for i in range(5):
        interval(store, rid, i, ["apple", "pear", "plum"])
    return rid


def find(node, id_):
    """The component with id ``id_`` in a ``_dash-layout`` tree, or None."""
    if isinstance(node, dict):
        if (node.get("props") or {}).get("id") == id_:
            return node
        for v in node.values():
            hit = find(v, id_)
            if hit is not None:
                return hit
    elif isinstance(node, list):
        for v in node:
            hit = find(v, id_)
            if hit is not None:
                return hit
    return None


def tick(client, run, cursor):
    """The live refresh on a tick, as dash-renderer posts it; its response by component id."""
    r = _call(client, "cursor.data", {"tick.n_intervals": 1, "run-select.value": run, "worker-view.value": "auto"},
              {"cursor.data": cursor, "imb-metrics.value": ["imbalance"], "tick.interval": 1000}, "tick.n_intervals")
    assert r.status_code == 200, r.get_data(as_text=True)[-2000:]
    return r.get_json()["response"]


def test_a_panel_is_on_the_page_exactly_when_it_is_in_the_list(store, run):
    without = [p for p in PANELS if p is not hot_keys.PANEL]
    assert len(without) == len(PANELS) - 1
    client = create_app(store=store, panels=without).server.test_client()
    assert find(client.get("/_dash-layout").get_json(), "fig-hotkeys") is None
    assert "fig-hotkeys" not in json.dumps(client.get("/_dash-dependencies").get_json())
    assert "fig-hotkeys" not in tick(client, run, None)
    # the other panels are all there, and the page is the same with the list back
    client = create_app(store=store).server.test_client()
    layout = client.get("/_dash-layout").get_json()
    for p in PANELS:
        for cid, _ in p.outputs:
            assert find(layout, cid) is not None, cid
    assert find(layout, "fig-hotkeys") is not None


def test_the_hot_keys_panel_draws_the_store_and_follows_a_new_interval(store, run):
    """The doc's worked example through the public list: page load draws the latest interval's hot keys;
    a tick after a new interval draws the new one's."""
    app = create_app(store=store)
    client = app.server.test_client()
    layout = client.get("/_dash-layout").get_json()
    card = find(layout, "fig-hotkeys")
    (bar,) = card["props"]["figure"]["data"]
    assert bar["y"] == ["apple", "pear", "plum"] and bar["x"] == pytest.approx([10.0, 8.75, 7.5])
    cursor = find(layout, "cursor")["props"]["data"]
    interval(store, run, 5, ["fig", "kiwi"])
    app.skewlab.data.cache.clear()
    resp = tick(client, run, cursor)
    (bar,) = resp["fig-hotkeys"]["figure"]["data"]
    assert bar["y"] == ["fig", "kiwi"] and bar["x"] == pytest.approx([10.0, 8.75])
    assert resp["cursor"]["data"]["last_interval"] == 5
    # a tick with nothing new leaves it as drawn
    assert "fig-hotkeys" not in tick(client, run, resp["cursor"]["data"])


def test_the_docs_worked_example_is_the_panel_module():
    """docs/add-a-panel.md shows dashboard/panels/hot_keys.py as it is, and the line that lists it."""
    doc = (ROOT / "docs" / "add-a-panel.md").read_text(encoding="utf-8")
    source = (ROOT / "dashboard" / "panels" / "hot_keys.py").read_text(encoding="utf-8")
    block = re.search(r"\n((?:    .*\n|\n)+)", doc[doc.index("The whole module, dashboard/panels/hot_keys.py:"):]).group(1)
    shown = "\n".join(line[4:] for line in block.strip("\n").split("\n")) + "\n"
    assert shown == source
    assert "    hot_keys.PANEL," in doc
    assert "    hot_keys.PANEL,\n" in (ROOT / "dashboard" / "panels" / "__init__.py").read_text(encoding="utf-8")
