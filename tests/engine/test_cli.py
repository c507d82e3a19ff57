"""CLI contract: exit codes, one-line errors, JSON shape of `skewlab simulate` and `skewlab plan`."""

import json
import subprocess
import sys

import pytest

from skewlab.engine.algorithms import registry
from skewlab.cli import main


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_simulate_json_contract(capsys):
    code, out, err = run(capsys, "simulate", "--algorithm", "hash", "--workers", "4", "--sources", "2",
                         "--workload", "zipf", "--zipf", "1.2", "--keys", "500", "--messages", "20000",
                         "--seed", "3", "--interval-messages", "5000", "--json")
    assert code == 0, err
    r = json.loads(out)
    for field in ("algorithm", "workers", "messages", "imbalance", "theta_max_observed", "seeds_imbalance",
                  "replication", "routing_table_size", "migration_cost", "worker_loads", "tuples_per_second",
                  "intervals", "plan_seconds", "warmup_seconds"):
        assert field in r, field
    assert r["algorithm"] == "hash" and r["workers"] == 4 and r["messages"] == 20000
    assert len(r["intervals"]) == 4 and len(r["worker_loads"]) == 4
    assert sum(r["worker_loads"]) == 20000
    for it in r["intervals"]:
        for field in ("imbalance", "theta_max_observed", "seeds_imbalance", "replication", "routing_table_size",
                      "migration_cost", "worker_loads", "tuples_per_second"):
            assert field in it
    again = json.loads(run(capsys, "simulate", "--algorithm", "hash", "--workers", "4", "--sources", "2",
                           "--zipf", "1.2", "--keys", "500", "--messages", "20000", "--seed", "3",
                           "--interval-messages", "5000", "--json")[1])
    assert again["worker_loads"] == r["worker_loads"]  # deterministic


def test_simulate_table_output_and_changes(capsys):
    code, out, _ = run(capsys, "simulate", "--algorithm", "consistent", "--keys", "300", "--messages", "6000",
                       "--interval-messages", "1000", "--change", "2:workers=10", "--change", "4:algorithm=hash")
    assert code == 0
    assert "imbalance (max/mean-1)" in out and "event @2: workers" in out and "event @4: switch" in out
    assert "routing throughput" in out and "routing warm-up" in out


def test_simulate_file_input(tmp_path, capsys):
    f = tmp_path / "keys.txt"
    f.write_text("a\nb\na\n\nc\na\n")
    code, out, err = run(capsys, "simulate", "--algorithm", "hash", "--input", str(f), "--messages", "5", "--json")
    assert code == 0, err
    assert json.loads(out)["messages"] == 5
    c = tmp_path / "t.csv"
    c.write_text("sym,px\nA,1\nB,2\nA,3\n")
    code, out, err = run(capsys, "simulate", "--algorithm", "hash", "--input", str(c), "--column", "sym",
                         "--messages", "3", "--json")
    assert code == 0, err


