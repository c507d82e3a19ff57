"""Dashboard unit tests: data queries (reset / delta / consistency), figures and patches, roll-up at 128
workers, form validation against the registry's declarations, read-only mode and operator-token checks
on the server side (through Dash's real HTTP callback route), exports, the CLI, and that the dashboard
never imports pyspark.  Everything runs on in-memory SQLite stores filled with synthetic rows."""

from __future__ import annotations

import io
import json
import subprocess
import sys
import zipfile

import numpy as np
import pytest

pytest.importorskip("dash")

from skewlab.dashboard import figures as F  # noqa: E402
from skewlab.dashboard.app import create_app  # noqa: E402
from skewlab.dashboard.controls import (  # noqa: E402
    Authorizer,
    build_algorithm_command,
    build_workers_command,
    workers_range,
    is_loopback,
    pause_noop,
    validate_fields,
)
from skewlab.dashboard.data import DashboardData, load_bands, window_for  # noqa: E402
from skewlab.engine.algorithms import registry  # noqa: E402
from skewlab.engine.control.commands import CommandError  # noqa: E402
from skewlab.engine.config.params import ParamError  # noqa: E402
from skewlab.storage import IntervalRecord, connect  # noqa: E402

MIXED = registry.validate_params("mixed", {})
TOKEN = "s3cret-operator-token"


# ------------------------------------------------------------------------------------ fixtures
def record(store, run, i, n_workers=4, *, algorithm="mixed", events=None, seed=0):
    """One synthetic interval: worker 0 overloaded, hot keys, two shadows, a migration every 3rd."""
    rng = np.random.default_rng(seed * 1000 + i)
    loads = rng.integers(900, 1100, n_workers).astype(float)
    loads[0] = 2000.0
    mean = loads.mean()
    evs = list(events or [])
    migrations = None
    if i % 3 == 0:
        migrations = [{"algorithm": algorithm, "keys_moved": 3, "state_moved": 120.0, "migration_cost": 0.01,
                       "pause_ms": 1.5, "detail": {"reason": "rebalance"}}]
        evs.append({"kind": "rebalance", "detail": {"keys": 3, "state_moved": 120.0, "migration_cost": 0.01}})
    store.record_interval(
        run, IntervalRecord.from_parts(batch_id=i, interval=i,
        metrics={"tuples": int(loads.sum()), "algorithm": algorithm, "n_workers": n_workers,
                 "imbalance": loads.max() / mean - 1, "theta_max_observed": loads.max() / mean - 1,
                 "seeds_imbalance": 0.01, "replication": 1.0, "routing_table_size": 10 + i, "migration_cost": 0.0,
                 "throughput": 5000.0 + i, "batch_latency_ms": 200.0},
        workers=[{"worker": w, "tuples": int(loads[w]), "cost": loads[w], "distinct_keys": 50, "state_size": 500.0}
                 for w in range(n_workers)],
        hot_keys=[{"key": f"k{r}", "count": 100 - r, "share": (100 - r) / loads.sum(), "workers": [r % n_workers]}
                  for r in range(5)],
        shadow={"hash": {"imbalance": 0.5, "replication": 1.0, "migration_cost": 0.0},
                "pkg": {"imbalance": 0.01, "replication": 1.2, "migration_cost": 0.0}},
        migrations=migrations,
        routing={"entries": 10 + i, "amax": 3000},
        events=evs,
    ))
    return loads


@pytest.fixture
def store():
    s = connect("sqlite://")
    yield s
    s.close()


@pytest.fixture
def run(store):
    rid = store.create_run("mixed", MIXED, n_workers=4, config={"interval": 1.0, "operator": "count"})
    for i in range(30):
        events = None
        if i == 10:
            events = [{"kind": "params", "detail": {"algorithm": "mixed", "params": {**MIXED, "theta_max": 0.2}}}]
        if i == 20:
            events = [{"kind": "algorithm", "detail": {"previous": "mixed", "algorithm": "mixed-bf",
                                                       "params": registry.validate_params("mixed-bf", {})}}]
        record(store, rid, i, algorithm="mixed" if i < 20 else "mixed-bf", events=events)
    return rid


# ------------------------------------------------------------------------------------ data
def test_load_reset_then_delta_reads_only_new_intervals(store, run):
    D = DashboardData(store, window=25)
    d = D.load(run)
    assert d["reset"] and d["series"]["interval"] == list(range(5, 30))
    assert d["last_interval"] == 29 and d["n_workers"] == 4 and d["algorithm"] == "mixed-bf"
    # θmax in force per interval follows the params event at 10 and the switch at 20
    theta = dict(zip(d["series"]["interval"], d["series"]["theta_max"]))
    assert theta[9] == 0.08 and theta[10] == 0.2 and theta[19] == 0.2 and theta[20] == 0.08
    # bands equal numpy's quantiles of that interval's worker loads
    loads = [w["cost"] for w in store.worker_metrics(run, interval=17)]
    k = d["bands"]["interval"].index(17)
    assert d["bands"]["median"][k] == pytest.approx(float(np.median(loads)))
    assert d["bands"]["max"][k] == max(loads) and d["bands"]["min"][k] == min(loads)
    assert [w["worker"] for w in d["workers"]] == [0, 1, 2, 3]
    kinds = [e["kind"] for e in d["events"]]
    assert "params" in kinds and "algorithm" in kinds and "rebalance" in kinds
    assert all(e["interval"] >= 5 for e in d["events"])
    assert d["hot_keys"][0]["key"] == "k0" and d["routing"]["amax"][-1] == 3000
    assert {r["algorithm"] for r in d["shadow"]} == {"mixed-bf", "hash", "pkg"}

    cursor = {"run_id": run, "last_interval": d["last_interval"], "last_event_id": d["last_event_id"], "points": 25}
    none = D.load(run, cursor)
    assert not none["reset"] and not none["new"] and none["events"] == []
    record(store, run, 30, events=[{"kind": "workers", "detail": {"previous": 4, "workers": 5}}])
    record(store, run, 31, n_workers=5)
    D.cache.clear()
    delta = D.load(run, cursor)
    assert not delta["reset"] and delta["series"]["interval"] == [30, 31]
    assert delta["bands"]["interval"] == [30, 31] and len(delta["workers"]) == 5
    assert [e["kind"] for e in delta["events"]] == ["workers", "rebalance"]  # 30 % 3 == 0
    assert delta["migrations"]["interval"] == [30, 31] and delta["migrations"]["keys_moved"] == [3, 0]
    assert delta["n_workers"] == 5


