"""The Spark engine end to end on the session-scoped local[2] SparkSession: generator, file and Kafka
sources, operator commands, metrics in the database, restart from the checkpoint, and merged per-key
results equal to the ground truth regenerated from the consumed source offsets."""

from __future__ import annotations

import dataclasses
import json
import os
import threading
from collections import Counter
from pathlib import Path

import pytest

pytest.importorskip("pyspark")

from skewlab.cli import main  # noqa: E402
from skewlab.engine.runtimes.spark import batch_phases  # noqa: E402
from skewlab.engine.runtimes.spark.engine import EngineConfig, SparkEngine  # noqa: E402
from skewlab.storage import connect  # noqa: E402
from tests.engine_helpers import by_fingerprint, generator_keys_of, generator_truth  # noqa: E402
from tests.spark_truth import (batch_keys, batch_values, committed_ranges, ewma_truth, join_truth,  # noqa: E402
                               only, sink_results, windowed_truth)

ZIPF = {"keys": 300, "z": 1.2}


def gen_cfg(tmp_path, **kw):
    """A generator run on the test session's Spark.  A test whose run never grows past its start gives
    ``max_workers``: each state partition beyond the workers is a task of every batch (``2 * workers``
    by default)."""
    base = dict(
        source="generator", db=f"sqlite:///{tmp_path}/db.sqlite", checkpoint=str(tmp_path / "ckpt"),
        algorithm="pkg", workers=3, sources=2, interval=0.3, rate=0, max_per_batch=3000, window=100_000,
        workload="zipf", workload_params=dict(ZIPF), seed=5, shadow=["hash", "mixed"], max_batches=4,
    )
    base.update(kw)
    return EngineConfig(**base)




def final(results: dict, checkpoint) -> dict:
    """The results a stopped run must have written: those of every batch before the last committed
    one, whose moved keys' tuples are held until the next batch imports their state (a restart
    releases them)."""
    last = max(committed_ranges(checkpoint))
    return {k: v for k, v in results.items() if k[0] < last}


def test_generator_run_commands_metrics_and_ground_truth(spark, tmp_path, monkeypatch):
    cfg = gen_cfg(tmp_path, max_batches=5, max_workers=5)  # state partitions: as many as the run grows to
    phases: list[tuple[str, int, bool, bool]] = []  # the named points of each batch the driver passed
    monkeypatch.setattr(batch_phases, "hook", lambda phase, b, *, exports, imports: phases.append(
        (phase, b, exports, imports)))
    store = connect(cfg.db)
    bad = store.submit_command("set-workers", {"workers": 0})
    seen: list[int] = []
    exported: set[str] = set()  # export batches whose blobs were in the checkpoint's migrations directory

    def after(engine, batch_id):
        seen.append(batch_id)
        if os.path.isdir(engine.driver.migrations.directory):
            exported.update(os.listdir(engine.driver.migrations.directory))
        if len(seen) == 2:  # mid-run, as an operator would
            engine.store.submit_command("set-workers", {"workers": 5})
            engine.store.submit_command("set-algorithm", {"algorithm": "mixed", "params": {"theta_max": 0.1}})
            engine.store.submit_command("set-param", {"params": {"theta_max": "lots"}})

    engine = SparkEngine(cfg, after_batch=after, log=lambda m: None)
    assert engine.run() == 0
    # in order, each batch (where the exactly-once tests kill the engine), with its export and import
    assert [p[:2] for p in phases] == [(phase, b) for b in seen for phase in batch_phases.PHASES], phases
    exports = {b for _, b, e, _ in phases if e}
    assert exports and {b for _, b, _, i in phases if i} >= {b + 1 for b in exports if b < seen[-1]}, phases
    c = engine.snapshot.controller
    assert c.planner.name == "mixed" and c.n_workers == 5 and c.planner.p["theta_max"] == 0.1
    assert sum(engine.snapshot.consumed.values()) == sum(m["tuples"] for m in c.intervals) > 0
    assert Counter(c.results()) == by_fingerprint(generator_truth(cfg, engine.snapshot.consumed))

    run = engine.snapshot.run_id
    rows = store.interval_metrics(run)
    assert [r["batch_id"] for r in rows] == seen and len(rows) == 5
    assert rows[-1]["n_workers"] == 5 and rows[-1]["algorithm"] == "mixed"
    assert all(r["throughput"] > 0 and r["batch_latency_ms"] > 0 for r in rows if r["tuples"])
    assert {w["worker"] for w in store.worker_metrics(run) if w["batch_id"] == rows[-1]["batch_id"]} == set(range(5))
    # task time from Spark's task metrics for every worker that had tuples (a worker without rows runs no task)
    busy = [w for w in store.worker_metrics(run) if w["tuples"]]
    assert busy and all(w["processing_seconds"] is not None and w["processing_seconds"] > 0 for w in busy)
    hot = store.hot_keys(run)
    assert hot and hot[0]["share"] > 0
    assert hot[0]["key"].startswith("k")  # named by its owner, whose most frequent keys travel with their names
    shadow = store.shadow_results(run)
    assert {s["algorithm"] for s in shadow} == {"hash", "mixed", "pkg"}  # pkg: shadowed once switched away from
    cmds = {x["id"]: x for x in store.recent_commands(10)}
    assert cmds[bad]["status"] == "rejected" and "out of range" in cmds[bad]["reason"]
    statuses = sorted((x["kind"], x["status"]) for x in cmds.values())
    assert ("set-algorithm", "applied") in statuses and ("set-workers", "applied") in statuses
    assert ("set-param", "rejected") in statuses
    applied = [x for x in cmds.values() if x["status"] == "applied"]
    # read at the end of batch seen[2] (the hook ran after that of seen[1]), in effect from the next one
    assert all(x["applied_batch"] == seen[3] for x in applied)
    kinds = [e["kind"] for e in store.events(run)]
    assert "workers" in kinds and "algorithm" in kinds
    # one numbering: the command's events and 'applied at interval' both name the first interval in effect
    first = next(r["interval"] for r in rows if r["batch_id"] == seen[3])
    assert {e["interval"] for e in store.events(run) if e["command_id"] in {x["id"] for x in applied}} == {first}
    assert {x["applied_interval"] for x in applied} == {first}

    # restart with the same checkpoint: same run, continues from the snapshot, still exact
    again = SparkEngine(gen_cfg(tmp_path, max_batches=2), log=lambda m: None)
    assert again.snapshot.run_id == run and again.snapshot.last_batch == seen[-1]
    again.run()
    assert again.snapshot.last_batch > seen[-1]
    assert Counter(again.snapshot.controller.results()) == by_fingerprint(generator_truth(cfg, again.snapshot.consumed))
    assert len(store.interval_metrics(run)) == 7
    # the workers' own results (state on the executors, through the resize and the switch) equal the
    # windowed counts recomputed from Spark's offset log, each (batch, key) once
    # (pkg splits keys: one row per (batch, key), merged in Spark from the workers' shares)
    got, rows, distinct = sink_results(again.results)
    truth = final(windowed_truth(batch_keys(tmp_path / "ckpt", generator_keys_of(cfg)), cfg.window), tmp_path / "ckpt")
    assert rows == distinct and only(got, truth) == truth
    assert any(m["bytes_moved"] for m in store.migration_events(run))
    assert all(w["state_bytes"] is not None for w in store.worker_metrics(run))
    # the moved state went task to task through the checkpoint's filesystem, pruned once imported
    assert exported and all(name.startswith("batch=") for name in exported)
    assert all(int(name[len("batch="):]) >= again.snapshot.last_batch - 1 for name in os.listdir(again.driver.migrations.directory))


