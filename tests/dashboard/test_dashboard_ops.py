"""What an operator needs to see (issue 13, section 3): limits exceeded and infeasible plans, the
what-if over every algorithm the run used, exports with CLI commands, the live settings and one
interval numbering in ``skewlab control status``, per-worker history, and metrics that do not
mislead (replication of empty intervals, small rates, throughput while paused)."""

from __future__ import annotations

import json

import numpy as np
import pytest

pytest.importorskip("dash")

from skewlab.dashboard import figures as F  # noqa: E402
from skewlab.dashboard.app import create_app  # noqa: E402
from skewlab.dashboard.data import DashboardData, shadow_summary, summarize  # noqa: E402
from skewlab.dashboard.layout import commands_view, kpi_cards, migration_table  # noqa: E402
from skewlab.engine.algorithms import registry  # noqa: E402
from skewlab.cli import main  # noqa: E402
from skewlab.engine.control.metrics import format_rate  # noqa: E402
from skewlab.storage import IntervalRecord, connect  # noqa: E402
from tests.pg import pg_server, pg_url  # noqa: E402,F401  (pytest fixtures)
from tests.dashboard.test_dashboard import _call, record, run, store  # noqa: E402,F401  (fixtures: 30 intervals of mixed)

MIXED = registry.validate_params("mixed", {})


def _text(component) -> str:
    return json.dumps(component.to_plotly_json() if hasattr(component, "to_plotly_json") else component,
                      default=lambda o: o.to_plotly_json(), ensure_ascii=False)


def _kpi(cards, metric):
    return next(c for c in cards if getattr(c, "id", None) == f"kpi-{metric}")


# ------------------------------------------------------------------------------------ Amax / infeasible
def _amax_run(store, *, feasible, note, entries=245, amax=50):
    rid = store.create_run("mixed", {**MIXED, "theta_max": 0.02, "amax": amax}, n_workers=12)
    detail = {"keys": 40, "state_moved": 10.0, "migration_cost": 0.1, "feasible": feasible, "note": note}
    store.record_interval(rid, IntervalRecord.from_parts(0, 0, {"tuples": 100, "n_workers": 12, "routing_table_size": entries,
                                      "feasible": feasible, "note": note},
                          routing={"entries": entries, "amax": amax},
                          workers=[{"worker": w, "tuples": 10, "cost": 10.0} for w in range(12)],
                          events=[{"kind": "rebalance", "detail": detail}]))
    return rid


def test_amax_exceeded_turns_the_routing_kpi_red_and_shows_the_plan_note(store):
    note = "θ=0.2497 exceeds θmax=0.02; routing table has 245 entries > Amax=50"
    d = DashboardData(store).load(_amax_run(store, feasible=False, note=note))
    cards = kpi_cards(d)
    assert "bad" in _kpi(cards, "routing_table_size").className
    alert = next(c for c in cards if getattr(c, "id", None) == "kpi-plan-alert")
    assert note in _text(alert) and "plan of interval 0 infeasible" in _text(alert)
    assert "entries > Amax" in _text(alert) and _text(alert).count("245 entries") == 1


def test_a_table_over_amax_is_red_even_when_the_plan_said_feasible(store):
    d = DashboardData(store).load(_amax_run(store, feasible=True, note=""))
    cards = kpi_cards(d)
    assert "bad" in _kpi(cards, "routing_table_size").className
    assert "routing table has 245 entries > Amax=50" in _text(cards)


def test_within_limits_nothing_is_red(store):
    d = DashboardData(store).load(_amax_run(store, feasible=True, note="", entries=20))
    cards = kpi_cards(d)
    assert "bad" not in _kpi(cards, "routing_table_size").className
    assert all(getattr(c, "id", None) != "kpi-plan-alert" for c in cards)