def test_load_starts_over_when_the_tab_fell_far_behind(store, run):
    D = DashboardData(store, window=10)
    d = D.load(run, {"run_id": run, "last_interval": 2, "last_event_id": 0, "points": 5})
    assert d["reset"] and d["series"]["interval"] == list(range(20, 30))
    d = D.load(run, {"run_id": run, "last_interval": 28, "last_event_id": 0, "points": 25})
    assert d["reset"], "a figure that grew past 2 x window is redrawn from the window"


def test_commands_show_interval_applied_at(store, run):
    D = DashboardData(store)
    cid = store.submit_command("set-workers", {"workers": 6}, run_id=run)
    bad = store.submit_command("set-workers", {"workers": 0}, run_id=run)
    record(store, run, 30, events=[{"kind": "workers", "detail": {"previous": 4, "workers": 6}, "command_id": cid}])
    store.mark_command(cid, "applied", applied_batch=30)
    store.mark_command(bad, "rejected", reason="set-workers: workers 0 out of range [1, 1024]")
    rows = {c["id"]: c for c in D.commands(run)}
    assert rows[cid]["status"] == "applied" and rows[cid]["interval"] == 30
    assert rows[bad]["status"] == "rejected" and "out of range" in rows[bad]["reason"]


def test_window_shrinks_for_many_workers_and_bands_of_nothing():
    assert window_for(4) == 600 and window_for(128) == 312 and window_for(10_000) == 60
    assert load_bands([])["interval"] == []
    b = load_bands([{"interval": 3, "cost": None, "tuples": 7}])
    assert b["min"] == [7.0] and b["max"] == [7.0]


# ------------------------------------------------------------------------------------ figures
def _no_typed_arrays(obj):
    if isinstance(obj, dict):
        assert "bdata" not in obj, "typed arrays cannot be extended by a Patch"
        for v in obj.values():
            _no_typed_arrays(v)
    elif isinstance(obj, list):
        for v in obj:
            _no_typed_arrays(v)


def test_time_figures_and_patches_extend_the_same_traces(store, run):
    D = DashboardData(store, window=25)
    d = D.load(run)
    fig = F.time_figure("imbalance", d, ["imbalance"])
    json.dumps(fig)
    _no_typed_arrays(fig)
    specs = F.TIME_FIGURES["imbalance"][0]
    assert len(fig["data"]) == len(specs)
    assert fig["data"][0]["x"] == list(range(5, 30)) and fig["data"][1]["visible"] == "legendonly"
    labels = [a["text"] for a in fig["layout"]["annotations"]]
    assert "→ mixed-bf" in labels and "θmax=0.2" in labels
    assert len(fig["layout"]["shapes"]) == 2  # one dotted line per operator event
    rebal = fig["data"][[s.kind for s in specs].index("markers")]
    assert rebal["x"] == [i for i in range(5, 30) if i % 3 == 0]

    cursor = {"run_id": run, "last_interval": 29, "last_event_id": d["last_event_id"], "points": 25}
    record(store, run, 30, events=[{"kind": "pause", "detail": {}}])
    D.cache.clear()
    delta = D.load(run, cursor)
    log = [e for e in d["events"] if e.get("kind") != "rebalance"] + delta["events"]
    ops = F.time_patch("imbalance", dict(delta, label_events=log, label_span=26)).to_plotly_json()["operations"]
    extend = {tuple(o["location"]): o["params"]["value"] for o in ops if o["operation"] == "Extend"}
    assert extend[("data", 0, "x")] == [30] and extend[("data", 5, "x")] == [30]
    assert len(extend[("layout", "shapes")]) == 1
    # the labels are placed again with the new one; everything else only appends
    (labels,) = [o["params"]["value"] for o in ops if o["location"] == ["layout", "annotations"]]
    assert [a["text"] for a in labels] == ["θmax=0.2", "→ mixed-bf", "pause"]
    assert all(o["operation"] == "Extend" for o in ops if o["location"] != ["layout", "annotations"])
    quiet = F.time_patch("imbalance", dict(delta, events=[])).to_plotly_json()["operations"]
    assert all(o["operation"] == "Extend" for o in quiet), "a tick without events only appends"
    for name in ("throughput", "routing", "migrations"):
        f = F.time_figure(name, d)
        _no_typed_arrays(f)
        assert len(f["layout"]["shapes"]) == 2 and not f["layout"]["annotations"]


def test_worker_bars_mark_overload_against_the_tolerance_line():
    workers = [{"worker": w, "load": load, "tuples": int(load), "distinct_keys": 1, "state_size": 1.0}
               for w, load in enumerate([200.0, 100.0, 100.0, 100.0])]
    fig = F.worker_load_figure({"workers": workers, "theta_now": 0.5, "run_id": 1})
    mean = 125.0
    tol = [s for s in fig["layout"]["shapes"] if s["line"].get("dash") == "dash"][0]
    assert tol["y0"] == pytest.approx(1.5 * mean)
    assert fig["data"][0]["marker"]["color"] == [F.C["over"], F.C["bar"], F.C["bar"], F.C["bar"]]
    patch = F.worker_load_patch({"workers": workers, "theta_now": None}).to_plotly_json()["operations"]
    assert {tuple(o["location"]) for o in patch} >= {("data", 0, "y"), ("layout", "shapes")}


def test_change_labels_take_separate_rows_and_axes_span_ten_intervals():
    events = [{"kind": k, "interval": 40 + i, "detail": {}} for i, k in enumerate(("pause", "resume", "pause"))]
    events.append({"kind": "resume", "interval": 59, "detail": {}})
    labels = F.event_annotations(events, 60)
    assert [a.get("yshift") for a in labels] == [0, -18, -36, 0]  # close ones stacked, a far one back on top
    assert len(F.event_annotations(events * 5, 60)) == F.LABELLED_EVENTS
    fig = F.time_figure("throughput", {"series": {"interval": [3, 4, 5], "throughput": [1, 2, 3],
                                                  "batch_latency_ms": [1, 1, 1]}, "events": []})
    assert fig["layout"]["xaxis"]["autorangeoptions"] == {"include": [3, 13]}
    assert fig["layout"]["xaxis2"]["autorangeoptions"] == {"include": [3, 13]}