@dataclasses.dataclass
class PacedRun:
    """What :func:`paced_run` saw of its engine run."""

    cfg: EngineConfig
    engine: SparkEngine
    rows: list[dict]
    workers: list[dict]
    lines: list[str]


@pytest.fixture(scope="module")
def paced_run(spark, tmp_path_factory) -> PacedRun:
    """ONE engine run read by several tests (each used to start its own query): a generator paced at
    2000 tuples/s (batch 0 must carry the tuples that arrived while the query started), hash on 2
    workers with a service time of 10 ms per tuple (each worker's task time must cover it), 3 batches.
    What the tests read is taken when the run ends (a later test continues its checkpoint)."""
    tmp_path = tmp_path_factory.mktemp("paced")
    cfg = gen_cfg(tmp_path, algorithm="hash", workers=2, max_workers=2, rate=2000, interval=0.5, max_per_batch=300,
                  shadow=[], service_us=10_000.0, max_batches=3)
    store = connect(cfg.db)
    lines: list[str] = []
    engine = SparkEngine(cfg, log=lines.append)
    assert engine.run() == 0
    return PacedRun(cfg, engine, store.interval_metrics(engine.snapshot.run_id), store.worker_metrics(engine.snapshot.run_id), lines)


def test_the_first_batch_carries_the_tuples_that_arrived_while_the_query_started(paced_run):
    """Issue 26 item 1: a paced generator counts from the query's start, so batch 0 carries data (counted
    from the first planning, batch 0 was empty and the first data waited a whole batch)."""
    r = paced_run
    assert r.rows[0]["batch_id"] == 0 and r.rows[0]["tuples"] > 0
    # issue 38 item 7: a start on a warm numba cache says nothing about compiling
    assert not [line for line in r.lines if "compiling" in line], r.lines
    assert Counter(r.engine.snapshot.controller.results()) == by_fingerprint(generator_truth(r.cfg, r.engine.snapshot.consumed))


def test_service_time_is_in_every_workers_task_time(paced_run):
    """``--service-us``: each worker's task (Spark's task metrics) lasts at least its tuples times the
    service time; the results stay exact (split keys: test_split_keys_service_time_is_not_the_merge_stages)."""
    r = paced_run
    busy = [w for w in r.workers if w["tuples"]]
    assert busy and all(w["processing_seconds"] >= w["tuples"] * 10_000e-6 for w in busy)
    assert Counter(r.engine.snapshot.controller.results()) == by_fingerprint(generator_truth(r.cfg, r.engine.snapshot.consumed))


