"""Reliability of the Spark engine under faults (issue "Demo and reliability", part "Reliability tests").

Four scenarios, three against the real engine (:class:`skewlab.engine.runtimes.spark.engine.SparkEngine` in-process on
the session ``spark`` fixture, ``local[2]``), bad commands against the driver's step where the engine
applies them:

* **Database outage** — a private PostgreSQL server (``tests.pg``) is stopped for >= 30 s while the
  generator stream keeps flowing, then started again.  The engine must keep processing batches,
  buffer the metric rows (:mod:`skewlab.engine.io.metrics_sink`), say so in its status line
  (``db DOWN, N interval(s) buffered``), retry, and in the end every processed batch has exactly
  one row in ``interval_metrics`` (and its per-worker rows); merged per-key results equal the
  ground truth regenerated from the consumed offsets.
* **Bad input** — 1e5 malformed Kafka records (no key, invalid UTF-8, oversized key) interleaved at
  random with valid ones, on the tansu test broker (``kafka_broker`` fixture): every malformed
  record is counted as a dead letter under its exact reason, every valid record is processed
  (merged per-key results equal the produced valid keys, including boundary keys of exactly
  ``max_key_bytes`` bytes and multi-byte UTF-8 keys), the query never dies.
* **Bad commands** — out-of-range, wrong types, unknown algorithm/parameter, unknown kind and
  non-object payloads (written to the table directly, as a foreign client could), SQL/template/
  path "injection" strings, read from the database and applied by the driver's step
  (:mod:`skewlab.engine.runtimes.spark.driver_step`) on made-up batches, as the engine does: every
  one is rejected with a reason, the controller is bit-for-bit unchanged across the batch that consumed them (grouping pickle: algorithm, parameters, worker
  count, routing table; keyed state; vocabulary), the database is intact, and a valid command
  afterwards still applies.
* **Worker changes under load** — ``set-workers 8`` then ``set-workers 6`` (from 4) while the
  generator stream runs: results equal the ground truth (no tuple lost), and the state each resize
  moved — recomputed here independently from the keyed state before/after — equals what the
  engine reported in its ``workers`` event and ``migration_events`` row.

The kill -9 exactly-once scenario is :mod:`tests.end_to_end.test_exactly_once`.  The long scenarios (outage,
bad input) are marked ``slow``: a plain ``pytest`` deselects them, ``.ci/run`` runs them (``-m slow``).  Each test prints one
``RELIABILITY <name>: {...}`` line with its figures (``pytest -s`` shows them; ``docs/results/engine.md``
section "Reliability" records a run).
"""

from __future__ import annotations

import json
import pickle
import random
import re
import subprocess
import time
from collections import Counter

import numpy as np
import pytest

pytest.importorskip("pyspark")

from skewlab.engine.runtimes.spark.engine import EngineConfig, SparkEngine  # noqa: E402
from skewlab.engine.control.state import decode  # noqa: E402
from skewlab.engine.workloads.key_file import RAW_BYTES  # noqa: E402
from skewlab.storage import connect  # noqa: E402
from tests.engine_helpers import by_fingerprint, generator_truth  # noqa: E402
from tests.pg import _cmd, throwaway_server  # noqa: E402


def report(name: str, figures: dict) -> None:
    print(f"\nRELIABILITY {name}: {json.dumps(figures, sort_keys=True)}")


def gen_cfg(tmp_path, db: str, **kw) -> EngineConfig:
    base = dict(
        source="generator", db=db, checkpoint=str(tmp_path / "ckpt"), algorithm="mixed", workers=4, sources=2,
        interval=0.3, rate=0, max_per_batch=2000, window=100_000, workload="zipf",
        workload_params={"keys": 500, "z": 1.2}, seed=3, shadow=[], duration=240,
    )
    base.update(kw)
    return EngineConfig(**base)




# --------------------------------------------------------------------------------------------
# Database outage
# --------------------------------------------------------------------------------------------
OUTAGE_SECONDS = 30.0


@pytest.fixture
def private_pg():
    """A PostgreSQL server of this test alone (the session one is shared and must stay up)."""
    with throwaway_server() as server:
        yield server


def _pg_ctl(server, *args: str) -> None:
    res = subprocess.run(_cmd(server.run_as, [str(server.bindir / "pg_ctl"), "-D", str(server.datadir), *args]),
                         capture_output=True, text=True, timeout=90)
    assert res.returncode == 0, res.stderr[-2000:]