def test_worker_chart_keeps_its_labels_above_the_bars():
    workers = [{"worker": w, "load": load, "tuples": int(load), "distinct_keys": 1, "state_size": 1.0}
               for w, load in enumerate([200.0, 100.0, 100.0, 100.0])]
    fig = F.worker_load_figure({"workers": workers, "theta_now": 0.5, "run_id": 1})
    (note,) = fig["layout"]["annotations"]
    assert note["yref"] == "paper" and note["y"] == 1.0 and note["yanchor"] == "bottom"
    lines = note["text"].split("<br>")
    assert len(lines) == 3 and "mean L̄ = 125" in lines[1] and "tolerance (1+θ)·L̄ = 188" in lines[1]
    assert lines[2] == "1 above tolerance (θmax=0.5)"


def test_roll_up_at_128_workers_shows_top_16_and_all_on_request():
    rng = np.random.default_rng(1)
    loads = rng.integers(900, 1100, 128).astype(float)
    loads[[7, 99]] = 3000.0
    workers = [{"worker": w, "load": float(v), "tuples": int(v), "distinct_keys": 1, "state_size": 1.0}
               for w, v in enumerate(loads)]
    data = {"workers": workers, "theta_now": 0.08, "run_id": 1}
    top = F.worker_load_figure(data, "auto")
    assert len(top["data"][0]["x"]) == F.TOP_N and top["data"][0]["x"][:2] in (["w7", "w99"], ["w99", "w7"])
    rollup = top["layout"]["annotations"][0]["text"]
    assert rollup.startswith("top 16 of 128 workers") and "2 above tolerance" in rollup
    assert len(F.worker_load_figure(data, "all")["data"][0]["x"]) == 128
    assert len(F.worker_load_figure({**data, "workers": workers[:4]}, "auto")["data"][0]["x"]) == 4


def test_shadow_hot_keys_compare_and_empty_figures(store, run):
    D = DashboardData(store)
    d = D.load(run)
    sh = F.shadow_figure(d)
    names = sh["data"][0]["y"]
    assert names[0] == "pkg" and "mixed-bf (live)" in names  # sorted by imbalance, best first
    assert "Lowest imbalance now: pkg" in F.shadow_verdict(d)
    hot = F.hot_keys_figure(d)
    assert hot["data"][0]["y"][0] == "k0" and hot["data"][0]["text"][1] == "→ w1"
    cmp_ = F.compare_figure(D.run_series(run), D.run_series(run))
    assert len(cmp_["data"]) == 6
    for fig in (F.shadow_figure({}), F.hot_keys_figure({}), F.worker_load_figure({}), F.compare_figure(None, None)):
        assert fig["data"] == [] and fig["layout"]["annotations"]


# ------------------------------------------------------------------------------------ forms
def test_form_validation_uses_the_registry_declarations():
    params, errors = validate_fields("mixed", ["theta_max", "amax", "hlhe_degree"], ["500", "1e3", "8"])
    assert "theta_max" in errors and "[0, 100]" in errors["theta_max"]
    assert params["amax"] == 1000 and params["hlhe_degree"] == "8"
    params, errors = validate_fields("mixed", ["theta_max"], ["0.2"])
    assert not errors and params == {"theta_max": 0.2}
    _, errors = validate_fields("mixed", ["theta_max"], ["lots"])
    assert "expected a number in [0, 100]" in errors["theta_max"]
    _, errors = validate_fields("nope", ["x"], ["1"])
    assert "unknown algorithm" in errors[""]


def test_an_empty_field_is_an_error_not_the_default():
    params, errors = validate_fields("mixed", ["theta_max", "amax"], ["", "  "])
    assert params == {}
    assert errors["theta_max"] == "parameter theta_max: required, [0, 100] (default 0.08)"
    assert errors["amax"].startswith("parameter amax: required, [0, inf)") and "\n" not in errors["amax"]
    _, errors = validate_fields("mixed", ["theta_max"], [None])
    assert "required" in errors["theta_max"]


def test_numbers_accept_the_notation_of_the_ranges_shown():
    """Every numeric field of every algorithm takes its own range's bounds as printed (e.g. ``1e+06``)."""
    for a in registry.describe():
        for p in a["params"]:
            if p["kind"] not in ("int", "float"):
                continue
            lo, hi = p["range"][1:-1].split(", ")
            for bound, closed in ((lo, p["range"][0] == "["), (hi, p["range"][-1] == "]")):
                if closed and bound not in ("-inf", "inf"):
                    params, errors = validate_fields(a["name"], [p["name"]], [bound])
                    assert not errors, (a["name"], p["range"], errors)
    params, errors = validate_fields("mixed", ["amax"], ["1e3"])
    assert not errors and params["amax"] == 1000 and isinstance(params["amax"], int)
    assert build_workers_command("1e2") == ("set-workers", {"workers": 100})
    with pytest.raises(CommandError, match=r"enter a worker count in \[1, 1024\]"):
        build_workers_command(" ")