def test_pause_and_resume_lose_nothing(spark, tmp_path):
    cfg = gen_cfg(tmp_path, algorithm="hash", max_workers=3, shadow=[], max_batches=4)
    store = connect(cfg.db)
    resumed = threading.Event()

    def after(engine, batch_id):
        if batch_id == 0:
            engine.store.submit_command("pause", {})

            def later():  # resume once the engine has applied the pause (it is then holding batches)
                import time

                deadline = time.monotonic() + 120
                while store.recent_commands(1)[0]["status"] == "pending" and time.monotonic() < deadline:
                    time.sleep(0.05)
                store.submit_command("resume", {})
                resumed.set()

            threading.Thread(target=later, daemon=True).start()

    engine = SparkEngine(cfg, after_batch=after, log=lambda m: None)
    engine.run()
    assert resumed.is_set() and engine.driver.batches_done == 4
    assert Counter(engine.snapshot.controller.results()) == by_fingerprint(generator_truth(cfg, engine.snapshot.consumed))
    assert [c["status"] for c in store.recent_commands(5)] == ["applied", "applied"]


def test_sources_route_with_the_snapshot_published_for_the_batch(paced_run):
    """The sources route each batch with the routing snapshot the engine published for it; the offset log
    names it, so a replay uses the same one.  A batch routed with another batch's snapshot is refused
    (continuing the checkpoint of :func:`paced_run`)."""
    from skewlab.engine.runtimes.spark.topology import RoutingSnapshot, control_payloads

    cfg, engine = paced_run.cfg, paced_run.engine
    offsets = Path(cfg.checkpoint) / "spark" / "offsets"
    logged = {int(p.name): json.loads(p.read_text().splitlines()[-1]) for p in offsets.iterdir() if p.name.isdigit()}
    assert {b: o["route"] for b, o in logged.items()} == {b: b for b in logged} and len(logged) >= 3
    assert engine.driver.routes.next_version() == engine.snapshot.last_batch + 1  # published for the next batch

    bad = SparkEngine(dataclasses.replace(cfg, max_batches=2), log=lambda m: None)
    bad.driver.publish_route = lambda b: bad.driver.routes.publish(
        b, RoutingSnapshot(b - 1, bad.snapshot.controller.planner.router, bad.snapshot.partitions,
                           control_payloads(bad.snapshot.next_orders, bad.snapshot.controller.vocab.fps, {0, 1}, bad.snapshot.partitions,
                                            batch=b - 1)).dumps())
    # the workers refuse it (their state is past that batch) before the driver would
    with pytest.raises(RuntimeError, match=r"routing snapshot of batch \d+, but this worker's state is already at"):
        bad.run()
    assert bad.snapshot.last_batch == engine.snapshot.last_batch  # nothing applied
    again = SparkEngine(dataclasses.replace(cfg, max_batches=1), log=lambda m: None)
    again.run()  # publishing the right snapshot again resumes the run, exactly
    assert again.snapshot.last_batch == engine.snapshot.last_batch + 1
    assert Counter(again.snapshot.controller.results()) == by_fingerprint(generator_truth(cfg, again.snapshot.consumed))


def test_a_new_run_routes_by_hash_until_its_groupings_kernels_are_compiled(spark, tmp_path, monkeypatch):
    """Issue 26 item 1: on a cold numba cache (the warm-up reports pkg compiling until batch 1 is done)
    a new run does not wait for its grouping's kernels: it routes by hash from batch 0, switches to pkg
    once the warm-up reports pkg compiled (one ``algorithm`` event each way, no command), and its
    results stay exact."""
    import skewlab.engine.runtimes.spark.engine as engine_module
    from skewlab.engine.runtimes.spark.driver_step import KERNELS_READY
    from tests.kernels_fixtures import KernelsCompilingUntilReleased

    monkeypatch.setattr(KernelsCompilingUntilReleased, "held", {"pkg"})
    monkeypatch.setattr(engine_module, "BackgroundWarmup", KernelsCompilingUntilReleased)
    cfg = gen_cfg(tmp_path, max_batches=None, shadow=[])
    done: list[int] = []

    def after(engine, batch_id):
        done.append(batch_id)
        if batch_id == 1:
            engine.kernels.release()  # the step of batch 2 switches: batch 3 routes by pkg
        if engine.snapshot.controller.planner.name == "pkg" and sum(1 for b in done if b > 0) >= 3 or len(done) > 40:
            engine.lifecycle.stop_requested.set()

    lines: list[str] = []
    engine = SparkEngine(cfg, after_batch=after, log=lines.append)
    assert engine.run() == 0
    rows = connect(cfg.db).interval_metrics(engine.snapshot.run_id)
    algorithms = [r["algorithm"] for r in rows]
    assert algorithms[0] == "hash" and algorithms[-1] == "pkg", algorithms
    assert algorithms == sorted(algorithms)  # hash … hash, then pkg … pkg: one switch
    switches = [e for e in connect(cfg.db).events(engine.snapshot.run_id) if e["kind"] == "algorithm"]
    assert [(e["detail"]["previous"], e["detail"]["algorithm"], e["command_id"]) for e in switches] == [
        ("pkg", "hash", None), ("hash", "pkg", None)]
    assert switches[0]["detail"]["reason"] == "the routing kernels of pkg are compiling"
    # the default room for set-workers (2 x 3 state partitions) is said with what it costs
    assert any("3 workers, room for 6 (" in line and "--max-workers 3 runs faster" in line for line in lines), lines
    assert switches[1]["detail"]["reason"] == KERNELS_READY
    assert switches[1]["interval"] == next(r["interval"] for r in rows if r["algorithm"] == "pkg")
    assert any("routing by hash until they are ready" in line for line in lines)
    assert any(line.startswith("routing kernels: compiling pkg in the background") for line in lines), lines
    assert Counter(engine.snapshot.controller.results()) == by_fingerprint(generator_truth(cfg, engine.snapshot.consumed))
    got, n_rows, distinct = sink_results(engine.results)
    truth = final(windowed_truth(batch_keys(tmp_path / "ckpt", generator_keys_of(cfg)), cfg.window), tmp_path / "ckpt")
    assert n_rows == distinct and only(got, truth) == truth