@pytest.mark.parametrize(
    "argv, fragment",
    [
        (["simulate", "--algorithm", "pkgg"], "did you mean 'pkg'"),
        (["simulate", "--algorithm", "hash", "--workers", "0"], "parameter workers: 0 is out of range [1, 1024]"),
        (["simulate", "--algorithm", "hash", "--sources", "0"], "parameter sources: 0 is out of range [1, 4096]"),
        (["simulate", "--algorithm", "consistent", "--param", "replicas=0"], "out of range [1, 4096]"),
        (["simulate", "--algorithm", "hash", "--param", "bogus=1"], "unknown parameter 'bogus'"),
        (["simulate", "--algorithm", "hash", "--zipf", "9"], "out of range"),
        (["simulate", "--algorithm", "hash", "--input", "/nonexistent/file.txt"], "file"),
        (["simulate", "--algorithm", "hash", "--workload", "nope"], "unknown workload"),
        (["simulate", "--algorithm", "hash", "--workload", "flights", "--workload-param", "column=gate"],
         "column: expected one of dest|tailnum"),
        (["simulate", "--algorithm", "hash", "--change", "x:workers=2"], "--change expects"),
        (["simulate", "--workers", "abc"], "invalid int value"),
        (["plan", "--snapshot", "/nonexistent.json", "--algorithm", "hash"], "does not produce plans"),
        (["engine", "--service-us", "-1"], "--service-us must be in [0, 1e+06]"),
        (["engine", "--service-us", "nan"], "--service-us must be in [0, 1e+06]"),
        (["engine", "--operator", "median"], "--operator must be one of count|sum|mean|min|max|distinct|join"),
        (["engine", "--operator", "no_such_pkg.ops:Op"], "cannot import no_such_pkg.ops"),
        (["engine", "--operator", "json:JSONDecoder"], "is not a subclass of skewlab.engine.operators.KeyedOperator"),
        (["engine", "--operator", "join", "--algorithm", "pkg"],
         "pkg splits keys over workers, and operator join cannot merge"),
        (["engine", "--operator", "examples.ewma_rate:EwmaRate", "--algorithm", "dchoices"],
         "dchoices splits keys over workers, and operator ewma_rate cannot merge"),
        (["engine", "--source", "kafka", "--bootstrap", "h:1", "--topic", "t", "--operator", "mean"],
         "mean reads a value per tuple; name it with --value-field"),
        (["engine", "--operator", "count", "--source", "kafka", "--bootstrap", "h:1", "--topic", "t",
          "--value-field", "amount"], "operator count reads no value per tuple"),
        (["engine", "--source", "kafka", "--bootstrap", "h:1", "--topic", "t", "--key-field", "user..id"],
         "--key-field: 'user..id' is not a dotted field path"),
        (["nosuchcommand"], "invalid choice"),
    ],
)
def test_user_errors_are_one_line_exit_2(capsys, argv, fragment):
    code, out, err = run(capsys, *argv)
    assert code == 2
    assert fragment in err
    assert err.count("\n") == 1 and "Traceback" not in err


def test_empty_input_file_is_a_user_error(tmp_path, capsys):
    f = tmp_path / "empty.txt"
    f.write_text("")
    code, _, err = run(capsys, "simulate", "--algorithm", "hash", "--input", str(f))
    assert code == 2 and err.count("\n") == 1


def test_algorithms_lists_every_registry_name_with_ranges(capsys):
    code, out, _ = run(capsys, "algorithms")
    assert code == 0
    for name in registry.names():
        assert any(line.startswith(name + " ") for line in out.splitlines())
    info = json.loads(run(capsys, "algorithms", "--json")[1])
    assert [a["name"] for a in info] == registry.names()
    for a in info:
        for p in a["params"]:
            assert p["range"] and "default" in p