def test_commands_built_from_the_form_are_validated():
    with pytest.raises(CommandError, match="nothing to apply"):
        build_algorithm_command("mixed", dict(MIXED), current_algorithm="mixed", current_params=MIXED)
    kind, payload = build_algorithm_command("mixed", {**MIXED, "theta_max": 0.3}, current_algorithm="mixed",
                                            current_params=MIXED)
    assert kind == "set-param" and payload == {"params": {"theta_max": 0.3}}
    kind, payload = build_algorithm_command("pkg", {}, current_algorithm="mixed", current_params=MIXED)
    assert kind == "set-algorithm" and payload == {"algorithm": "pkg", "params": {}}
    with pytest.raises(CommandError, match="pkg splits keys over workers, and operator join cannot merge"):
        build_algorithm_command("pkg", {}, current_algorithm="mixed", current_params=MIXED, operator="join")
    # a user operator: the run's stored declaration decides
    with pytest.raises(CommandError, match="operator my.ops:Ewma cannot merge"):
        build_algorithm_command("pkg", {}, current_algorithm="mixed", current_params=MIXED, operator="my.ops:Ewma",
                                mergeable=False)
    assert build_algorithm_command("pkg", {}, current_algorithm="mixed", current_params=MIXED,
                                   operator="my.ops:Ewma", mergeable=True)[0] == "set-algorithm"
    assert build_workers_command("5") == ("set-workers", {"workers": 5})
    for bad in (0, "abc", 2.5, 5000):
        with pytest.raises(CommandError, match=r"\[1, 1024\]"):
            build_workers_command(bad)
    # a run's limit is its state partitions (--max-workers), shown next to the box
    assert build_workers_command("8", max_workers=8) == ("set-workers", {"workers": 8})
    with pytest.raises(CommandError, match=r"out of range \[1, 8\] \(the run's --max-workers"):
        build_workers_command(9, max_workers=8)
    with pytest.raises(CommandError, match=r"enter a worker count in \[1, 8\]"):
        build_workers_command("", max_workers=8.0)
    assert workers_range(8.0) == "[1, 8]" and workers_range(None) == "[1, 1024]"


def test_authorizer_and_loopback():
    assert Authorizer().refusal(None) is None
    assert "read-only" in Authorizer(read_only=True).refusal(TOKEN)
    auth = Authorizer(TOKEN)
    assert "required" in auth.refusal(None) and "wrong" in auth.refusal("guess-guess")
    assert auth.refusal(TOKEN) is None and TOKEN not in repr(auth)
    assert is_loopback("127.0.0.1") and is_loopback("::1") and is_loopback("localhost") and is_loopback("127.5.0.1")
    assert not is_loopback("0.0.0.0") and not is_loopback("192.168.1.4") and not is_loopback("example.org")


# ------------------------------------------------------------------------------------ the app over HTTP
def _deps(client):
    return client.get("/_dash-dependencies").get_json()


def _call(client, output_part, inputs, state, changed, host="127.0.0.1"):
    """POST one callback the way dash-renderer does; inputs/state: {"id.prop": value}."""
    dep = next(d for d in _deps(client) if output_part in d["output"])

    def items(specs, values):
        out = []
        for s in specs:
            key = f"{s['id']}.{s['property']}"
            out.append([] if s["id"].startswith("{") else {"id": s["id"], "property": s["property"],
                                                             "value": values.get(key)})
        return out

    outputs = [{"id": o.split(".")[0], "property": o.split(".")[1]}
               for o in dep["output"].strip(".").split("...")]
    body = {"output": dep["output"], "outputs": outputs, "inputs": items(dep["inputs"], inputs),
            "state": items(dep["state"], state), "changedPropIds": [changed]}
    return client.post("/_dash-update-component", json=body, headers={"Host": host})


def _act(client, run, button="workers-plus", token=None, host="127.0.0.1"):
    return _call(client, "control-msg.children", {f"{button}.n_clicks": 1},
                 {"token.value": token, "run-select.value": run, "algo-select.value": "mixed"},
                 f"{button}.n_clicks", host=host)


def test_control_callback_refuses_without_token_on_the_server(store, run):
    app = create_app(store=store, token=TOKEN, host="0.0.0.0")
    assert not app.skewlab.read_only
    client = app.server.test_client()
    page = client.get("/_dash-layout").get_data(as_text=True)
    assert TOKEN not in page and '"token"' in page and "password" in page
    r = _act(client, run, token=None)
    assert r.status_code == 200 and "operator token is required" in r.get_data(as_text=True)
    assert "wrong operator token" in _act(client, run, token="guess-guess").get_data(as_text=True)
    assert store.recent_commands(10) == []
    r = _act(client, run, token=TOKEN)
    assert "submitted" in r.get_data(as_text=True)
    (cmd,) = store.recent_commands(10)
    assert cmd["kind"] == "set-workers" and cmd["payload"] == {"workers": 5} and cmd["status"] == "pending"


def test_read_only_dashboard_disables_and_refuses(store, run):
    app = create_app(store=store, host="0.0.0.0")  # not loopback, no token: read-only
    assert app.skewlab.read_only
    client = app.server.test_client()
    layout = client.get("/_dash-layout").get_json()
    text = json.dumps(layout)
    assert "Read-only dashboard" in text and "without an operator token" in text

    def find(node, id_):
        if isinstance(node, dict):
            if node.get("props", {}).get("id") == id_:
                return node
            return next((x for x in (find(v, id_) for v in node.values()) if x), None)
        if isinstance(node, list):
            return next((x for x in (find(v, id_) for v in node) if x), None)
        return None

    for bid in ("apply-btn", "workers-plus", "workers-minus", "pause-btn", "resume-btn", "algo-select"):
        assert find(layout, bid)["props"]["disabled"] is True
    r = _act(client, run, button="pause-btn")
    assert "read-only" in r.get_data(as_text=True) and store.recent_commands(10) == []
    assert client.get(f"/export/run-{run}.json").status_code == 200  # reading is allowed


def test_loopback_without_token_acts_but_only_for_loopback_hosts(store, run):
    app = create_app(store=store)  # 127.0.0.1
    client = app.server.test_client()
    assert '"type": "hidden"' in json.dumps(client.get("/_dash-layout").get_json())
    assert _act(client, run, host="evil.example:8050").status_code == 403  # DNS rebinding
    r = _act(client, run, button="pause-btn", host="localhost:8050")
    assert "submitted" in r.get_data(as_text=True)
    r = _call(client, "control-msg.children", {"apply-btn.n_clicks": 1},  # the live algorithm, nothing changed
              {"run-select.value": run, "algo-select.value": "mixed-bf"}, "apply-btn.n_clicks")
    assert "nothing to apply" in r.get_data(as_text=True)
    assert [c["kind"] for c in store.recent_commands(10)] == ["pause"]
    with pytest.raises(ParamError, match="at least 8"):
        create_app(store=store, token="short")