def pg_down(server) -> None:
    _pg_ctl(server, "-m", "fast", "-w", "stop")


def pg_up(server) -> None:
    # the same options tests/pg.py starts the server with (same port: the URL does not change)
    opts = (f"-p {server.port} -c listen_addresses=127.0.0.1 -c unix_socket_directories={server.root} "
            "-c fsync=off -c synchronous_commit=off -c full_page_writes=off -c max_connections=50")
    _pg_ctl(server, "-l", str(server.root / "server.log"), "-o", opts, "-w", "-t", "60", "start")


@pytest.mark.slow
def test_database_outage_engine_buffers_retries_and_loses_no_row(spark, tmp_path, private_pg):
    db = private_pg.url(private_pg.database)
    cfg = gen_cfg(tmp_path, db)
    lines: list[str] = []
    seen: list[int] = []
    t = {"down": None, "up": None, "after_up": 0}
    down_batches: list[int] = []
    max_buffered = 0

    def after(engine: SparkEngine, batch_id: int) -> None:
        nonlocal max_buffered
        seen.append(batch_id)
        max_buffered = max(max_buffered, engine.driver.sink.backlog)
        now = time.monotonic()
        if t["down"] is None:
            if len(seen) == 3:
                pg_down(private_pg)
                t["down"] = time.monotonic()
        elif t["up"] is None:
            down_batches.append(batch_id)
            if now - t["down"] >= OUTAGE_SECONDS:
                pg_up(private_pg)
                t["up"] = time.monotonic()
        else:
            t["after_up"] += 1
            if engine.driver.sink.backlog == 0 and t["after_up"] >= 2:
                engine.lifecycle.stop_requested.set()

    engine = SparkEngine(cfg, after_batch=after, log=lines.append)
    try:
        assert engine.run() == 0
    finally:
        if t["down"] is not None and t["up"] is None:  # never leave the server down
            pg_up(private_pg)
    assert t["up"] is not None, "the engine stopped before the outage ended:\n" + "\n".join(lines[-20:])
    outage = t["up"] - t["down"]
    assert outage >= OUTAGE_SECONDS

    # the engine kept processing during the outage and said so in its status line
    assert len(down_batches) >= 5, down_batches
    down_lines = [ln for ln in lines if "db DOWN" in ln]
    assert len(down_lines) >= len(down_batches) - 1
    buffered = [int(ln.split("db DOWN, ")[1].split(" ")[0]) for ln in down_lines]
    assert max(buffered) >= len(down_batches) and buffered == sorted(buffered)
    assert any("metrics database unavailable, buffering" in ln for ln in lines)
    assert any("metrics database back" in ln and "nothing lost" in ln for ln in lines)
    assert engine.driver.sink.backlog == 0 and engine.driver.sink.failures >= 1

    # every processed batch has exactly one metrics row; nothing lost, nothing doubled
    store = connect(db)
    rows = store.interval_metrics(engine.snapshot.run_id)
    batch_ids = [r["batch_id"] for r in rows]
    assert batch_ids == seen == sorted(set(seen))
    assert sum(r["tuples"] for r in rows) == sum(engine.snapshot.consumed.values()) == sum(m["tuples"] for m in engine.snapshot.controller.intervals)
    per_batch_workers = Counter(w["batch_id"] for w in store.worker_metrics(engine.snapshot.run_id))
    assert all(per_batch_workers[b] == r["n_workers"] for b, r in zip(batch_ids, rows))
    assert store.get_run(engine.snapshot.run_id)["status"] == "finished"
    assert Counter(engine.snapshot.controller.results()) == by_fingerprint(generator_truth(cfg, engine.snapshot.consumed))
    report("db_outage", {
        "outage_seconds": round(outage, 1), "batches_total": len(seen), "batches_during_outage": len(down_batches),
        "max_rows_buffered": max_buffered, "failed_write_attempts": engine.driver.sink.failures,
        "metric_rows_expected": len(seen), "metric_rows_written": len(rows), "rows_lost": len(seen) - len(rows),
        "tuples": sum(engine.snapshot.consumed.values()),
    })