@pytest.fixture(scope="module")
def split_run(spark, tmp_path_factory):
    """ONE D-Choices run read by the split-key tests (each used to start its own query): dchoices
    splits the head keys over 6 workers, the window (2 batches) is shorter than the run, a service time
    of 2 ms per tuple; ``set-workers 2`` after batch 1 (the removed workers' shares of split keys move
    while the keys' other holders keep receiving tuples), a switch to the single-owner ``mixed`` after
    batch 3 (the split keys' shares move to one worker), then a restart from the same checkpoint.
    Yields (cfg, engine, results table as a dict of columns, the newest Spark job before the run)."""
    tmp_path = tmp_path_factory.mktemp("split")
    before = last_job(spark)
    cfg = gen_cfg(tmp_path, algorithm="dchoices", workers=6, max_workers=6, window=2, max_batches=6, shadow=[],
                  workload_params={"keys": 80, "z": 1.4}, max_per_batch=600, service_us=2_000.0)

    def after(engine, batch_id):
        if batch_id == 1:
            engine.store.submit_command("set-workers", {"workers": 2})
        if batch_id == 3:
            engine.store.submit_command("set-algorithm", {"algorithm": "mixed", "params": {"theta_max": 0.05}})

    engine = SparkEngine(cfg, after_batch=after, log=lambda m: None)
    assert engine.run() == 0 and engine.snapshot.shares_split
    assert engine.snapshot.controller.n_workers == 2 and engine.snapshot.controller.planner.name == "mixed"
    SparkEngine(dataclasses.replace(cfg, max_batches=2), log=lambda m: None).run()  # restart: same checkpoint
    return cfg, engine, engine.results.read().to_pydict(), before


def test_split_keys_with_a_finite_window_merge_to_the_ground_truth(split_run):
    """The sink holds exactly one row per (batch, key), merged in Spark from the workers' shares, equal
    to the key's windowed count — through a shrink (the exported share included at the move's batch),
    a switch to a single-owner rebalancer that moves the split keys' shares to one worker, and a restart."""
    cfg, engine, _, _ = split_run
    ckpt = Path(cfg.checkpoint)
    got, rows, distinct = sink_results(engine.results)
    truth = final(windowed_truth(batch_keys(ckpt, generator_keys_of(cfg)), cfg.window), ckpt)
    assert rows == distinct, "a (batch, key) was written twice"
    assert only(final(got, ckpt), truth) == truth
    assert engine.store.migration_events(engine.snapshot.run_id)  # the shrink and the switch moved split keys' shares


def test_split_keys_stay_split_after_a_shrink(split_run):
    """Keys were split and merged from batch 0, and still after the shrink (in effect from batch 3)
    until the switch to mixed (in effect from batch 5)."""
    _, _, t, _ = split_run
    shares = {}
    for b, s in zip(t["batch"], t["shares"]):
        shares[b] = max(shares.get(b, 0), s)
    assert shares[0] > 1 and max(shares[b] for b in (3, 4)) > 1, shares


def test_split_keys_service_time_is_not_the_merge_stages(split_run):
    """With split keys the batch runs a second job, the merge stage, whose tasks must not be taken for
    the workers': each worker's task lasts at least its tuples times the service time."""
    _, engine, _, _ = split_run
    busy = [w for w in engine.store.worker_metrics(engine.snapshot.run_id) if w["tuples"]]
    assert busy and all(w["processing_seconds"] >= w["tuples"] * 2_000e-6 for w in busy)