def _apply_form(client, run, fields, algo="mixed-bf", drawn_for=None):
    """POST the Apply button with the form's wildcard fields ({name: value}), drawn for ``drawn_for``
    (default: the selected ``algo``)."""
    dep = next(d for d in _deps(client) if "control-msg.children" in d["output"])
    values = {"algo-select.value": algo, "run-select.value": run, "token.value": None}
    state = []
    for s in dep["state"]:
        if s["id"].startswith("{"):
            prop = s["property"]
            pid = {"algo": drawn_for or algo, "name": None, "type": "param-input"}
            state.append([{"id": dict(pid, name=n), "property": prop, "value": (v if prop == "value" else dict(pid, name=n))}
                          for n, v in fields.items()])
        else:
            state.append({"id": s["id"], "property": s["property"], "value": values.get(f"{s['id']}.{s['property']}")})
    inputs = [{"id": i["id"], "property": i["property"], "value": 1 if i["id"] == "apply-btn" else 0}
              for i in dep["inputs"]]
    outputs = [{"id": o.split(".")[0], "property": o.split(".")[1]} for o in dep["output"].strip(".").split("...")]
    body = {"output": dep["output"], "outputs": outputs, "inputs": inputs, "state": state,
            "changedPropIds": ["apply-btn.n_clicks"]}
    return client.post("/_dash-update-component", json=body, headers={"Host": "127.0.0.1"})


def test_apply_with_an_empty_field_sends_nothing(store, run):
    client = create_app(store=store).server.test_client()
    r = _apply_form(client, run, {"theta_max": "", "amax": "3000"})
    text = r.get_data(as_text=True)
    assert r.status_code == 200 and "parameter theta_max: required, [0, 100]" in text, text
    assert store.recent_commands(10) == []
    r = _apply_form(client, run, {"theta_max": "0.3", "amax": "1e3"})
    assert "submitted" in r.get_data(as_text=True)
    (cmd,) = store.recent_commands(10)
    assert cmd["kind"] == "set-param" and cmd["payload"]["params"]["amax"] == 1000


def test_apply_ignores_fields_drawn_for_another_algorithm(store, run):
    """A click that beats the redrawn form (select hash, click at once) carries the previous algorithm's
    fields: they are not hash's, so the switch goes with hash's defaults instead of a refusal."""
    client = create_app(store=store).server.test_client()
    text = _apply_form(client, run, {"distinct": "true"}, algo="hash", drawn_for="wchoices").get_data(as_text=True)
    assert "submitted" in text and "unknown parameter" not in text, text
    (cmd,) = store.recent_commands(10)
    assert cmd["kind"] == "set-algorithm" and cmd["payload"] == {"algorithm": "hash", "params": {}}
    # the fields drawn for the selected algorithm are read as before
    text = _apply_form(client, run, {"theta_max": "500"}, algo="mixed").get_data(as_text=True)
    assert "refused" in text and "[0, 100]" in text, text


def test_second_pause_sends_nothing(store, run):
    client = create_app(store=store).server.test_client()
    assert "not paused: nothing sent" in _act(client, run, button="resume-btn").get_data(as_text=True)
    assert "submitted" in _act(client, run, button="pause-btn").get_data(as_text=True)
    text = _act(client, run, button="pause-btn").get_data(as_text=True)
    assert "already paused or pausing (command #1): nothing sent" in text, text
    assert [c["kind"] for c in store.recent_commands(10)] == ["pause"]
    assert "submitted" in _act(client, run, button="resume-btn").get_data(as_text=True)
    assert "submitted" in _act(client, run, button="pause-btn").get_data(as_text=True)
    assert [c["kind"] for c in store.recent_commands(10)] == ["pause", "resume", "pause"]
    # a rejected pause does not count; a run the engine reports paused is paused
    assert pause_noop("pause", [{"id": 3, "kind": "pause", "status": "rejected"}], "running") is None
    assert pause_noop("pause", [], "paused") == "already paused: nothing sent"
    assert pause_noop("resume", [], "paused") is None


def test_submission_message_follows_the_command(store, run):
    app = create_app(store=store)
    client = app.server.test_client()
    r = _act(client, run)
    resp = r.get_json()["response"]
    cid = resp["cmd-signal"]["data"]
    assert "pending" in resp["control-msg"]["className"].split()

    def follow(cls):
        r = _call(client, "control-msg.children@", {"commands.children": []},
                  {"cmd-signal.data": cid, "control-msg.className": cls, "run-select.value": run}, "commands.children")
        return r.get_json()["response"]  # {}: nothing changes

    assert follow("control-msg ok pending") == {}  # still pending
    store.mark_command(cid, "applied", applied_batch=30)
    record(store, run, 30, n_workers=5, events=[{"kind": "workers", "command_id": cid,
                                                  "detail": {"previous": 4, "workers": 5}}])
    app.skewlab.data.cache.clear()
    resp = follow("control-msg ok pending")
    assert resp["control-msg"]["children"] == f"command #{cid} set-workers applied at interval 30"
    assert "pending" not in resp["control-msg"]["className"]
    assert follow("control-msg error") == {}  # a later error line is left alone
    cid2 = store.submit_command("set-workers", {"workers": 0}, run_id=run)
    store.mark_command(cid2, "rejected", reason="set-workers: workers 0 out of range [1, 1024]")
    cid = cid2
    resp = follow("control-msg ok pending")
    assert resp["control-msg"]["children"] == (f"command #{cid2} set-workers rejected: "
                                              "set-workers: workers 0 out of range [1, 1024]")
    assert "error" in resp["control-msg"]["className"]


def test_workers_field_shows_its_range(store, run):
    text = json.dumps(create_app(store=store).server.test_client().get("/_dash-layout").get_json())
    assert '"[1, 1024]"' in text