# --------------------------------------------------------------------------------------------
# Bad input: 1e5 malformed Kafka records
# --------------------------------------------------------------------------------------------
MAX_KEY_BYTES = 1024  # the skewlab-kafka source's default max_key_bytes
BAD = {"no_key": 40_000, "bad_utf8": 40_000, "oversized": 20_000}  # 1e5 malformed records
N_GOOD = 20_000


def _bad_record(reason: str, i: int, rng: random.Random) -> tuple[bytes | None, bytes]:
    if reason == "no_key":
        return None, f"no key {i}".encode()
    if reason == "bad_utf8":
        junk = rng.choice([b"\xff", b"\xc3\x28", b"\xed\xa0\x80", b"\xe2\x82", b"\x80abc", b"\xf8\x88\x80\x80\x80"])
        return b"k" + junk + str(i).encode(), b"bad utf8"
    # oversized: longer than max_key_bytes (some of them also invalid UTF-8: size is checked first)
    body = b"x" * (MAX_KEY_BYTES + 1 + i % 7) if i % 3 else b"\xff" * (MAX_KEY_BYTES + 1)
    return body, b"oversized"


def _good_keys(n: int, seed: int) -> list[str]:
    rng = np.random.default_rng(seed)
    keys = [f"v{int(x)}" for x in rng.zipf(1.3, n) % 3000]
    keys[0] = "b" * MAX_KEY_BYTES  # boundary: exactly max_key_bytes bytes is valid
    keys[1] = "ключ-" + "é" * ((MAX_KEY_BYTES - len("ключ-".encode())) // 2)  # multi-byte, <= max bytes
    for j in range(2, 60):
        keys[j] = f"ключ{j % 5}-日本"  # valid multi-byte keys
    return keys


@pytest.mark.slow
def test_malformed_kafka_records_are_dead_letters_and_valid_ones_all_processed(spark, tmp_path, kafka_broker):
    from kafka import KafkaProducer

    from skewlab.engine.io.kafka_io import ensure_topic

    assert len(_good_keys(N_GOOD, 1)[1].encode()) <= MAX_KEY_BYTES
    topic = "reliability-bad-input"
    partitions = 2
    assert ensure_topic(kafka_broker, topic, partitions) == partitions
    good = _good_keys(N_GOOD, 1)
    kinds = ["good"] * N_GOOD + [r for r, n in BAD.items() for _ in range(n)]
    rng = random.Random(7)
    rng.shuffle(kinds)  # malformed records interleaved at random with the valid ones
    producer = KafkaProducer(bootstrap_servers=kafka_broker, acks=1, linger_ms=20, batch_size=1 << 20,
                             max_request_size=8 << 20)
    gi = 0
    t0 = time.monotonic()
    for i, kind in enumerate(kinds):
        if kind == "good":
            key, value = good[gi].encode(), str(i).encode()
            gi += 1
        else:
            key, value = _bad_record(kind, i, rng)
        producer.send(topic, key=key, value=value, partition=i % partitions)
    producer.flush(timeout=120)
    producer.close()
    produce_s = time.monotonic() - t0
    total = len(kinds)

    processed = {"n": 0}

    def after(engine: SparkEngine, batch_id: int) -> None:
        processed["n"] = sum(m["tuples"] for m in engine.snapshot.controller.intervals) + engine.snapshot.dead_total
        if processed["n"] >= total:
            engine.lifecycle.stop_requested.set()

    db = f"sqlite:///{tmp_path}/db.sqlite"
    cfg = EngineConfig(source="kafka", bootstrap=kafka_broker, topic=topic, db=db, checkpoint=str(tmp_path / "ckpt"),
                       algorithm="mixed", workers=4, interval=0.5, max_per_batch=40_000, window=100_000, shadow=[],
                       duration=300)
    lines: list[str] = []
    engine = SparkEngine(cfg, after_batch=after, log=lines.append)
    t1 = time.monotonic()
    assert engine.run() == 0
    run_s = time.monotonic() - t1
    assert processed["n"] == total, "\n".join(lines[-10:])
    assert not any("failed" in ln for ln in lines), [ln for ln in lines if "failed" in ln]

    # every malformed record counted under its exact reason, in memory and in the database
    assert engine.snapshot.dead_total == sum(BAD.values()) == 100_000
    dead = {d["reason"]: d for d in connect(db).dead_letters(engine.snapshot.run_id)}
    assert {r: d["count"] for r, d in dead.items()} == BAD
    # samples: the offending record's first RAW_BYTES bytes as readable text (raw_text), bounded
    assert all(d["sample"] for d in dead.values())
    assert all(len(s) <= 4 * RAW_BYTES + 1 for d in dead.values() for s in d["sample"])
    assert all(re.fullmatch(r"no key \d+", s) for s in dead["no_key"]["sample"]), dead["no_key"]
    assert all(s.startswith("k") and "\\x" in s for s in dead["bad_utf8"]["sample"]), dead["bad_utf8"]
    assert all(s.endswith("…") and s[0] in "x\\" for s in dead["oversized"]["sample"]), dead["oversized"]
    # every valid record processed, keys intact (UTF-8, boundary length)
    assert Counter(engine.snapshot.controller.results()) == by_fingerprint(Counter(good))
    assert sum(engine.snapshot.consumed.values()) == total
    report("bad_input", {
        "records_total": total, "malformed": sum(BAD.values()), "malformed_by_reason": BAD, "valid": N_GOOD,
        "dead_letters_counted": engine.snapshot.dead_total, "valid_processed": sum(engine.snapshot.controller.results().values()),
        "batches": engine.driver.batches_done, "produce_seconds": round(produce_s, 1), "engine_seconds": round(run_s, 1),
    })


# --------------------------------------------------------------------------------------------
# Bad commands
# --------------------------------------------------------------------------------------------
INJECTION = [
    "hash; DROP TABLE commands; --",
    "mixed' OR '1'='1",
    "__import__('os').system('touch /tmp/pwned')",
    "{{7*7}}",
    "${jndi:ldap://x/a}",
    "../../etc/passwd",
    "hash\x00",
    "mixed\n",
    "a" * 10_000,
]

#: (kind, payload) submitted through the Store (the path the dashboard and `skewlab control` use)
BAD_COMMANDS: list[tuple[str, object]] = [
    ("set-workers", {"workers": 0}),
    ("set-workers", {"workers": -3}),
    ("set-workers", {"workers": 1025}),
    ("set-workers", {"workers": 10**12}),
    ("set-workers", {"workers": 3.5}),
    ("set-workers", {"workers": "eight"}),
    ("set-workers", {"workers": True}),
    ("set-workers", {"workers": None}),
    ("set-workers", {"workers": [8]}),
    ("set-workers", {"workers": {"n": 8}}),
    ("set-workers", {"workers": "8; DROP TABLE runs"}),
    ("set-workers", {}),
    ("set-workers", {"workers": 8, "extra": 1}),
    ("set-algorithm", {"algorithm": "nosuch"}),
    ("set-algorithm", {"algorithm": None}),
    ("set-algorithm", {"algorithm": 42}),
    ("set-algorithm", {"algorithm": ["mixed"]}),
    ("set-algorithm", {"algorithm": "mixed", "params": {"theta_max": -1}}),
    ("set-algorithm", {"algorithm": "mixed", "params": {"nope": 1}}),
    ("set-algorithm", {"algorithm": "mixed", "params": "theta_max=0.1"}),
    ("set-param", {"params": {"theta_max": -0.5}}),
    ("set-param", {"params": {"theta_max": 1e9}}),
    ("set-param", {"params": {"theta_max": "lots"}}),
    ("set-param", {"params": {"theta_max": float("inf")}}),
    ("set-param", {"params": {"theta_max": None}}),
    ("set-param", {"params": {"no_such_param": 1}}),
    ("set-param", {"params": {}}),
    ("set-param", {"params": ["theta_max", 0.1]}),
    ("set-param", {"params": {"theta_max": "0.1; DROP TABLE runs"}}),
    ("pause", {"now": True}),
    ("resume", {"x": 1}),
] + [("set-algorithm", {"algorithm": s}) for s in INJECTION] \
  + [("set-param", {"params": {s[:200]: 1}}) for s in INJECTION] \
  + [("set-workers", {"workers": s}) for s in INJECTION]

#: written to the commands table directly (the Store refuses them): a foreign or buggy client
RAW_COMMANDS: list[tuple[str, str]] = [
    ("drop-table", "{}"),
    ("SET-WORKERS", '{"workers": 8}'),
    ("set-workers; DROP TABLE runs", '{"workers": 8}'),
    ("set-workers", "[8]"),
    ("set-workers", '"8"'),
    ("set-workers", "not json at all"),
    ("set-algorithm", '{"algorithm": "hash"'),
    ("set-param", "null"),
]


def _controller_fingerprint(c) -> dict:
    codes, counts = c.state.merged()
    return {
        "algorithm": c.planner.name,
        "params": dict(c.planner.p),
        "workers": c.n_workers,
        "routing_table": c.planner.table.as_dict() if hasattr(c.planner, "table") else None,
        "grouping_pickle": pickle.dumps(c.planner, protocol=pickle.HIGHEST_PROTOCOL),
        "state": (codes.tobytes(), counts.tobytes()),
        "vocab": len(c.vocab.names),
        "migrations": len(c.migrations),
        "events": len(c.events),
    }


#: the key fingerprints of the made-up batches of the bad-commands scenario, skewed counts
KEYS = np.arange(1, 501, dtype=np.uint64) * np.uint64(0x9E3779B97F4A7C15)
SKEW = (2000.0 / np.arange(1, 501) ** 1.2).astype(np.int64) + 1


def _step(snapshot, batch_id: int, seq: int, commands=()):
    """The driver's step (:func:`skewlab.engine.runtimes.spark.driver_step.step`) on one made-up batch:
    every key on the worker the published grouping routes it to."""
    from skewlab.engine.runtimes.spark.driver_step import DriverSettings, StepInput, step
    from skewlab.engine.runtimes.spark.messages import BatchOutput, SourceSide, WorkerSummary

    router = pickle.loads(pickle.dumps(snapshot.controller.planner.router))  # routing may change a router
    workers = np.asarray(router.route(KEYS.copy()), dtype=np.int64)
    counts = np.roll(SKEW, 3 * batch_id)
    n = int(counts.sum())
    out = BatchOutput(workers=workers, fps=KEYS.copy(), counts=counts,
                      states={0: SourceSide(0, batch_id, n, consumed=seq + n, first_seq=seq)},
                      summaries={w: WorkerSummary(batch_id, keys=10, held=0, state_bytes=100)
                                 for w in range(snapshot.controller.n_workers)})
    return step(snapshot, StepInput(batch_id, out, started=0.0, clock=lambda: 0.25, wall=1000.0 + batch_id,
                                    commands=tuple(commands)), DriverSettings("count", True), owned=True)


def test_bad_commands_rejected_with_reasons_state_unchanged(tmp_path):
    """The commands as the engine meets them — read with ``Store.pending_commands``, applied by the
    driver's step, marked with ``Store.mark_command`` — without Spark: the step is where the engine
    applies them (the engine around it is tested by tests/engine/test_engine.py, whose run also has
    rejected commands)."""
    from sqlalchemy import text

    from skewlab.cli import main
    from skewlab.engine.algorithms import registry
    from skewlab.engine.algorithms.keys import FingerprintVocabulary
    from skewlab.engine.control.controller import Controller
    from skewlab.engine.runtimes.spark import driver_step

    db = f"sqlite:///{tmp_path}/db.sqlite"
    store = connect(db)
    run = store.create_run("mixed", {}, n_workers=4, name="bad-commands")
    controller = Controller(registry.create("mixed", 4, 1, 0, {}), FingerprintVocabulary(), window=100_000)
    controller.track_orders = True
    s = driver_step.DriverSnapshot(run_id=run, controller=controller, shadow=None, partitions=16)
    seq = 0

    def batch(b: int, commands=()):
        nonlocal s, seq
        s, d = _step(s, b, seq, commands)
        seq = sum(s.consumed.values())
        store.record_interval(run, d.record)
        for m in d.marks:  # as the engine marks them
            store.mark_command(m.command_id, m.status, reason=m.reason or "", applied_batch=m.applied_batch, run_id=run)
        return d

    batch(0)
    batch(1)
    store_refused: list[tuple[str, str]] = []  # (kind, reason): refused by the Store at submission
    bad_ids: list[int] = []
    for kind, payload in BAD_COMMANDS:
        try:
            bad_ids.append(store.submit_command(kind, payload))
        except ValueError as exc:  # e.g. infinity is not JSON: refused before reaching the table
            store_refused.append((kind, str(exc)))
    with store.engine.begin() as conn:
        for kind, payload in RAW_COMMANDS:
            now = time.time()
            res = conn.execute(text("INSERT INTO commands (run_id, kind, payload, status, reason, created_at, "
                                    "updated_at) VALUES (NULL, :k, :p, 'pending', '', :t, :t)"),
                               {"k": kind, "p": payload, "t": now})
            bad_ids.append(int(res.lastrowid))

    # the batch that consumes the bad commands: every one rejected, controller unchanged bit for bit
    pending = tuple(store.pending_commands(run))
    before = _controller_fingerprint(s.controller)
    s, marks, _, _ = driver_step.apply_commands(s, pending, 2, driver_step.DriverSettings("count", True))
    assert _controller_fingerprint(s.controller) == before
    for m in marks:
        store.mark_command(m.command_id, m.status, reason=m.reason or "", applied_batch=m.applied_batch, run_id=run)
    assert sorted(m.command_id for m in marks) == sorted(bad_ids)
    assert len(bad_ids) + len(store_refused) == len(BAD_COMMANDS) + len(RAW_COMMANDS)
    assert all(m.status == "rejected" and m.reason for m in marks)
    batch(2, store.pending_commands(run))  # nothing pending any more: nothing applied twice
    # and in the database: rejected with a one-line reason each
    rows = {c["id"]: c for c in store.recent_commands(1000)}
    assert all(rows[i]["status"] == "rejected" and rows[i]["reason"] for i in bad_ids)
    assert all("\n" not in rows[i]["reason"] for i in bad_ids)
    assert all(reason and "\n" not in reason for _, reason in store_refused)
    reasons = [rows[i]["reason"] for i in bad_ids]
    assert sum("out of range" in r for r in reasons) >= 3
    assert sum("unknown command kind" in r for r in reasons) == 3
    assert sum("unknown algorithm" in r for r in reasons) >= len(INJECTION)
    # the database is intact and the injection strings were stored verbatim, never executed
    assert store.get_run(run) is not None and len(store.interval_metrics(run)) == 3
    assert any(r["payload"].get("algorithm") == INJECTION[0] for r in rows.values() if isinstance(r["payload"], dict))
    # a valid command afterwards still applies
    good = store.submit_command("set-param", {"params": {"theta_max": 0.2}})
    batch(3, store.pending_commands(run))
    assert store.get_command(good)["status"] == "applied"
    assert s.controller.planner.p["theta_max"] == 0.2
    assert s.controller.n_workers == 4 and s.controller.planner.name == "mixed"

    # the CLI refuses the same things before they reach the database (exit 2, one line)
    n_before = len(store.recent_commands(10_000))
    for argv in (["set-workers", "0"], ["set-workers", "eight"], ["set-workers", "8; DROP TABLE runs"],
                 ["set-algorithm", INJECTION[0]], ["set-algorithm", "mixed", "theta_max=-1"],
                 ["set-param", "theta_max=lots"], ["pause", "now"]):
        assert main(["control", "--db", db, *argv]) == 2
    assert len(store.recent_commands(10_000)) == n_before
    report("bad_commands", {"bad_commands": len(BAD_COMMANDS) + len(RAW_COMMANDS), "via_store": len(BAD_COMMANDS),
                            "refused_by_store": len(store_refused), "raw_rows": len(RAW_COMMANDS),
                            "rejected_by_engine": len(bad_ids), "state_changed": False,
                            "longest_reason": max(len(rows[i]["reason"]) for i in bad_ids)})


# --------------------------------------------------------------------------------------------
# Worker changes under load
# --------------------------------------------------------------------------------------------
def _moved_between(before: tuple[np.ndarray, np.ndarray], after: tuple[np.ndarray, np.ndarray]) -> float:
    """State units that left their (key, worker) place: sum over pairs of max(0, before - after)."""
    b = dict(zip(before[0].tolist(), before[1].tolist()))
    a = dict(zip(after[0].tolist(), after[1].tolist()))
    return float(sum(max(0, v - a.get(code, 0)) for code, v in b.items()))


def test_worker_changes_under_load_lose_nothing_and_report_moved_state(spark, tmp_path, monkeypatch):
    import skewlab.engine.runtimes.spark.driver_step as driver_step

    db = f"sqlite:///{tmp_path}/db.sqlite"
    cfg = gen_cfg(tmp_path, db, workers=4, max_batches=7, duration=None, max_per_batch=3000)
    store = connect(db)
    plan = {1: 8, 3: 6}  # after batch 1: add 4 workers; after batch 3: remove 2

    def after(engine: SparkEngine, batch_id: int) -> None:
        if batch_id in plan:
            store.submit_command("set-workers", {"workers": plan[batch_id]})

    engine = SparkEngine(cfg, after_batch=after, log=lambda m: None)
    resizes: list[dict] = []
    original = driver_step.apply_commands

    def wrapped(snapshot, commands, batch_id, *a, **kw):  # the driver step's command application
        c = snapshot.controller
        n0, before = c.n_workers, tuple(x.copy() for x in c.state.merged())
        per_key0 = c.state.per_key()
        out = original(snapshot, commands, batch_id, *a, **kw)
        c, events = out[0].controller, out[2]
        if c.n_workers != n0:
            after_state = c.state.merged()
            per_key1 = c.state.per_key()
            _, workers = decode(after_state[0])
            resizes.append({"batch": batch_id, "from": n0, "to": c.n_workers, "events": events,
                            "moved": _moved_between(before, after_state), "total": float(before[1].sum()),
                            "per_key_same": all(np.array_equal(x, y) for x, y in zip(per_key0, per_key1)),
                            "max_worker": int(workers.max()) if workers.size else -1})
        return out

    monkeypatch.setattr(driver_step, "apply_commands", wrapped)
    assert engine.run() == 0
    c = engine.snapshot.controller
    assert [(r["from"], r["to"]) for r in resizes] == [(4, 8), (8, 6)]
    assert c.n_workers == 6
    # no tuple lost, none doubled
    assert sum(engine.snapshot.consumed.values()) == sum(m["tuples"] for m in c.intervals) == 7 * 3000
    assert Counter(c.results()) == by_fingerprint(generator_truth(cfg, engine.snapshot.consumed))

    mig = store.migration_events(engine.snapshot.run_id)
    ev = [e for e in store.events(engine.snapshot.run_id) if e["kind"] == "workers"]
    assert len(ev) == 2
    for r, e in zip(resizes, ev):
        assert r["per_key_same"] and r["max_worker"] < r["to"]
        assert r["moved"] > 0  # re-homing on a resize moves state ...
        reported = [x["detail"] for x in r["events"] if x["kind"] == "workers"][0]
        assert reported["previous"] == r["from"] and reported["workers"] == r["to"]
        assert reported["state_moved"] == pytest.approx(r["moved"])  # ... exactly as much as reported
        assert e["detail"]["state_moved"] == pytest.approx(r["moved"])
        assert reported["migration_cost"] == pytest.approx(r["moved"] / r["total"])
        # the migration rows (one per export batch and interval) list every planned move they carried
        moves = [mv for m in mig for mv in m["detail"].get("moves", [])
                 if mv["reason"] == "workers" and mv["state_moved"] == pytest.approx(r["moved"])]
        assert len(moves) == 1 and moves[0]["keys"] == reported["keys"]
    # every export's bytes are reported once: on its first interval's row, which the others name
    with_bytes = {(m["detail"]["export_batch"], m["planned_interval"]): m["bytes_moved"] for m in mig
                  if m["bytes_moved"] is not None}
    assert with_bytes and all(b > 0 for b in with_bytes.values())
    assert all(m["bytes_moved"] is not None or (m["detail"]["export_batch"], m["detail"]["bytes_with_interval"]) in with_bytes
               for m in mig)
    assert all(m["pause_batches"] == 1 for m in mig)
    metrics = store.interval_metrics(engine.snapshot.run_id)
    # commands read at the end of batch 2 (the hook of batch 1 ran after that read) take effect from batch 3
    assert [m["n_workers"] for m in metrics] == [4, 4, 4, 8, 8, 6, 6]
    last = metrics[-1]["batch_id"]
    assert {w["worker"] for w in store.worker_metrics(engine.snapshot.run_id) if w["batch_id"] == last} == set(range(6))
    report("worker_changes", {"resizes": [(r["from"], r["to"]) for r in resizes], "tuples": sum(engine.snapshot.consumed.values()),
                              "state_moved": [r["moved"] for r in resizes], "tuples_lost": 0})