def spark_jobs(spark) -> list:
    """The Spark jobs the session's status store keeps (the newest ``spark.ui.retainedJobs``)."""
    jobs = spark.sparkContext._jsc.sc().statusStore().jobsList(None)
    return [jobs.apply(i) for i in range(jobs.size())]


def last_job(spark) -> int:
    """The id of the session's newest Spark job (-1: none yet)."""
    return max((int(j.jobId()) for j in spark_jobs(spark)), default=-1)


def merge_jobs(spark, run_id: int, after: int) -> int:
    """Run ``run_id``'s Spark jobs after job ``after`` that ran a merge stage on the executors (their
    description ends with task_metrics.MERGE_JOB_MARK); run ids repeat between the tests' databases,
    so ``after`` is the newest job before the run."""
    from skewlab.engine.runtimes.spark.task_metrics import MERGE_JOB_MARK

    texts = [str(j.description().get()) for j in spark_jobs(spark) if int(j.jobId()) > after and j.description().isDefined()]
    return sum(t.startswith(f"skewlab-{run_id}\n") and t.endswith(MERGE_JOB_MARK) for t in texts)


def test_a_small_merge_runs_on_the_driver_in_the_batchs_one_spark_job(spark, split_run):
    """Issue 36: the merge stage's second Spark job cost 0.33–0.47 s per batch under D-Choices; a
    batch whose previous merge was small (SMALL_MERGE) brings its merge-stage rows to the driver with
    its statistics and writes them there (share_merge.merge_on_driver): the split run above, exact
    (test_split_keys_with_a_finite_window_merge_to_the_ground_truth), ran no merge job."""
    _, engine, t, before = split_run
    assert max(t["shares"]) > 1  # keys were merged
    assert merge_jobs(spark, engine.snapshot.run_id, before) == 0


def test_merges_on_the_driver_and_on_the_executors_write_one_kafka_record_per_batch_and_key(
        spark, tmp_path, kafka_broker, monkeypatch):
    """The two places of the merge write the same (batch, writer) outputs.  With SMALL_MERGE at 0 the
    first batch merges on the driver (no batch before it) and every later one on the executors; a
    restart merges its first batch on the driver again.  D-Choices into a Kafka sink (writer w on
    partition w mod P, each (batch, writer) written once): the records read back equal the windowed
    counts recomputed from the offsets, each once."""
    from skewlab.engine.runtimes.spark import share_merge

    monkeypatch.setattr(share_merge, "SMALL_MERGE", 0)
    before = last_job(spark)
    cfg = gen_cfg(tmp_path, algorithm="dchoices", workers=3, max_workers=3, window=2, max_batches=4, shadow=[],
                  workload_params={"keys": 200, "z": 1.3}, max_per_batch=1200,
                  sink=f"kafka://{kafka_broker}/split-results")
    engine = SparkEngine(cfg, log=lambda m: None)
    assert engine.run() == 0 and engine.snapshot.shares_split
    again = SparkEngine(dataclasses.replace(cfg, max_batches=2), log=lambda m: None)
    again.run()
    got, rows, distinct = sink_results(again.results)
    truth = final(windowed_truth(batch_keys(tmp_path / "ckpt", generator_keys_of(cfg)), cfg.window), tmp_path / "ckpt")
    assert rows == distinct, "a (batch, key) was written twice"
    assert only(final(got, tmp_path / "ckpt"), truth) == truth and max(b for b, _ in truth) >= 4
    assert max(again.results.read().to_pydict()["shares"]) > 1
    # batches 1-3 of the first run and batch 1 of the restart merged on the executors
    assert merge_jobs(spark, engine.snapshot.run_id, before) == 4


def recorded_summaries(engine: SparkEngine) -> dict[int, dict]:
    """Batch → worker → :class:`WorkerSummary` of the workers that ran with a control order, filled as
    ``engine`` collects its batches."""
    summaries: dict[int, dict] = {}
    collect = engine.driver.collect

    def recording(df, batch_id):
        out = collect(df, batch_id)
        summaries[batch_id] = {w: s for w, s in out.summaries.items() if s.batch is not None}
        return out

    engine.driver.collect = recording
    return summaries