def test_tick_callback_returns_patches_not_redraws(store, run):
    app = create_app(store=store)
    client = app.server.test_client()
    cursor = {"run_id": run, "last_interval": 29, "last_event_id": 10**6, "points": 30, "ops": 2, "bars": True,
              "log": [], "mig": []}
    record(store, run, 30)
    app.skewlab.data.cache.clear()
    r = _call(client, "fig-imbalance.figure", {"tick.n_intervals": 5, "run-select.value": run,
                                                "worker-view.value": "auto"},
              {"cursor.data": cursor, "imb-metrics.value": ["imbalance"], "tick.interval": 1000}, "tick.n_intervals")
    assert r.status_code == 200
    resp = r.get_json()["response"]
    fig = resp["fig-imbalance"]["figure"]
    assert fig.get("__dash_patch_update") and fig["operations"][0]["operation"] == "Extend"
    assert resp["fig-workers"]["figure"].get("__dash_patch_update")
    assert resp["cursor"]["data"]["last_interval"] == 30 and resp["cursor"]["data"]["points"] == 31


def test_a_tick_that_overtakes_a_view_change_redraws_in_the_new_view(store, run):
    """Dash drops the response of a call overtaken by a newer one: the click on "all" may never be
    drawn, so a tick whose cursor was drawn in another view than the one selected draws again."""
    app = create_app(store=store)
    client = app.server.test_client()
    cursor = {"run_id": run, "last_interval": 29, "last_event_id": 10**6, "points": 30, "ops": 2, "bars": True,
              "log": [], "mig": [], "status": "running", "view": "auto"}
    r = _call(client, "fig-workers.figure", {"tick.n_intervals": 6, "run-select.value": run,
                                              "worker-view.value": "all"},
              {"cursor.data": cursor, "imb-metrics.value": ["imbalance"], "tick.interval": 1000}, "tick.n_intervals")
    resp = r.get_json()["response"]
    assert not resp["fig-workers"]["figure"].get("__dash_patch_update"), resp["fig-workers"]
    assert resp["cursor"]["data"]["view"] == "all"
    same = dict(resp["cursor"]["data"])
    r = _call(client, "fig-workers.figure", {"tick.n_intervals": 7, "run-select.value": run,
                                              "worker-view.value": "all"},
              {"cursor.data": same, "imb-metrics.value": ["imbalance"], "tick.interval": 1000}, "tick.n_intervals")
    assert "fig-workers" not in r.get_json()["response"]  # drawn in that view already: nothing to redraw


def test_a_run_without_tuples_says_why_and_draws_once_data_arrives(store):
    """Before its first batch the page says it waits for one (not an empty chart or a shadow hint);
    batches without tuples say the source sent nothing; the first tick with tuples redraws in full."""
    rid = store.create_run("mixed", MIXED, n_workers=4, config={"interval": 1.0, "operator": "count", "shadow": None})
    app = create_app(store=store)
    client = app.server.test_client()
    page = json.dumps(client.get("/_dash-layout").get_json())
    assert f"waiting for the first batch of run {rid}" in page and "--shadow" not in page
    store.record_interval(rid, IntervalRecord.from_parts(batch_id=0, interval=0, metrics={"tuples": 0, "algorithm": "mixed", "n_workers": 4},
                          workers=[{"worker": w, "tuples": 0, "cost": 0.0} for w in range(4)]))
    app.skewlab.data.cache.clear()
    page = json.dumps(client.get("/_dash-layout").get_json())
    assert f"run {rid}: 1 batch(es) so far, no tuples yet" in page
    waiting = {"run_id": rid, "last_interval": 0, "last_event_id": 0, "points": 1, "ops": 0, "bars": False,
               "log": [], "mig": [], "waiting": True}
    record(store, rid, 1)
    app.skewlab.data.cache.clear()
    r = _call(client, "fig-imbalance.figure", {"tick.n_intervals": 2, "run-select.value": rid,
                                                "worker-view.value": "auto"},
              {"cursor.data": waiting, "imb-metrics.value": ["imbalance"], "tick.interval": 1000}, "tick.n_intervals")
    resp = r.get_json()["response"]
    fig = resp["fig-imbalance"]["figure"]
    assert not fig.get("__dash_patch_update") and fig["data"], fig  # a full figure, not a patch of the message
    assert "waiting" not in resp["cursor"]["data"]
    store.finish_run(rid, "failed", note="streaming query failed: boom")
    other = store.create_run("hash", {}, n_workers=2, config={"interval": 1.0})
    store.finish_run(other, "failed", note="streaming query failed: no such topic")
    app.skewlab.data.cache.clear()
    assert f"run {other} failed: streaming query failed: no such topic" in json.dumps(
        client.get("/_dash-layout").get_json())


def test_export_routes(store, run):
    client = create_app(store=store).server.test_client()
    r = client.get(f"/export/run-{run}.json")
    data = json.loads(r.data)
    assert data["format"] == "skewlab-run" and len(data["interval_metrics"]) == 30
    assert "attachment" in r.headers["Content-Disposition"]
    z = zipfile.ZipFile(io.BytesIO(client.get(f"/export/run-{run}-csv.zip").data))
    im = z.read(f"skewlab-run-{run}/interval_metrics.csv").decode()
    assert im.splitlines()[0].startswith("batch_id,interval") and len(im.splitlines()) == 31
    assert client.get("/export/run-999.json").status_code == 404


def test_page_lists_runs_and_starts_with_data(store, run):
    client = create_app(store=store).server.test_client()
    text = json.dumps(client.get("/_dash-layout").get_json())
    assert f"#{run} mixed" in text and "skewlab-imbalance" in text and "Apply parameters" in text
    empty = create_app(store=connect("sqlite://")).server.test_client()
    assert "no runs in the database yet" in json.dumps(empty.get("/_dash-layout").get_json())


def test_a_failed_run_is_shown_failed_with_its_reason(store, run):
    store.finish_run(run, "failed", note="streaming query failed: topic no-such-topic does not exist")
    client = create_app(store=store).server.test_client()
    text = json.dumps(client.get("/_dash-layout").get_json())
    assert "failed: streaming query failed: topic no-such-topic does not exist" in text
    assert "finished" not in text