# ------------------------------------------------------------------------------------ what-if
def test_what_if_lists_the_live_algorithm_once():
    live = [{"algorithm": "dkg", "imbalance": 0.1, "replication": 1.5, "migration_cost": 0.0}]
    shadow = [{"algorithm": a, "imbalance": 0.2, "replication": 1.0, "migration_cost": 0.0}
              for a in ("hash", "dkg", "mixed")]
    rows = shadow_summary(shadow, live)
    assert [(r["algorithm"], r["live"]) for r in rows] == [("dkg", True), ("hash", False), ("mixed", False)]
    names = F.shadow_figure({"shadow": rows})["data"][0]["y"]
    assert sorted(names) == ["dkg (live)", "hash", "mixed"]


def test_the_engine_keeps_shadowing_every_algorithm_the_run_switched_away_from(tmp_path):
    pytest.importorskip("pyspark")
    from skewlab.engine.runtimes.spark.batch_driver import status_line
    from skewlab.engine.runtimes.spark.engine import EngineConfig, SparkEngine

    db = f"sqlite:///{tmp_path / 'db.sqlite'}"
    eng = SparkEngine(EngineConfig(db=db, algorithm="mixed", workers=4, checkpoint=str(tmp_path / "ck")),
                      log=lambda _m: None)
    try:
        assert "mixed" not in eng.snapshot.shadow.names
        for algo in ("hash", "dchoices", "dkg"):
            eng.store.submit_command("set-algorithm", {"algorithm": algo, "params": {}})
            marks, _ = eng.driver.apply_commands(eng.snapshot.last_batch + 1)
            assert [m[1] for m in marks] == ["applied"]
        # every algorithm switched away from (the default shadows join once their kernels are compiled,
        # which only a running engine does: tests/engine/test_shadow.py)
        assert {"mixed", "hash", "dchoices"} <= set(eng.snapshot.shadow.names)
        assert eng.snapshot.shadow.controllers["mixed"].planner.p == MIXED
        line = status_line(0, {"algorithm": "dkg", "workers": 4, "tuples": 0, "imbalance": 0.0,
                               "replication": 0.0, "routing_table_size": 0, "migration_cost": 0.0},
                           IntervalRecord(0, 0, throughput=850.0, batch_latency_ms=12.0), {})
        assert "850 tuples/s" in line and "repl=–" in line and "0k" not in line
    finally:
        eng.store.close()


# ------------------------------------------------------------------------------------ exports
def test_exports_include_commands_sent_with_skewlab_control(store, run):
    cid = store.submit_command("set-workers", {"workers": 6})  # what `skewlab control` sends: run_id NULL
    record(store, run, 30, events=[{"kind": "workers", "detail": {"previous": 4, "workers": 6}, "command_id": cid}])
    store.mark_command(cid, "applied", applied_batch=31)  # as engines before this fix did: no run_id
    other = store.create_run("hash", {}, n_workers=2)
    stray = store.submit_command("pause")  # pending, applied by no run yet: belongs to no export
    assert [c["id"] for c in store.export_run(run)["commands"]] == [cid]
    assert store.export_run(other)["commands"] == []
    client = create_app(store=store).server.test_client()
    exported = json.loads(client.get(f"/export/run-{run}.json").data)
    assert [c["id"] for c in exported["commands"]] == [cid]
    assert stray not in [c["id"] for c in exported["commands"]]
    assert f"\n{cid}," in store.export_csv(run)["commands"]


def test_a_command_marked_by_the_engine_belongs_to_its_run(store, run):
    cid = store.submit_command("pause")
    store.mark_command(cid, "applied", applied_batch=30, run_id=run)
    assert store.get_command(cid)["run_id"] == run
    assert [c["id"] for c in store.export_run(run)["commands"]] == [cid]


@pytest.fixture(params=["sqlite", "postgres"])
def any_store(request, tmp_path):
    url = f"sqlite:///{tmp_path / 'any.sqlite'}" if request.param == "sqlite" else request.getfixturevalue("pg_url")
    s = connect(url)
    yield s
    s.close()