def test_split_key_merge_stage_rows_scale_with_the_batchs_keys_not_the_window(spark, tmp_path):
    """Issue 24: a worker sends the merge stage a share of a key it holds only when the key had tuples
    somewhere in the batch (touch rows, topology.touch_rows).  A long-tailed stream over many keys and
    a window longer than the run: most keys sit in the workers' windows untouched for batches.  Through
    a ``set-workers`` shrink (a removed worker's shares move) and a switch from D-Choices to PKG (keys'
    old holders are no longer their candidates), (a) the sink holds one row per (batch, key) of the
    batch, equal to the windowed count, and (b) the rows sent to the merge stage (WorkerSummary.shares)
    are at most the batch's keys times the batch's workers, where every key of the window used to be
    sent."""
    cfg = gen_cfg(tmp_path, algorithm="dchoices", workers=3, max_workers=3, window=100_000, max_batches=6, shadow=[],
                  workload_params={"keys": 20_000, "z": 1.2}, max_per_batch=600)

    def after(engine, batch_id):
        if batch_id == 1:
            engine.store.submit_command("set-workers", {"workers": 2})
        if batch_id == 3:
            engine.store.submit_command("set-algorithm", {"algorithm": "pkg"})

    engine = SparkEngine(cfg, after_batch=after, log=lambda m: None)
    summaries = recorded_summaries(engine)
    assert engine.run() == 0 and engine.snapshot.shares_split and engine.snapshot.controller.n_workers == 2
    assert engine.store.migration_events(engine.snapshot.run_id)
    per_batch = batch_keys(tmp_path / "ckpt", generator_keys_of(cfg))
    got, rows, distinct = sink_results(engine.results)
    truth = windowed_truth(per_batch, cfg.window)
    assert rows == distinct, "a (batch, key) was written twice"
    assert got == truth  # every key of every batch, exact, and no other (batch, key)
    window_keys = {b: len(set().union(*(per_batch[c] for c in per_batch if c <= b))) for b in per_batch}
    for b, keys in per_batch.items():
        sent = sum(s.shares for s in summaries[b].values())
        assert sent <= len(keys) * len(summaries[b]), (b, sent, len(keys), window_keys[b])
    last = max(per_batch)
    assert window_keys[last] > 2 * len(per_batch[last])  # the window holds far more keys than the batch


def test_keys_held_by_one_worker_never_go_through_the_merge_stage(spark, tmp_path):
    """Issue 36, item 2: in a split-key run only the keys held by several workers in the window go
    to the merge stage; a key whose tuples and state are all on its home worker is written by that
    worker.  D-Choices with its tail at home (``tail=hash``) over a long tail: from the batch after
    the first on (the driver knows which keys are held away from home), the rows sent to the merge
    stage are fewer than the batch's keys and the workers write the results of most keys themselves
    (before: every key of the batch went to the merge stage, once per holder, and no worker wrote a
    result), and the sink stays exact through a shrink (``set-workers``: every key merges in the
    batches where homes change or state moves) and a restart."""
    cfg = gen_cfg(tmp_path, algorithm="dchoices", params={"tail": "hash"}, workers=4, max_workers=4, window=3,
                  max_batches=7, shadow=[], workload_params={"keys": 5_000, "z": 1.1}, max_per_batch=3000)

    def after(engine, batch_id):
        if batch_id == 3:
            engine.store.submit_command("set-workers", {"workers": 3})

    engine = SparkEngine(cfg, after_batch=after, log=lambda m: None)
    summaries = recorded_summaries(engine)
    assert engine.run() == 0 and engine.snapshot.shares_split and engine.snapshot.controller.n_workers == 3
    SparkEngine(dataclasses.replace(cfg, max_batches=2), log=lambda m: None).run()  # restart: same checkpoint
    per_batch = batch_keys(tmp_path / "ckpt", generator_keys_of(cfg))
    got, rows, distinct = sink_results(engine.results)
    truth = final(windowed_truth(per_batch, cfg.window), tmp_path / "ckpt")
    assert rows == distinct, "a (batch, key) was written twice"
    assert only(final(got, tmp_path / "ckpt"), truth) == truth
    for b in (1, 2):  # before the shrink (from batch 4 on: new homes, then the moved state in flight)
        sent = sum(s.shares for s in summaries[b].values())
        written = sum(s.results for s in summaries[b].values())
        assert sent < len(per_batch[b]) and written > len(per_batch[b]) / 2, (b, sent, written, len(per_batch[b]))
    t = engine.results.read().to_pydict()
    assert max(t["shares"]) > 1  # the head was split, and merged


def test_join_operator_on_the_executors_equals_the_pairwise_truth(spark, tmp_path):
    """The join operator's workers probe their keys' window tuples; pairs and checksums in the sink
    equal the self-join recomputed from the offsets, through rebalancing and a worker change."""
    cfg = gen_cfg(tmp_path, operator="join", algorithm="mixed", params={"theta_max": 0.05}, window=2,
                  max_batches=6, shadow=[], workload_params={"keys": 60, "z": 1.0}, max_per_batch=1500)

    def after(engine, batch_id):
        if batch_id == 2:
            engine.store.submit_command("set-workers", {"workers": 4})

    engine = SparkEngine(cfg, after_batch=after, log=lambda m: None)
    assert engine.run() == 0
    assert engine.snapshot.controller.n_workers == 4
    got, rows, distinct = sink_results(engine.results, join=True)
    truth = final(join_truth(batch_values(tmp_path / "ckpt", generator_keys_of(cfg)), cfg.window), tmp_path / "ckpt")
    assert rows == distinct and only(final(got, tmp_path / "ckpt"), truth) == truth
    assert sum(p for p, _ in truth.values()) > 0
    assert engine.store.migration_events(engine.snapshot.run_id)