def test_engine_refuses_a_bad_operator_in_one_line():
    """The user's view: a real `skewlab engine` process, before Spark starts."""
    proc = subprocess.run([sys.executable, "-m", "skewlab", "engine", "--operator", "json:loads"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr == "skewlab: error: --operator 'json:loads': loads is not a subclass of " \
                          "skewlab.engine.operators.KeyedOperator\n"


def test_console_script_entry_point():
    proc = subprocess.run([sys.executable, "-m", "skewlab", "simulate", "--algorithm", "nope"],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and proc.stderr.startswith("skewlab: error: unknown algorithm")


def test_simulate_input_replays_the_whole_file_unless_messages_caps_it(tmp_path, capsys):
    # longer than the generators' default of 1,000,000 messages
    lines = 1_000_017
    f = tmp_path / "long.txt"
    f.write_text("".join(f"k{i % 997}\n" for i in range(lines)))
    code, out, err = run(capsys, "simulate", "--algorithm", "hash", "--input", str(f),
                         "--interval-messages", "500000", "--json")
    assert code == 0, err
    r = json.loads(out)
    assert r["messages"] == lines and sum(r["worker_loads"]) == lines
    code, out, err = run(capsys, "simulate", "--algorithm", "hash", "--input", str(f), "--messages", "1234",
                         "--interval-messages", "500", "--json")
    assert code == 0, err
    assert json.loads(out)["messages"] == 1234


def test_long_simulate_reports_progress_on_stderr_never_in_json(capsys, monkeypatch):
    from skewlab.engine.cli import progress

    # stderr is not a terminal here: a plain progress line once a run has lasted LOG_EVERY seconds
    monkeypatch.setattr(progress, "LOG_EVERY", 0.0)  # every run is "long"
    code, out, err = run(capsys, "simulate", "--algorithm", "hash", "--keys", "100", "--messages", "4000",
                         "--interval-messages", "1000", "--json")
    assert code == 0, err
    assert json.loads(out)["messages"] == 4000  # stdout holds the JSON object and nothing else
    lines = err.splitlines()
    assert len(lines) == 4 and all(line.startswith("simulate hash: ") for line in lines), err
    assert "4000/4000" in lines[-1] and "\r" not in err


def test_short_run_prints_no_progress_off_a_terminal():
    import io

    from skewlab.engine.cli.progress import Progress

    stream = io.StringIO()
    bar = Progress(10, "short", stream=stream)
    for done in range(1, 11):
        bar.update(done)
    bar.close()
    assert stream.getvalue() == ""
    forced = io.StringIO()
    bar = Progress(10, "forced", stream=forced, force=True, delay=0.0)
    bar.update(10)
    bar.close()
    assert "forced [" in forced.getvalue() and forced.getvalue().endswith("\r")


def _column_starts(lines, word):
    return {line.index(f" {word} ") for line in lines}


@pytest.mark.parametrize("command", ["algorithms", "workloads"])
def test_parameter_tables_stay_aligned_with_long_names(capsys, command):
    code, out, _ = run(capsys, command)
    assert code == 0
    rows = [line for line in out.splitlines() if line.startswith("    ")]
    if command == "algorithms":
        assert max(len(line.split()[0]) for line in rows) > 18  # e.g. dkg's teenage_cycle_tuples
    assert len(_column_starts(rows, "default")) == 1
    assert len(_column_starts(rows, "range")) == 1
    titles = [line for line in out.splitlines() if not line.startswith(" ")]
    assert len({len(line) - len(line.split(None, 1)[1]) for line in titles}) == 1  # summaries in one column


def test_simulate_header_names_the_workload_parameters(tmp_path, capsys):
    code, out, _ = run(capsys, "simulate", "--algorithm", "hash", "--zipf", "1.2", "--keys", "300",
                       "--messages", "2000", "--interval-messages", "1000")
    assert code == 0
    header = out.splitlines()[0]
    assert "{" not in header and "'" not in header
    assert "zipf (z=1.2, keys=300" in header and "2000 messages" in header


def test_version_prints_the_package_version_and_exits_0():
    from importlib.metadata import version

    proc = subprocess.run([sys.executable, "-m", "skewlab", "--version"], capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == f"skewlab {version('skewlab')}\n"


def _help(capsys, *argv):
    with pytest.raises(SystemExit) as exc:
        main([*argv, "--help"])
    assert exc.value.code == 0
    return " ".join(capsys.readouterr().out.split())  # argparse wraps lines


def test_engine_help_states_the_defaults(capsys):
    from skewlab.engine.workloads import WORKLOADS, workload_names

    workload_names()
    declared = {p.name: p.default for p in WORKLOADS["zipf"].params}
    text = _help(capsys, "engine")
    assert "--rate RATE target tuples/s for generator/file (default 50000; 0 = unlimited)" in text
    assert f"Zipf exponent for zipf/drift (default {declared['z']})" in text
    assert f"distinct keys for zipf/drift (default {declared['keys']})" in text
    text = _help(capsys, "simulate")
    assert f"(zipf/drift workloads; default {declared['z']})" in text
    assert f"(zipf/drift workloads; default {declared['keys']})" in text


def test_demo_help_has_a_description(capsys):
    text = _help(capsys, "demo")
    usage, _, rest = text.partition("options:")
    assert "dashboard" in usage.split("]")[-1]  # a sentence between the usage line and the options


def test_mixed_summary_describes_mixed():
    summary = registry.get("mixed").summary
    assert not summary.startswith("MinMig")
    assert "MinTable" in summary and "MinMig" in summary and "Amax" in summary


@pytest.mark.parametrize("base", ["slots", "consistent", "mod"])
def test_plan_snapshot_home_defaults_to_the_algorithms_base_hash(capsys, tmp_path, base):
    """Keys without "home" sit on the chosen algorithm's h(k): Mixed's slot table (the default, at the
    snapshot's worker count plain hash's fp mod n), its consistent-hash ring or fp mod n."""
    from skewlab.engine.algorithms.groupings.basic import ConsistentHashRing
    from skewlab.engine.algorithms.keys import fingerprints
    from skewlab.engine.algorithms.keys import home as keys_home

    names = [f"k{i}" for i in range(200)]
    snap = tmp_path / "s.json"
    snap.write_text(json.dumps({"workers": 5, "keys": [{"key": k, "cost": 1} for k in names]}))
    chosen = [] if base == "slots" else ["--param", f"base={base}"]  # slots: the default
    code, out, err = run(capsys, "plan", "--snapshot", str(snap), "--algorithm", "mixed",
                         "--param", "theta_max=100", *chosen, "--seed", "2", "--json")
    assert code == 0, err
    plan = json.loads(out)
    fps = fingerprints(names)
    home = ConsistentHashRing(5, 1000, 2).lookup(fps) if base == "consistent" else keys_home(fps, 5)
    assert [plan["assignment"][k] for k in names] == list(home)
    assert plan["routing_table"] == {} and plan["migrated_count"] == 0


def test_simulate_saves_its_run_for_the_dashboard(tmp_path, capsys):
    """--db: one IntervalRecord per interval; the dashboard's data layer reads back the --json numbers."""
    from skewlab.dashboard.data import DashboardData
    from skewlab.storage import connect

    url = f"sqlite:///{tmp_path / 'sim.db'}"
    code, out, err = run(capsys, "simulate", "--algorithm", "mixed", "--workers", "4", "--keys", "800",
                         "--zipf", "1.4", "--messages", "20000", "--interval-messages", "5000", "--seed", "2",
                         "--change", "2:workers=5", "--json", "--db", url)
    assert code == 0, err
    r = json.loads(out)
    store = connect(url)
    try:
        run_row = store.get_run(r["run_id"])
        assert run_row["status"] == "finished" and run_row["algorithm"] == "mixed" and run_row["seed"] == 2
        rows = store.interval_metrics(r["run_id"])
        assert [m["interval"] for m in rows] == [it["interval"] for it in r["intervals"]] == [0, 1, 2, 3]
        assert [m["tuples"] for m in rows] == [it["tuples"] for it in r["intervals"]]
        assert [m["imbalance"] for m in rows] == pytest.approx([it["imbalance"] for it in r["intervals"]])
        assert [m["n_workers"] for m in rows] == [4, 4, 5, 5]
        workers = store.worker_metrics(r["run_id"], interval=3)
        assert [w["cost"] for w in workers] == pytest.approx(r["intervals"][3]["worker_loads"])
        assert sum(w["tuples"] for w in workers) == 5000
        rebalances = [it for it in r["intervals"] if it.get("rebalanced")]
        assert len([e for e in store.events(r["run_id"]) if e["kind"] == "rebalance"]) == len(rebalances) > 0
        series = DashboardData(store).run_series(r["run_id"])["series"]
        assert series["imbalance"] == pytest.approx([it["imbalance"] for it in r["intervals"]])
        assert series["tuples"] == [it["tuples"] for it in r["intervals"]]
        # each migration row under the interval whose metric counts it, with its share of the metric
        # (issue 26 item 10): the resize applied for interval 2 is 0.045 of interval 2's total state, not
        # 0.0675 (of the state before interval 2 came in)
        migs = store.migration_events(r["run_id"])
        assert {m["planned_interval"] for m in migs} >= {2}
        for it in r["intervals"]:
            mine = [m for m in migs if m["planned_interval"] == it["interval"]]
            assert sum(m["migration_cost"] for m in mine) == pytest.approx(it["migration_cost"]), it["interval"]
            assert sum(m["state_moved"] for m in mine) == pytest.approx(it["state_moved"]), it["interval"]
    finally:
        store.close()


def test_simulate_db_errors_are_one_line(tmp_path, capsys):
    code, _, err = run(capsys, "simulate", "--messages", "100", "--db", "bogus://x")
    assert code == 2 and err.count("\n") == 1 and "--db: unsupported database" in err
    code, _, err = run(capsys, "simulate", "--messages", "100", "--db", f"sqlite:///{tmp_path}/")
    assert code == 2 and err.count("\n") == 1 and "cannot open database" in err


def skewlab(cwd, *argv):
    """The real ``skewlab`` console command in ``cwd`` (what the user sees)."""
    return subprocess.run([sys.executable, "-m", "skewlab", *argv], capture_output=True, text=True, cwd=cwd,
                          timeout=120)


def one_line_exit_2(proc, fragment):
    assert proc.returncode == 2, (proc.returncode, proc.stderr)
    assert proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert fragment in proc.stderr, proc.stderr


def test_db_that_is_not_a_database_url_creates_nothing(tmp_path):
    """Issue 26 item 5: a bare word is a typo, not a SQLite file; a missing directory is not created."""
    one_line_exit_2(skewlab(tmp_path, "simulate", "--messages", "100", "--db", "notaurl"), "not a database URL")
    missing = tmp_path / "nonexistent" / "dir"
    one_line_exit_2(skewlab(tmp_path, "simulate", "--messages", "100", "--db", f"sqlite:///{missing}/x.db"),
                    "does not exist")
    one_line_exit_2(skewlab(tmp_path, "engine", "--db", "notaurl", "--duration", "1"), "not a database URL")
    assert sorted(p.name for p in tmp_path.iterdir()) == []


def test_control_needs_an_existing_skewlab_database(tmp_path):
    """Issue 26 item 5: ``control`` on a database nobody reads says so instead of "submitting"."""
    one_line_exit_2(skewlab(tmp_path, "control", "--db", f"sqlite:///{tmp_path}/nonexistent.db", "set-workers", "12"),
                    "no skewlab database")
    assert not (tmp_path / "nonexistent.db").exists()
    import sqlite3

    sqlite3.connect(tmp_path / "other.db").execute("CREATE TABLE t (x)").connection.commit()
    one_line_exit_2(skewlab(tmp_path, "control", "--db", f"sqlite:///{tmp_path}/other.db", "status"),
                    "no skewlab tables")
    # a PostgreSQL server that does not answer (the first connection is made by the schema check): the
    # driver's reason on one line (issue 26 item 4), not a traceback
    one_line_exit_2(skewlab(tmp_path, "control", "--db", "postgresql+psycopg://u@127.0.0.1:1/x", "status"),
                    "Connection refused")


def test_control_refuses_a_finished_run_and_addresses_the_live_one(tmp_path, capsys):
    """Issue 26 item 11: nothing is queued for a finished run; a live run's commands carry its id, and
    ``status`` lists only the live run's (and global) commands."""
    from skewlab.storage import connect

    url = f"sqlite:///{tmp_path / 'c.db'}"
    store = connect(url)
    old = store.create_run("hash", {}, seed=0, n_workers=4)
    store.submit_command("pause", {}, run_id=old)
    store.finish_run(old)
    one_line_exit_2(skewlab(tmp_path, "control", "--db", url, "set-workers", "6"), f"run {old} is finished")
    assert [c["kind"] for c in store.recent_commands()] == ["pause"]  # nothing new queued
    live = store.create_run("hash", {}, seed=0, n_workers=4)
    code, out, err = run(capsys, "control", "--db", url, "set-workers", "6")
    assert code == 0, err
    newest = store.recent_commands(1)[0]
    assert (newest["kind"], newest["run_id"]) == ("set-workers", live)
    code, out, err = run(capsys, "control", "--db", url, "status")
    assert code == 0 and "set-workers" in out and "pause" not in out, out
    store.close()


def test_control_set_param_after_a_pending_switch_is_for_the_new_algorithm(tmp_path, capsys):
    """The README's sequence ``set-algorithm mixed ...`` then ``set-param theta_max=0.1`` on an engine
    that runs the default wchoices: the engine applies commands in order, so the set-param is checked
    against the pending switch, not refused for wchoices (which has no theta_max)."""
    from skewlab.storage import connect

    url = f"sqlite:///{tmp_path / 'c.db'}"
    store = connect(url)
    store.create_run("wchoices", {}, seed=0, n_workers=4)
    one_line_exit_2(skewlab(tmp_path, "control", "--db", url, "set-param", "theta_max=0.1"),
                    "unknown parameter 'theta_max' for wchoices")
    code, _, err = run(capsys, "control", "--db", url, "set-algorithm", "mixed", "theta_max=0.05")
    assert code == 0, err
    code, _, err = run(capsys, "control", "--db", url, "set-param", "theta_max=0.1")
    assert code == 0, err
    assert [c["kind"] for c in store.recent_commands(2)] == ["set-param", "set-algorithm"]
    store.close()


@pytest.mark.parametrize("conf, fragment", [
    ("spark.sql.shuffle.partitions=abc", "--conf spark.sql.shuffle.partitions=abc: spark.sql.shuffle.partitions "
                                         "must be a whole number >= 1"),
    ("spark.sql.shuffle.partitions=0", "must be a whole number >= 1"),
    ("spark.driver.memory=lots", "--conf spark.driver.memory=lots: spark.driver.memory must be a size such as 512m"),
    ("spark.executor.memory=1.5g", "must be a size such as 512m or 4g"),
    ("spark.network.timeout=soon", "must be a duration such as 120s"),
    ("spark.sql.adaptive.enabled=yes", "must be true or false"),
    ("spark.sql.shuffle.partitions", "--conf: expected KEY=VALUE, got 'spark.sql.shuffle.partitions'"),
])
def test_engine_conf_values_are_checked_before_spark_starts(tmp_path, conf, fragment):
    """Issue 38 item 5: a --conf value of the wrong kind for a setting Spark documents is one line and exit
    2 before Spark starts (it wrote no log), not a Python and JVM traceback and a failed run."""
    import os

    env = dict(os.environ, SKEWLAB_DATA_DIR=str(tmp_path / "data"))
    proc = subprocess.run([sys.executable, "-m", "skewlab", "engine", "--max-batches", "1", "--conf", conf],
                          capture_output=True, text=True, cwd=tmp_path, env=env, timeout=120)
    one_line_exit_2(proc, fragment)
    assert not (tmp_path / "data").exists()  # nothing started, no run recorded


def test_well_formed_conf_values_pass_the_check():
    from skewlab.engine.runtimes.spark.conf_values import check_spark_conf

    check_spark_conf({"spark.sql.shuffle.partitions": " 200 ", "spark.driver.memory": "4g", "spark.executor.memory": "512M",
                      "spark.driver.maxResultSize": "0", "spark.network.timeout": "120s", "spark.locality.wait": "3",
                      "spark.sql.adaptive.enabled": "TRUE", "spark.memory.fraction": "0.6", "spark.log.level": "warn",
                      "spark.sql.execution.arrow.maxRecordsPerBatch": "-1", "spark.some.unknown.key": "anything"})


def test_control_checks_set_workers_against_the_runs_own_range(tmp_path, capsys):
    """Issue 38 item 6: ``set-workers 100`` on a run whose range is [1, 8] (its --max-workers) is refused at
    once, in the words of the dashboard's form and the engine, instead of "pending" and a later rejection."""
    from skewlab.storage import connect

    url = f"sqlite:///{tmp_path / 'c.db'}"
    store = connect(url)
    store.create_run("mixed", {}, seed=0, n_workers=4, config={"operator": "count", "max_workers": 8})
    one_line_exit_2(skewlab(tmp_path, "control", "--db", url, "set-workers", "100"),
                    "set-workers: parameter workers: 100 is out of range [1, 8] (the run's --max-workers")
    one_line_exit_2(skewlab(tmp_path, "control", "--db", url, "set-workers", "9"), "out of range [1, 8]")
    assert store.recent_commands() == []  # nothing queued
    code, _, err = run(capsys, "control", "--db", url, "set-workers", "8")
    assert code == 0, err
    store.close()


def test_control_status_prints_a_commands_params_whole(tmp_path, capsys):
    """Issue 38 item 7: ``control status`` cut a command's payload JSON mid-string at 60 characters."""
    from skewlab.storage import connect

    url = f"sqlite:///{tmp_path / 'c.db'}"
    store = connect(url)
    store.create_run("wchoices", {}, seed=0, n_workers=4)
    code, _, err = run(capsys, "control", "--db", url, "set-algorithm", "mixed", "theta_max=0.05", "amax=1000",
                       "beta=2", "plan_decay=0.2")
    assert code == 0, err
    code, out, err = run(capsys, "control", "--db", url, "status")
    assert code == 0, err
    payload = store.recent_commands(1)[0]["payload"]
    assert json.dumps(payload) in out and len(json.dumps(payload)) > 60, out
    store.close()


def test_simulate_counts_and_warns_about_malformed_csv_rows(tmp_path):
    """Issue 26 item 6: a missing column, an empty key and an unterminated quote are dead letters:
    counted in the result, warned about on stderr, stored with the run."""
    from skewlab.storage import connect

    f = tmp_path / "k.csv"
    f.write_text('id,word\n1,a\n2\n3,\n4,"b,c\n5,a\n6,d\n')
    url = f"sqlite:///{tmp_path / 's.db'}"
    proc = skewlab(tmp_path, "simulate", "--algorithm", "hash", "--workers", "2", "--input", str(f),
                   "--column", "word", "--json", "--db", url)
    assert proc.returncode == 0, proc.stderr
    r = json.loads(proc.stdout)
    assert r["messages"] == 3
    assert r["dead_letters"] == {"missing_column": 1, "empty_key": 1, "bad_quote": 1}
    assert "3 input record(s) without a usable key or value were dropped as dead letters" in proc.stderr
    assert "bad_quote 1, empty_key 1, missing_column 1" in proc.stderr
    with connect(url) as store:
        assert {d["reason"]: d["count"] for d in store.dead_letters(r["run_id"])} == r["dead_letters"]


def test_each_stored_interval_carries_its_own_settings(tmp_path, capsys):
    """Issue 26 item 8: an interval is stored with its algorithm's parameters as they were when it was
    routed (schema 3), so the dashboard never pairs it with settings that came later."""
    from skewlab.storage import connect

    url = f"sqlite:///{tmp_path / 'p.db'}"
    code, out, err = run(capsys, "simulate", "--algorithm", "mixed", "--param", "amax=321", "--workers", "4",
                         "--messages", "20000", "--interval-messages", "5000", "--change", "2:algorithm=hash",
                         "--json", "--db", url)
    assert code == 0, err
    with connect(url) as store:
        rows = store.interval_metrics(json.loads(out)["run_id"])
    assert [r["algorithm"] for r in rows] == ["mixed", "mixed", "hash", "hash"]
    assert [r["params"].get("amax") for r in rows] == [321, 321, None, None]


def test_ctrl_c_while_a_finished_command_exits_is_not_an_interruption():
    """Ctrl-C that lands after a command printed its result, while the interpreter shuts down, leaves its
    exit status 0 (it used to die by SIGINT, status -2: the CI's ``skewlab produce`` after 1e6 messages)."""
    import signal
    import time

    code = "import sys; from skewlab.cli import console_main; sys.exit(console_main())"
    whole = subprocess.run([sys.executable, "-c", code, "workloads"], capture_output=True, text=True, check=True)
    n_lines = whole.stdout.count("\n")
    for delay in (0.05, 0.15, 0.3):  # not 0: right after its last line the command has not yet returned
        p = subprocess.Popen([sys.executable, "-u", "-c", code, "workloads"], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)  # -u: a line reaches us as it is printed
        # Ctrl-C only once the whole result is printed: until then (and for the microseconds until it returns)
        # the command is still running and an interruption is a real one (status 130; CI caught both at delay 0)
        out = "".join(p.stdout.readline() for _ in range(n_lines))
        time.sleep(delay)
        p.send_signal(signal.SIGINT)
        out += p.stdout.read()
        err = p.stderr.read()
        assert p.wait(timeout=60) == 0 and "zipf" in out and "Traceback" not in err, (delay, p.returncode, err)