def test_page_uses_the_vendored_plotly_basic_bundle_and_restores_native_builtins(store, run):
    """Issue #5, "Speed": the page script order that makes dcc.Graph use the small plotly.js bundle."""
    import re
    from pathlib import Path

    from plotly.offline import get_plotlyjs_version

    import skewlab.dashboard.app as A

    client = create_app(store=store).server.test_client()
    page = client.get("/").get_data(as_text=True)
    srcs = re.findall(r'<script src="([^"]+)"', page)
    names = [s.split("?")[0].rsplit("/", 1)[-1] for s in srcs]
    bundle = [n for n in names if n.startswith("plotly-basic-")]
    assert len(bundle) == 1, names
    # natives saved before the polyfill, put back after it and before plotly.js and the renderer
    poly = next(i for i, n in enumerate(names) if n.startswith("polyfill@"))
    renderer = next(i for i, n in enumerate(names) if n.startswith("dash_renderer"))
    assert poly < names.index("0-native-builtins.js") < names.index(bundle[0]) < renderer
    assert page.index("window.__skewlabNatives=") < page.index(srcs[poly])
    assert "package_data/plotly.min.js" not in page  # the full bundle is not a page script
    for name in ("_dash-layout", "_dash-dependencies", "_dash-component-suites/dash/dcc/async-graph.js"):
        assert f'<link rel="preload" href="/{name}"' in page
    # the vendored file: plotly.js's basic partial bundle, same major version as the plotly package's,
    # and it has every trace type the dashboard draws
    path = Path(A.ASSETS) / bundle[0]
    head = path.read_text(encoding="utf-8")[:300]
    version = re.search(r"plotly\.js \(basic - minified\) v(\d+)\.(\d+)\.(\d+)", head)
    assert version and bundle[0] == f"plotly-basic-{'.'.join(version.groups())}.min.js"
    assert version.group(1) == get_plotlyjs_version().split(".")[0] and "MIT" in head
    D = DashboardData(store)
    d = D.load(run)
    figs = [F.time_figure(n, d) for n in F.TIME_FIGURES] + [
        F.worker_load_figure(d), F.shadow_figure(d), F.hot_keys_figure(d), F.compare_figure(None, None),
        F.worker_detail_figure(D.worker_history(run, 0, d["last_interval"]), 0.1)]
    used = {t.get("type", "scatter") for f in figs for t in f["data"]}
    assert used and used <= {"scatter", "bar", "pie"}, used
    # fingerprinted assets are cached like Dash's own component suites; other responses are not
    r = client.get(next(s for s in srcs if bundle[0] in s))
    assert r.status_code == 200 and r.headers["Cache-Control"] == "public, max-age=31536000"
    assert "max-age=31536000" not in (client.get("/assets/style.css").headers.get("Cache-Control") or "")
    assert "max-age" not in (client.get("/_dash-layout").headers.get("Cache-Control") or "")


def test_load_bands_equal_numpy_quantiles_per_interval():
    rng = np.random.default_rng(7)
    for _ in range(40):
        rows = [{"interval": int(iv), "cost": float(c)}
                for iv in rng.choice(50, rng.integers(1, 12), replace=False)
                for c in rng.choice([0.0, 3.0, 1e9, *rng.gamma(2.0, 50.0, 4)], rng.integers(1, 9))]
        rng.shuffle(rows)
        b = load_bands(rows)
        assert b["interval"] == sorted({r["interval"] for r in rows})
        for k, iv in enumerate(b["interval"]):
            ld = np.array([r["cost"] for r in rows if r["interval"] == iv])
            q = np.quantile(ld, [0.0, 0.25, 0.5, 0.75, 1.0])
            got = [b[c][k] for c in ("min", "p25", "median", "p75", "max")]
            assert got == pytest.approx(q.tolist(), rel=1e-12) and got[0] == ld.min() and got[-1] == ld.max()
            assert b["mean"][k] == pytest.approx(ld.mean(), rel=1e-12)


def test_warm_up_serves_the_first_page_in_process_and_never_raises(store, run, monkeypatch):
    from skewlab.dashboard.commands import _warm_up

    app = create_app(store=store)
    _warm_up(app)
    assert run in app.skewlab.data._states  # the run's event history was read before any browser came
    for warm in (False, True):
        broken = create_app(store=store)
        monkeypatch.setattr(broken.skewlab.data, "runs", lambda *a, **k: 1 / 0)
        broken.server.config["PROPAGATE_EXCEPTIONS"] = True  # the error reaches the caller
        if warm:
            _warm_up(broken)  # swallowed: left for the page request to report
        else:
            with pytest.raises(ZeroDivisionError):
                broken.server.test_client().get("/")


