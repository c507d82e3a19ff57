"""What an operator needs to see (issue 13, section 3): limits exceeded and infeasible plans, the
what-if over every algorithm the run used, exports with CLI commands, the live settings and one
interval numbering in ``skewlab control status``, per-worker history, and metrics that do not
mislead (replication of empty intervals, small rates, throughput while paused)."""

from __future__ import annotations

import json

import numpy as np
import pytest

pytest.importorskip("dash")

from dashboard import figures as F  # noqa: E402
from dashboard.app import create_app  # noqa: E402
from dashboard.data import DashboardData, shadow_summary, summarize  # noqa: E402
from dashboard.layout import commands_view, kpi_cards  # noqa: E402
from engine import registry  # noqa: E402
from engine.cli import main  # noqa: E402
from storage import connect  # noqa: E402
from tests.pg import pg_server, pg_url  # noqa: E402,F401  (pytest fixtures)
from tests.test_dashboard import _call, record, run, store  # noqa: E402,F401  (fixtures: 30 intervals of mixed)

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
    store.record_interval(rid, 0, 0, {"tuples": 100, "n_workers": 12, "routing_table_size": entries,
                                      "feasible": feasible, "note": note},
                          routing={"entries": entries, "amax": amax},
                          workers=[{"worker": w, "tuples": 10, "cost": 10.0} for w in range(12)],
                          events=[{"kind": "rebalance", "detail": detail}])
    return rid


# ------------------------------------------------------------------------------------ what-if
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


# ------------------------------------------------------------------------------------ skewlab control
def _db(tmp_path):
    return f"sqlite:///{tmp_path / 'ops.sqlite'}"


# ------------------------------------------------------------------------------------ per-worker history
# ------------------------------------------------------------------------------------ metrics