def test_export_and_applied_interval_queries_on_both_backends(any_store):
    s = any_store
    rid = s.create_run("mixed", MIXED, n_workers=4)
    cid = s.submit_command("pause")
    for i in range(3):
        s.record_interval(rid, IntervalRecord.from_parts(7 + i, i, {"tuples": 1}, events=[{"kind": "pause", "detail": {}, "command_id": cid}]
                          if i == 1 else None))
    s.mark_command(cid, "applied", applied_batch=8)
    later = s.submit_command("resume")
    s.mark_command(later, "applied", applied_batch=12, run_id=rid)
    assert sorted(c["id"] for c in s.export_run(rid)["commands"]) == [cid, later]
    got = {c["id"]: c["applied_interval"] for c in s.recent_commands(run_id=rid)}
    assert got == {cid: None, later: 5}  # the legacy global mark names no run; batch 12 = interval 2 + 3
    assert s.import_run(s.export_run(rid)) > rid


def test_a_command_event_is_numbered_with_the_interval_it_takes_effect(any_store):
    s = any_store
    rid = s.create_run("mixed", MIXED, n_workers=4)
    cid = s.submit_command("set-workers", {"workers": 5})
    s.record_interval(rid, IntervalRecord.from_parts(7, 0, {"tuples": 1}, events=[
        {"kind": "workers", "detail": {"previous": 4, "workers": 5}, "command_id": cid, "interval": 1},
        {"kind": "rebalance", "detail": {}}]))
    s.mark_command(cid, "applied", applied_batch=8, run_id=rid)
    assert [(e["kind"], e["interval"]) for e in s.events(rid)] == [("workers", 1), ("rebalance", 0)]
    assert s.recent_commands(run_id=rid)[0]["applied_interval"] == 1
    st = DashboardData(s).state(rid)
    assert st.n_workers == 5 and [e["interval"] for e in st.op_events] == [1]


# ------------------------------------------------------------------------------------ skewlab control
def _db(tmp_path):
    return f"sqlite:///{tmp_path / 'ops.sqlite'}"