def test_importing_the_dashboard_does_not_import_pyspark():
    code = ("import sys, skewlab.dashboard.app, skewlab.dashboard.commands; "
            "bad = [m for m in sys.modules if m.startswith(('pyspark', 'skewlab.engine.runtimes.spark'))]; "
            "print(bad); sys.exit(1 if bad else 0)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stdout + out.stderr


# ------------------------------------------------------------------------------------ CLI
def _parser():
    from skewlab.dashboard.commands import add_commands
    from skewlab.cli import Parser

    p = Parser(prog="skewlab")
    add_commands(p.add_subparsers(dest="command", required=True, parser_class=Parser))
    return p


def test_cli_parses_and_refuses_bad_values(tmp_path, monkeypatch):
    from skewlab.shared import UsageError

    p = _parser()
    a = p.parse_args(["dashboard", "--db", f"sqlite:///{tmp_path}/x.db"])
    assert (a.host, a.port, a.token, a.read_only) == ("127.0.0.1", 8050, None, False)
    a = p.parse_args(["demo", "--port", "0", "--duration", "5"])
    assert a.port == 0 and a.duration == 5.0 and a.db is None
    with pytest.raises(UsageError, match=r"\[0, 65535\]"):
        a = p.parse_args(["dashboard", "--port", "70000"])
        a.func(a)
    with pytest.raises(UsageError, match="> 0 seconds"):
        a = p.parse_args(["demo", "--duration", "-1"])
        a.func(a)
    with pytest.raises(UsageError, match="unsupported database"):
        a = p.parse_args(["dashboard", "--db", "mysql://x/y"])
        a.func(a)
    monkeypatch.setenv("SKEWLAB_DASHBOARD_TOKEN", "short")
    with pytest.raises(ParamError, match="at least 8"):
        a = p.parse_args(["dashboard", "--db", f"sqlite:///{tmp_path}/x.db", "--port", "0"])
        a.func(a)


def test_port_in_use_is_a_usage_error(store):
    import socket

    from skewlab.dashboard.commands import _make_server
    from skewlab.shared import UsageError

    app = create_app(store=store)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen(1)
        port = s.getsockname()[1]
        with pytest.raises(UsageError, match=f"^port {port} is in use on 127.0.0.1 "):
            _make_server(app, "127.0.0.1", port)


def test_gunicorn_factory_reads_the_environment(tmp_path, monkeypatch):
    from skewlab.dashboard.app import server

    monkeypatch.setenv("SKEWLAB_DB_URL", f"sqlite:///{tmp_path}/g.db")
    monkeypatch.delenv("SKEWLAB_DASHBOARD_TOKEN", raising=False)
    wsgi = server()
    assert "Read-only dashboard" in wsgi.test_client().get("/_dash-layout").get_data(as_text=True)
    monkeypatch.setenv("SKEWLAB_DASHBOARD_TOKEN", TOKEN)
    page = server().test_client().get("/_dash-layout").get_data(as_text=True)
    assert "Read-only" not in page and "password" in page and TOKEN not in page


def test_worker_box_shows_the_runs_state_partitions():
    """The range next to the worker box is the selected run's --max-workers (from its stored config)."""
    from skewlab.dashboard.app import _controls_outputs
    from skewlab.dashboard.data import _run_summary

    summary = _run_summary({"id": 3, "status": "running", "config": {"max_workers": 12, "operator": "count"}})
    assert summary["max_workers"] == 12
    out = _controls_outputs({"algorithm": "hash", "params": {}, "n_workers": 6, "max_workers": summary["max_workers"]},
                            read_only=False)
    assert out["workers-range"] == "[1, 12]" and out["workers-value"] == "6"
    assert _run_summary({"id": 4, "status": "running", "config": {}})["max_workers"] is None


def test_algorithm_picker_lists_the_runs_user_grouping():
    """A run on a user's grouping (``package.module:Class``): the picker lists it beside the registry's,
    selected, with the form of its own declared parameters, validated by them; one that does not load
    in the dashboard is listed with the reason and cannot be applied."""
    from skewlab.dashboard.app import _controls_outputs
    from skewlab.dashboard.controls import build_algorithm_command, validate_fields

    spec = "examples.bounded_loads:BoundedLoads"
    cs = {"run_id": 3, "status": "running", "algorithm": spec, "params": {"epsilon": 0.25}, "n_workers": 4}
    out = _controls_outputs(cs, read_only=False)
    values = [o["value"] for o in out["algo-options"]]
    assert values[:2] == ["hash", "consistent"] and values[-1] == spec and out["algo-value"] == spec
    assert "bounded loads" in out["algo-summary"] and out["apply-label"] == "Apply parameters"
    assert "epsilon" in str(out["param-form"]) and not out["apply-disabled"]
    assert validate_fields(spec, ["epsilon"], ["0"])[1] == {"epsilon": "parameter epsilon: 0 is out of range (0, 10]"}
    assert build_algorithm_command(spec, {"epsilon": 0.1}, current_algorithm=spec, current_params={"epsilon": 0.25}) \
        == ("set-param", {"params": {"epsilon": 0.1}})
    assert spec not in [o["value"] for o in _controls_outputs({**cs, "algorithm": "hash"}, False)["algo-options"]]
    broken = _controls_outputs({**cs, "algorithm": "examples.bounded_loads:Gone"}, read_only=False)
    assert broken["algo-options"][-1]["value"] == "examples.bounded_loads:Gone" and broken["apply-disabled"]
    assert "cannot load it in the dashboard" in broken["algo-summary"] and "has no Gone" in broken["algo-summary"]


def test_runs_table_names_each_runs_operator():
    from skewlab.dashboard.layout import runs_table

    rows = [{"id": 2, "config": {"operator": "examples.ewma_rate:EwmaRate"}, "status": "running"},
            {"id": 1, "config": {}, "status": "finished"}]
    text = str(runs_table(rows, "/export/"))
    assert "'operator'" in text and "examples.ewma_rate:EwmaRate" in text and "'count'" in text


def test_form_refuses_a_split_key_switch_for_a_non_mergeable_operator(store):
    """The run's operator (a user's, stored as not mergeable) cannot serve pkg: the form says why and
    sends nothing; a key grouping is still sent.  The same form on a count run sends pkg."""
    user = store.create_run("mixed", MIXED, n_workers=4, config={
        "interval": 1.0, "operator": "examples.ewma_rate:EwmaRate", "operator_mergeable": False})
    counting = store.create_run("mixed", MIXED, n_workers=4, config={"interval": 1.0, "operator": "count"})
    for rid in (user, counting):
        for i in range(3):
            record(store, rid, i)
    client = create_app(store=store).server.test_client()
    text = _apply_form(client, user, {}, algo="pkg").get_data(as_text=True)
    assert "refused" in text and "pkg splits keys over workers, and operator examples.ewma_rate:EwmaRate " \
                                  "cannot merge" in text, text
    assert store.recent_commands(10) == []
    assert "submitted" in _apply_form(client, user, {}, algo="hash").get_data(as_text=True)
    assert "submitted" in _apply_form(client, counting, {}, algo="pkg").get_data(as_text=True)
    assert [c["payload"]["algorithm"] for c in store.recent_commands(10)] == ["pkg", "hash"]


def test_the_engines_own_switch_says_why_in_its_hover():
    """The interim hash routing of a new run on a cold cache and the switch to its grouping (no
    command): the hover names the reason the engine recorded, and no command number."""
    ev = {"kind": "algorithm", "interval": 0, "command_id": None,
          "detail": {"previous": "wchoices", "algorithm": "hash", "reason": "the routing kernels of wchoices are compiling"}}
    label, hover = F.event_label(ev)
    assert label == "→ hash" and hover.endswith("wchoices → hash (the routing kernels of wchoices are compiling)")
    _, by_command = F.event_label({**ev, "command_id": 3, "detail": {"previous": "hash", "algorithm": "mixed"}})
    assert by_command.endswith("hash → mixed (command #3)")