def test_user_operator_through_a_migration_a_refused_split_and_a_restart(spark, tmp_path):
    """The user's operator of examples/ewma_rate.py (``--operator examples.ewma_rate:EwmaRate``) runs
    on the executors: through a worker change (its partial states move between tasks) and a restart
    from the checkpoint, every (batch, key) result in the sink equals the EWMA folded from Spark's
    offset log; a switch to a split-key grouping is rejected with the reason (it is not mergeable)."""
    from examples.ewma_rate import ALPHA

    cfg = gen_cfg(tmp_path, operator="examples.ewma_rate:EwmaRate", algorithm="mixed", params={"theta_max": 0.05},
                  window=3, max_batches=5, shadow=[], workload_params={"keys": 60, "z": 1.2}, max_per_batch=1500)

    def after(engine, batch_id):
        if batch_id == 1:
            engine.store.submit_command("set-workers", {"workers": 5})
            engine.store.submit_command("set-algorithm", {"algorithm": "dchoices"})

    engine = SparkEngine(cfg, after_batch=after, log=lambda m: None)
    assert engine.run() == 0
    assert engine.snapshot.controller.n_workers == 5 and engine.snapshot.controller.planner.name == "mixed"
    refused = [c for c in engine.store.recent_commands(10, run_id=engine.snapshot.run_id) if c["kind"] == "set-algorithm"]
    assert refused[0]["status"] == "rejected" and "operator ewma_rate cannot merge" in refused[0]["reason"]
    assert engine.store.migration_events(engine.snapshot.run_id)
    SparkEngine(dataclasses.replace(cfg, max_batches=2), log=lambda m: None).run()  # restart: same checkpoint
    got, rows, distinct = sink_results(engine.results)
    truth = final(ewma_truth(batch_keys(tmp_path / "ckpt", generator_keys_of(cfg)), cfg.window, ALPHA), tmp_path / "ckpt")
    assert rows == distinct and only(final(got, tmp_path / "ckpt"), truth) == truth
    assert any(v != int(v) for v in truth.values())  # a real average, not a count


def test_kafka_sink_through_a_migration_equals_the_ground_truth(spark, tmp_path, kafka_broker):
    """With ``--sink kafka://...`` worker w writes its results to partition w of the topic (created at
    start-up with one partition per state partition); through a worker change (state moved between
    tasks) and a restart from the snapshot, the results read back equal the windowed counts recomputed
    from the offsets, each once."""
    from skewlab.engine.io.kafka_io import read_topic

    sink = f"kafka://{kafka_broker}/engine-results"
    cfg = gen_cfg(tmp_path, algorithm="mixed", params={"theta_max": 0.05}, window=3, max_batches=5, shadow=[],
                  workload_params={"keys": 60, "z": 1.0}, max_per_batch=1500, sink=sink)

    def after(engine, batch_id):
        if batch_id == 1:
            engine.store.submit_command("set-workers", {"workers": 4})

    engine = SparkEngine(cfg, after_batch=after, log=lambda m: None)
    assert engine.run() == 0 and engine.snapshot.controller.n_workers == 4
    assert max(committed_ranges(tmp_path / "ckpt")) == engine.snapshot.last_batch  # a stop commits its last batch
    assert engine.results.url == sink and engine.results.start == {p: 0 for p in range(6)}
    assert engine.store.migration_events(engine.snapshot.run_id)
    again = SparkEngine(dataclasses.replace(cfg, max_batches=2), log=lambda m: None)
    assert again.snapshot.run_id == engine.snapshot.run_id and again.results.start == engine.results.start
    again.run()
    assert max(committed_ranges(tmp_path / "ckpt")) == again.snapshot.last_batch == engine.snapshot.last_batch + 2
    got, rows, distinct = sink_results(again.results)
    truth = final(windowed_truth(batch_keys(tmp_path / "ckpt", generator_keys_of(cfg)), cfg.window), tmp_path / "ckpt")
    assert rows == distinct and only(final(got, tmp_path / "ckpt"), truth) == truth
    assert max(b for b, _ in truth) >= 5
    records = read_topic(kafka_broker, "engine-results")
    assert len(records) == 6 and {json.loads(v)["worker"] for v in (v for _, _, v in records[3])} <= {3}
    assert sum(len(r) for r in records.values()) == rows  # no record written twice


def test_file_source_counts_dead_letters(spark, tmp_path):
    f = tmp_path / "keys.txt"
    lines = [f"w{i % 17}" if i % 10 else "" for i in range(1, 2001)]
    f.write_text("\n".join(lines) + "\n")
    cfg = gen_cfg(tmp_path, source="file", path=str(f), algorithm="hash", max_workers=3, shadow=[], max_batches=3,
                  max_per_batch=1000)
    engine = SparkEngine(cfg, log=lambda m: None)
    engine.run()
    consumed = sum(engine.snapshot.consumed.values())
    assert consumed == 2000
    good = Counter(x for x in lines if x)
    assert Counter(engine.snapshot.controller.results()) == by_fingerprint(good)
    dead = connect(cfg.db).dead_letters(engine.snapshot.run_id)
    assert sum(d["count"] for d in dead) == 200