def test_control_status_shows_the_live_settings_not_the_start_ones(tmp_path, capsys):
    s = connect(_db(tmp_path))
    rid = s.create_run("mixed", MIXED, n_workers=8)
    s.record_interval(rid, IntervalRecord.from_parts(0, 0, {"tuples": 10, "n_workers": 8}))
    s.record_interval(rid, IntervalRecord.from_parts(1, 1, {"tuples": 10, "n_workers": 8}, events=[
        {"kind": "algorithm", "detail": {"previous": "mixed", "algorithm": "pkg", "params": {}}},
        {"kind": "workers", "detail": {"previous": 8, "workers": 6}},
    ]))
    s.close()
    assert main(["control", "--db", _db(tmp_path), "status"]) == 0
    head = capsys.readouterr().out.splitlines()[0]
    assert "algorithm=pkg" in head and "workers=6" in head
    # set-param is checked against the live algorithm (pkg has no θmax), in one line
    assert main(["control", "--db", _db(tmp_path), "set-param", "theta_max=0.1"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("skewlab: error: set-param") and "theta_max" in err and len(err.splitlines()) == 1
    assert connect(_db(tmp_path)).recent_commands() == []


def test_control_targets_the_running_run_not_only_the_newest(tmp_path, capsys):
    s = connect(_db(tmp_path))
    live = s.create_run("dchoices", registry.validate_params("dchoices", {}), n_workers=4)
    s.create_run("hash", {}, n_workers=2, status="finished")
    s.close()
    assert main(["control", "--db", _db(tmp_path), "status"]) == 0
    assert capsys.readouterr().out.startswith(f"run {live} ")
    assert main(["control", "--db", _db(tmp_path), "set-param", "epsilon=0.01"]) == 0


def test_one_interval_numbering_for_the_cli_and_the_page(tmp_path, capsys):
    s = connect(_db(tmp_path))
    rid = s.create_run("mixed", MIXED, n_workers=4)
    for i in range(5):  # a restarted query: Spark's batch ids run ahead of the run's intervals
        s.record_interval(rid, IntervalRecord.from_parts(20 + i, i, {"tuples": 10, "n_workers": 4}))
    done = s.submit_command("set-workers", {"workers": 5})
    nxt = s.submit_command("set-workers", {"workers": 6})
    s.mark_command(done, "applied", applied_batch=22, run_id=rid)  # took effect from batch 22 = interval 2
    s.mark_command(nxt, "applied", applied_batch=25, run_id=rid)  # from the next batch, not recorded yet
    rows = {c["id"]: c for c in DashboardData(s).commands(rid)}
    assert rows[done]["interval"] == 2 and rows[nxt]["interval"] == 5
    page = _text(commands_view(list(rows.values())))
    s.close()
    assert main(["control", "--db", _db(tmp_path), "status"]) == 0
    out = capsys.readouterr().out
    for cid, iv in ((done, 2), (nxt, 5)):
        line = next(x for x in out.splitlines() if x.startswith(f"#{cid} "))
        assert line.rstrip().endswith(f"applied at interval {iv}")
        assert f"applied at interval {iv}" in page
    assert "batch" not in out


# ------------------------------------------------------------------------------------ per-worker history
def test_worker_heat_map_of_load_and_task_time(store):
    rid = store.create_run("mixed", MIXED, n_workers=3)
    for i in range(4):
        store.record_interval(rid, IntervalRecord.from_parts(i, i, {"tuples": 60, "n_workers": 3}, workers=[
            {"worker": w, "tuples": 10 * (w + 1), "cost": 10.0 * (w + 1), "processing_seconds": 0.01 * (w + 1)}
            for w in range(3)]))
    D = DashboardData(store)
    d = D.load(rid)
    heat = d["heat"]
    assert len(heat["interval"]) == 12 and heat["worker"][:3] == [0, 1, 2]
    assert heat["relative"][:3] == pytest.approx([0.5, 1.0, 1.5]) and heat["seconds"][2] == pytest.approx(0.03)
    assert heat["time_relative"][:3] == pytest.approx([0.5, 1.0, 1.5])
    fig = F.worker_heat_figure(d)
    assert [len(t["x"]) for t in fig["data"][:2]] == [12, 12] and fig["data"][2]["marker"]["showscale"]
    assert fig["data"][0]["marker"]["color"][:3] == [F._heat_color(v) for v in (0.5, 1.0, 1.5)]
    assert (F._heat_color(0.0), F._heat_color(1.0), F._heat_color(9.0)) == ("#1d4ed8", "#f8fafc", "#dc2626")
    assert fig["data"][0]["customdata"][2][1:] == ["30", "1.50", "30 ms", "1.50", "–"]  # no state bytes
    assert fig["data"][1]["base"][:3] == [-0.5, 0.5, 1.5] and "not reported" not in json.dumps(fig["layout"])
    json.dumps(fig)
    cursor = {"run_id": rid, "last_interval": 3, "last_event_id": d["last_event_id"], "points": 4}
    store.record_interval(rid, IntervalRecord.from_parts(4, 4, {"tuples": 30, "n_workers": 3},
                          workers=[{"worker": w, "tuples": 10, "cost": 10.0} for w in range(3)]))  # no timings
    D.cache.clear()
    ops = F.worker_heat_patch(D.load(rid, cursor)).to_plotly_json()["operations"]
    ext = {tuple(o["location"]): o["params"]["value"] for o in ops}
    assert ext[("data", 0, "x")] == [4, 4, 4] and ("data", 1, "x") not in ext  # no task time: no cells


def test_worker_heat_map_says_when_task_time_is_missing(store, run):
    fig = F.worker_heat_figure(DashboardData(store).load(run))
    assert "not reported" in json.dumps(fig["layout"]) and fig["data"][1]["x"] == []


def test_the_heat_map_is_on_the_page_and_extended_by_ticks(store, run):
    app = create_app(store=store)
    client = app.server.test_client()
    assert "fig-heat" in json.dumps(client.get("/_dash-layout").get_json())
    cursor = {"run_id": run, "last_interval": 29, "last_event_id": 10**6, "points": 30, "ops": 0, "bars": True,
              "log": [], "mig": [], "status": "running"}
    record(store, run, 30)
    app.skewlab.data.cache.clear()
    r = _call(client, "fig-heat.figure", {"tick.n_intervals": 3, "run-select.value": run, "worker-view.value": "auto"},
              {"cursor.data": cursor, "imb-metrics.value": ["imbalance"], "tick.interval": 1000}, "tick.n_intervals")
    heat = r.get_json()["response"]["fig-heat"]["figure"]
    assert heat.get("__dash_patch_update") and heat["operations"][0]["operation"] == "Extend"


# ------------------------------------------------------------------------------------ state bytes, bytes moved
def _state_run(store, intervals=4):
    """A run whose engine reports state bytes per worker, and bytes moved / batches held per migration
    (every other interval; interval 2 has two migrations)."""
    rid = store.create_run("mixed", MIXED, n_workers=3)
    for i in range(intervals):
        migrations = None
        if i % 2 == 0:
            migrations = [{"keys_moved": 2, "state_moved": 4.0, "pause_ms": 1.5, "bytes_moved": 1_200_000,
                           "pause_batches": 1}]
        if i == 2:
            migrations.append({"keys_moved": 1, "state_moved": 1.0, "pause_ms": 0.5, "bytes_moved": 300_000,
                               "pause_batches": 3})
        store.record_interval(rid, IntervalRecord.from_parts(i, i, {"tuples": 60, "n_workers": 3}, workers=[
            {"worker": w, "tuples": 10 * (w + 1), "cost": 10.0 * (w + 1), "processing_seconds": 0.01,
             "state_bytes": [1500, 3_000_000, None][w]} for w in range(3)],
            migrations=migrations,
            events=[{"kind": "rebalance", "detail": {"keys": 2, "state_moved": 4.0}}] if migrations else None))
    return rid


def test_byte_sizes_read_as_kilo_and_megabytes():
    cases = {0: "0 B", 999: "999 B", 1000: "1 kB", 4096: "4.1 kB", 999_999: "1 MB", 12_345_678: "12.3 MB",
             3 * 2**31: "6.44 GB", 2 * 10**12: "2 TB", None: "–"}
    assert {n: F.format_bytes(n) for n in cases} == cases
    tops = {1: 1, 0: 1, 1500: 2000, 3_000_000: 5_000_000, 5_000_000: 5_000_000, 7_000_000: 10_000_000}
    assert {n: F.state_scale_top({"state_bytes": [None, n]}) for n in tops} == tops
    assert F.state_scale_top({"state_bytes": [None]}) is None and F.state_scale_top({}) is None


def test_state_bytes_map_next_to_load_and_task_time(store):
    rid = _state_run(store)
    D = DashboardData(store)
    d = D.load(rid)
    assert d["heat"]["state_bytes"][:3] == [1500, 3_000_000, None]
    fig = F.worker_heat_figure(d)
    json.dumps(fig)
    maps = [t for t in fig["data"] if t["type"] == "bar"]
    assert [t["name"] for t in maps][2] == "keyed state (serialized bytes)" and fig["data"][2]["yaxis"] == "y3"
    state = fig["data"][2]
    assert len(state["x"]) == 8, "worker 2 reports no state bytes: no cell"
    assert state["marker"]["color"][:2] == [F._heat_color(v, 5e6, F._STATE_SCALE) for v in (1500, 3_000_000)]
    assert [c[5] for c in state["customdata"][:2]] == ["1.5 kB", "3 MB"]
    assert "state %{customdata[5]}" in state["hovertemplate"] and "state" in fig["data"][0]["hovertemplate"]
    bars = [t["marker"]["colorbar"] for t in fig["data"] if t["type"] == "scatter"]
    assert [b["title"]["text"] for b in bars] == ["× mean", "bytes"]
    assert bars[1]["ticktext"] == ["0 B", "2.5 MB", "≥ 5 MB"]
    # the two colour bars sit beside their maps, one above the other
    assert bars[1]["y"] == fig["layout"]["yaxis3"]["domain"][1] <= 1.0 - bars[0]["len"] + 1e-9
    assert fig["layout"]["height"] == 520

    cursor = {"run_id": rid, "last_interval": 3, "last_event_id": d["last_event_id"], "points": 4}
    store.record_interval(rid, IntervalRecord.from_parts(4, 4, {"tuples": 30, "n_workers": 3},
                          workers=[{"worker": w, "tuples": 10, "cost": 10.0, "state_bytes": 9_000_000} for w in range(3)]))
    D.cache.clear()
    delta = D.load(rid, cursor)
    ext = {tuple(o["location"]): o["params"]["value"]
           for o in F.worker_heat_patch(delta, 5e6).to_plotly_json()["operations"]}
    darkest = F._heat_color(5e6, 5e6, F._STATE_SCALE)
    assert darkest == "#4338ca" and ext[("data", 2, "x")] == [4, 4, 4]
    assert ext[("data", 2, "marker", "color")] == [darkest] * 3, "beyond the drawn scale: its darkest colour"
    without = {tuple(o["location"]) for o in F.worker_heat_patch(delta).to_plotly_json()["operations"]}
    assert ("data", 2, "x") not in without and ("data", 0, "x") in without


def test_runs_without_state_bytes_show_two_maps_and_no_state(store, run):
    d = DashboardData(store).load(run)
    assert set(d["heat"]["state_bytes"]) == {None}
    fig = F.worker_heat_figure(d)
    assert [t["type"] for t in fig["data"]] == ["bar", "bar", "scatter"] and fig["layout"]["height"] == 360
    assert "state" not in fig["data"][0]["hovertemplate"] and "yaxis3" not in fig["layout"]


def test_migrations_show_bytes_moved_and_batches_held(store):
    rid = _state_run(store)
    d = DashboardData(store).load(rid)
    m = d["migrations"]
    assert m["interval"] == [0, 1, 2, 3] and m["bytes_moved"] == [1_200_000, None, 1_500_000, None]
    assert m["pause_batches"] == [1, None, 3, None] and m["pause_ms"] == [1.5, 0.0, 2.0, 0.0]
    # interval 2's two migrations are one move (storage.moves): bytes summed, the longest hold
    assert [(r["bytes_moved"], r["pause_batches"]) for r in d["migration_rows"][:2]] == [(1_500_000, 3), (1_200_000, 1)]

    fig = F.time_figure("migrations", d)
    state, _keys, pause = fig["data"]
    assert state["hovertext"] == ["<br>1.2 MB of serialized state", "", "<br>1.5 MB of serialized state", ""]
    assert pause["hovertext"][2] == "<br>tuples held 3 micro-batches" and pause["hovertext"][0].endswith("1 micro-batch")
    assert "%{hovertext}" in state["hovertemplate"]
    markers = F.time_figure("imbalance", d)["data"][4]
    assert markers["text"][0].endswith("<br>1.2 MB of serialized state moved<br>tuples held 1 micro-batch (1.5 ms)")

    table = _text(migration_table(d["migration_rows"]))
    assert "bytes moved" in table and "pause batches" in table and "1.5 MB" in table and "1.2 MB" in table

    cursor = {"run_id": rid, "last_interval": 3, "last_event_id": d["last_event_id"], "points": 4}
    migration = {"keys_moved": 1, "state_moved": 1.0, "pause_ms": 1.0, "bytes_moved": 42, "pause_batches": 2}
    store.record_interval(rid, IntervalRecord.from_parts(4, 4, {"tuples": 30, "n_workers": 3}, migrations=[migration]))
    ops = F.time_patch("migrations", DashboardData(store).load(rid, cursor)).to_plotly_json()["operations"]
    ext = {tuple(o["location"]): o["params"]["value"] for o in ops}
    assert ext[("data", 0, "hovertext")] == ["<br>42 B of serialized state"]
    assert ext[("data", 2, "hovertext")] == ["<br>tuples held 2 micro-batches"] and ("data", 1, "hovertext") not in ext


def test_migrations_of_older_engines_show_nothing_extra(store, run):
    d = DashboardData(store).load(run)
    assert set(d["migrations"]["bytes_moved"]) == {None} and set(d["migrations"]["pause_batches"]) == {None}
    table = _text(migration_table(d["migration_rows"]))
    assert "bytes moved" not in table and "pause batches" not in table and "None" not in table
    assert "pause ms" in table
    fig = F.time_figure("migrations", d)
    assert set(fig["data"][0]["hovertext"]) == {""} and set(fig["data"][2]["hovertext"]) == {""}
    markers = F.time_figure("imbalance", d)["data"][4]
    assert markers["text"] and not any("<br>" in t or "None" in t for t in markers["text"])


def test_a_tick_extends_the_state_map_with_the_scale_it_was_drawn_with(store):
    rid = _state_run(store)
    app = create_app(store=store)
    client = app.server.test_client()
    first = _call(client, "fig-heat.figure", {"tick.n_intervals": 0, "run-select.value": rid, "worker-view.value": "auto"},
                  {"cursor.data": None, "imb-metrics.value": ["imbalance"], "tick.interval": 1000}, "run-select.value")
    cursor = first.get_json()["response"]["cursor"]["data"]
    assert cursor["state_top"] == 5e6
    store.record_interval(rid, IntervalRecord.from_parts(4, 4, {"tuples": 30, "n_workers": 3},
                          workers=[{"worker": w, "tuples": 10, "cost": 10.0, "state_bytes": 2_500_000} for w in range(3)]))
    app.skewlab.data.cache.clear()
    r = _call(client, "fig-heat.figure", {"tick.n_intervals": 1, "run-select.value": rid, "worker-view.value": "auto"},
              {"cursor.data": cursor, "imb-metrics.value": ["imbalance"], "tick.interval": 1000}, "tick.n_intervals")
    ops = r.get_json()["response"]["fig-heat"]["figure"]["operations"]
    colors = next(o["params"]["value"] for o in ops if o["location"] == ["data", 2, "marker", "color"])
    assert colors == [F._heat_color(2_500_000, 5e6, F._STATE_SCALE)] * 3


# ------------------------------------------------------------------------------------ metrics
def test_replication_of_intervals_without_keys_does_not_drag_averages_below_one():
    rows = [{"interval": 0, "replication": 0.0}, {"interval": 1, "replication": 1.0},
            {"interval": 2, "replication": 2.0}]
    assert summarize(rows)["replication_mean"] == pytest.approx(1.5)
    live = [{"algorithm": "pkg", "imbalance": 0.1, **r} for r in rows]
    assert shadow_summary([], live)[0]["replication"] == pytest.approx(1.5)


def test_shadow_of_an_empty_interval_has_no_replication():
    from skewlab.engine.algorithms.keys import Vocabulary
    from skewlab.engine.control.shadow import ShadowEvaluator

    ev = ShadowEvaluator(["pkg"], Vocabulary(), n_workers=4)
    (row,) = ev.evaluate(np.zeros(0, np.int64), np.zeros(0, np.int64))
    assert row["replication"] is None


def test_status_line_rates():
    assert format_rate(850) == "850 tuples/s" and format_rate(0) == "0 tuples/s"
    assert format_rate(12_345) == "12.3k tuples/s" and format_rate(999.9) == "1k tuples/s"
    assert format_rate(4_560_000) == "4.56M tuples/s" and format_rate(None) == "– tuples/s"


def test_throughput_kpi_says_paused_instead_of_its_last_value(store, run):
    store.update_run(run, status="paused")
    app = create_app(store=store)
    d = app.skewlab.data.load(run)
    assert "0 · paused" in _text(_kpi(kpi_cards(d), "throughput"))
    cursor = {"run_id": run, "last_interval": 29, "last_event_id": 10**6, "points": 30, "ops": 0, "bars": True,
              "log": [], "mig": [], "status": "running"}
    r = _call(app.server.test_client(), "kpis.children",
              {"tick.n_intervals": 3, "run-select.value": run, "worker-view.value": "auto"},
              {"cursor.data": cursor, "imb-metrics.value": ["imbalance"], "tick.interval": 1000}, "tick.n_intervals")
    resp = r.get_json()["response"]
    assert "0 · paused" in json.dumps(resp["kpis"]["children"], ensure_ascii=False)
    assert resp["cursor"]["data"]["status"] == "paused"


def test_rebalance_marker_shows_the_migration_recorded_when_its_import_completed(store):
    """The Spark engine records a migration when its state is imported, two intervals after the rebalance
    that planned it (``detail.planned_interval``): its bar is the planning interval's (the numbering of the
    migration table) and the rebalance's marker still shows its bytes and hold."""
    rid = store.create_run("mixed", MIXED, n_workers=3)
    for i in range(4):
        store.record_interval(
            rid, IntervalRecord.from_parts(i, i, {"tuples": 60, "n_workers": 3},
            events=[{"kind": "rebalance", "detail": {"keys": 2, "state_moved": 4.0}}] if i == 1 else None,
            migrations=[{"keys_moved": 2, "state_moved": 4.0, "pause_ms": 900.0, "bytes_moved": 2_500_000,
                         "pause_batches": 1, "detail": {"planned_interval": 1}}] if i == 3 else None))
    d = DashboardData(store).load(rid)
    assert d["migrations"]["interval"] == [0, 1, 2, 3] and d["migrations"]["state_moved"] == [0.0, 4.0, 0.0, 0.0]
    assert d["migrations"]["imported"] == [None, 3, None, None]
    markers = F.time_figure("imbalance", d)["data"][4]
    assert list(markers["x"]) == [1]
    assert markers["text"][0].endswith("<br>2.5 MB of serialized state moved<br>tuples held 1 micro-batch (900 ms)")


def test_a_migration_recorded_later_stacks_on_the_bar_of_the_interval_that_planned_it(store):
    """The incremental refresh draws interval 1's bar (0) when interval 1 arrives; its migration, imported in
    interval 3, comes as a further bar at 1, stacked on it (issue 26 item 10: the table's numbering)."""
    rid = store.create_run("mixed", MIXED, n_workers=3)
    for i in range(3):
        store.record_interval(rid, IntervalRecord.from_parts(i, i, {"tuples": 60, "n_workers": 3}))
    D = DashboardData(store)
    d = D.load(rid)
    assert d["migrations"]["interval"] == [0, 1, 2] and F.time_figure("migrations", d)["layout"]["barmode"] == "stack"
    store.record_interval(rid, IntervalRecord.from_parts(3, 3, {"tuples": 60, "n_workers": 3}, migrations=[
        {"keys_moved": 2, "state_moved": 4.0, "planned_interval": 1, "detail": {"reason": "rebalance"}}]))
    cursor = {"run_id": rid, "last_interval": 2, "last_event_id": d["last_event_id"], "points": 3}
    delta = D.load(rid, cursor)
    assert delta["migrations"]["interval"] == [3, 1] and delta["migrations"]["state_moved"] == [0.0, 4.0]
    ops = F.time_patch("migrations", delta).to_plotly_json()["operations"]
    assert {tuple(o["location"]): o["params"]["value"] for o in ops}[("data", 0, "x")] == [3, 1]
    assert delta["migration_rows"][0]["interval"] == 1 and delta["migration_rows"][0]["imported"] == 3