def test_kafka_source_end_to_end_with_malformed_records(spark, tmp_path, kafka_broker):
    from kafka import KafkaProducer

    from skewlab.engine.io.kafka_io import produce

    topic = "engine-e2e"
    produce(kafka_broker, topic, "zipf", {"keys": 50}, seed=1, rate=0, messages=3000, partitions=2)
    p = KafkaProducer(bootstrap_servers=kafka_broker)
    for i in range(40):
        p.send(topic, key=None, value=b"no key", partition=i % 2)
        p.send(topic, key=b"\xff\xfe", value=b"bad utf8", partition=i % 2)
    p.flush()
    p.close()
    cfg = gen_cfg(tmp_path, source="kafka", bootstrap=kafka_broker, topic=topic, algorithm="consistent", max_workers=3,
                  shadow=[], max_batches=2, max_per_batch=2_000)
    engine = SparkEngine(cfg, log=lambda m: None)
    engine.run()
    assert sum(engine.snapshot.controller.results().values()) == 3000
    dead = {d["reason"]: d["count"] for d in connect(cfg.db).dead_letters(engine.snapshot.run_id)}
    assert dead.get("no_key") == 40 and dead.get("bad_utf8") == 40


@pytest.mark.parametrize(
    "argv, fragment",
    [
        (["engine", "--operator", "join", "--algorithm", "pkg"], "operator join cannot merge a key's partial states"),
        (["engine", "--source", "file", "--input", "/nonexistent"], "cannot read input file"),
        (["engine", "--algorithm", "nope"], "unknown algorithm"),
        (["engine", "--source", "kafka"], "needs --bootstrap"),
        (["engine", "--workers", "0"], "parameter workers: 0 is out of range [1, 1024]"),
        (["engine", "--algorithm", "mixed", "--param", "theta_max=-1"], "out of range"),
        (["engine", "--workload", "zipf", "--zipf", "9"], "out of range"),
        (["engine", "--sink", "kafka://localhost/results"], "bad bootstrap server"),
    ],
)
def test_engine_cli_user_errors(capsys, argv, fragment):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert fragment in err and err.count("\n") == 1


def test_engine_cli_query_failure_is_one_line_exit_1(spark, kafka_broker, tmp_path, capsys, monkeypatch):
    import skewlab.engine.cli as engine_cli

    monkeypatch.setattr(engine_cli, "check_spark_can_start", lambda cfg: None)  # the query itself fails
    argv = ["engine", "--source", "kafka", "--bootstrap", kafka_broker, "--topic", "no-such-topic",
            "--db", f"sqlite:///{tmp_path}/db.sqlite", "--checkpoint", str(tmp_path / "ckpt"), "--shadow", "",
            "--duration", "60"]
    assert main(argv) == 1
    err = capsys.readouterr().err
    assert "Traceback" not in err
    line = [x for x in err.splitlines() if x.startswith("skewlab: error:")]
    assert len(line) == 1 and "streaming query failed" in line[0] and "no-such-topic" in line[0]
    from skewlab.storage import connect

    with connect(f"sqlite:///{tmp_path}/db.sqlite") as store:
        (run,) = store.list_runs()
    assert run["status"] == "failed" and "no-such-topic" in run["note"], run  # never listed as finished


def test_control_cli_submits_validated_commands(tmp_path, capsys):
    from skewlab.storage import connect

    db = f"sqlite:///{tmp_path}/c.sqlite"
    connect(db).create_run("hash", {}, seed=0, n_workers=4)  # a live run: control refuses an ended one
    assert main(["control", "--db", db, "set-workers", "4"]) == 0
    assert main(["control", "--db", db, "set-algorithm", "mixed", "theta_max=0.2"]) == 0
    assert main(["control", "--db", db, "set-workers", "zero"]) == 2
    assert main(["control", "--db", db, "set-algorithm", "nosuch"]) == 2
    assert main(["control", "--db", db, "pause"]) == 0
    capsys.readouterr()
    assert main(["control", "--db", db, "status"]) == 0
    out = capsys.readouterr().out
    assert out.count("pending") == 3 and "set-algorithm" in out and json.dumps({"workers": 4}) in out


def test_worker_labels_land_on_their_own_partition(spark):
    """Spark's hash partitioning (the stateful operator's exchange) puts worker w's label in partition w."""
    from pyspark.sql import functions as F

    from skewlab.engine.runtimes.spark.labels import worker_labels

    for P in (3, 8, 16):
        labels = worker_labels(P)
        df = spark.createDataFrame([(v,) for v in labels], "label int").repartition(P, "label")
        got = {r["label"]: r["p"] for r in df.select("label", F.spark_partition_id().alias("p")).collect()}
        assert [got[v] for v in labels] == list(range(P))
