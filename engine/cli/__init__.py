"""The engine's subcommands of ``skewlab``: algorithms, workloads, simulate, plan, engine, produce,
control and broker (:mod:`skewlab.engine.cli.broker`); :func:`add_commands` adds them to the parser of the composition root (:mod:`skewlab.cli`).

A user mistake raises :class:`skewlab.shared.UsageError` (or :class:`skewlab.engine.config.params.ParamError`), which
``skewlab`` prints as one line on stderr with exit status 2, never a traceback.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import threading
from typing import Any, Sequence

from skewlab.engine.config import settings
from skewlab.engine.config.params import parse_assignments
from skewlab.shared import UsageError

__all__ = ["add_commands"]


# ------------------------------------------------------------------------------------- commands
def cmd_algorithms(args: argparse.Namespace) -> int:
    from skewlab.engine.algorithms import registry

    info = registry.describe()
    if args.json:
        print(json.dumps(info, indent=2))
        return 0
    title, param = _widths([a["name"] for a in info], [p["name"] for a in info for p in a["params"]])
    for a in info:
        family = "rebalancer" if a["rebalancing"] else ("key grouping" if a["single_owner"] else "split-key")
        print(f"{a['name']:<{title}} {a['summary']}  [{family}; {a['paper']}]")
        _print_params(a["params"], param)
    return 0


def cmd_workloads(args: argparse.Namespace) -> int:
    from skewlab.engine.workloads import WORKLOADS, workload_names

    names = workload_names()
    params = {name: [p.to_dict() for p in WORKLOADS[name].params] for name in names}
    title, param = _widths(names, [p["name"] for ps in params.values() for p in ps])
    default = max([10, *(len(str(p["default"])) for ps in params.values() for p in ps)])
    for name in names:
        print(f"{name:<{title}} {WORKLOADS[name].summary}")
        _print_params(params[name], param, default)
    return 0


def cmd_simulate(args: argparse.Namespace) -> int:
    from skewlab.engine.cli.progress import Progress
    from skewlab.engine.cli.simulate import SimulationConfig, parse_change, run_simulation

    wparams: dict[str, Any] = parse_assignments(args.workload_param or [])
    workload = args.workload
    if args.input is not None:
        if args.workload not in (None, "file"):
            raise UsageError("--input replays a file; do not combine it with --workload")
        workload = "file"
        wparams["path"] = args.input
        key_field = _key_field(args)
        if key_field is not None:
            wparams["column"] = key_field
        if args.value_field is not None:
            wparams["value_column"] = args.value_field
    elif args.key_field is not None or args.column is not None or args.value_field is not None:
        raise UsageError("--key-field/--column/--value-field name CSV columns of an --input file")
    workload = workload or "zipf"
    if workload in ("zipf", "drift"):
        if args.zipf is not None:
            wparams["z"] = args.zipf
        if args.keys is not None:
            wparams["keys"] = args.keys
    elif args.zipf is not None or args.keys is not None:
        raise UsageError(f"--zipf/--keys apply to the zipf and drift workloads, not {workload}")
    cfg = SimulationConfig(
        algorithm=args.algorithm,
        workers=args.workers,
        sources=args.sources,
        workload=workload,
        workload_params=wparams,
        messages=args.messages,
        interval_messages=args.interval_messages,
        seed=args.seed,
        params=parse_assignments(args.param or []),
        window=args.window,
        cost_model=args.cost_model,
        changes=[parse_change(c) for c in (args.change or [])],
    )
    cfg.validate()
    bar = Progress(args.messages or 0, f"simulate {args.algorithm}")

    def tick(interval: int, done: int, total: int) -> None:
        bar.total = max(total, 1)
        bar.update(done)

    store = None
    if args.db is not None:
        from skewlab.storage import open_store

        try:
            store = open_store(args.db)
        except ValueError as exc:
            raise UsageError(f"--db: {exc}") from None
    try:
        result = run_simulation(cfg, tick, store=store)
    finally:
        bar.close()
        if store is not None:
            store.close()
    dead = result.get("dead_letters") or {}
    if dead:
        reasons = ", ".join(f"{reason} {count}" for reason, count in sorted(dead.items()))
        print(f"skewlab: warning: {sum(dead.values())} input record(s) without a usable key or value were dropped as dead letters "
              f"({reasons})", file=sys.stderr)
    if args.json:
        json.dump(result, sys.stdout, default=_json_default)
        sys.stdout.write("\n")
    else:
        _print_simulation(result)
    return 0


def cmd_plan(args: argparse.Namespace) -> int:
    from skewlab.engine.algorithms import registry

    cls = registry.get(args.algorithm)
    if not cls.rebalancing:
        raise UsageError(f"{args.algorithm} does not produce plans; use one of: "
                         + ", ".join(n for n in registry.names() if registry.get(n).rebalancing))
    from skewlab.engine.cli.plan_snapshot import SnapshotError, load_snapshot, plan_to_json
    params = parse_assignments(args.param or [])
    registry.validate_params(args.algorithm, params)

    def base(fps, n):  # h(k) of keys without a "home" field: the algorithm's own base hash
        return registry.create(args.algorithm, n, 1, args.seed, params).base(fps)

    try:
        stats = load_snapshot(args.snapshot, base)
    except SnapshotError as exc:
        raise UsageError(str(exc)) from None
    grouping = registry.create(args.algorithm, stats.n_workers, 1, args.seed, params)
    plan = grouping.plan(stats)
    out = plan_to_json(plan, stats)
    if args.json:
        json.dump(out, sys.stdout, default=_json_default)
        sys.stdout.write("\n")
    else:
        print(f"algorithm        {out['algorithm']}")
        print(f"feasible         {out['feasible']}" + (f"  ({out['note']})" if out.get("note") else ""))
        print(f"loads            {' '.join(f'{x:g}' for x in out['loads'])}")
        print(f"imbalance        {out.get('imbalance', 0.0):.4f}")
        print(f"routing table    {len(out['routing_table'])} entries")
        print(f"migrated keys    {len(out['migrated_keys'])}  (migration cost {out['migration_cost']:.4f})")
        print(f"plan time        {out['plan_seconds'] * 1000:.1f} ms")
        for key, worker in list(out["routing_table"].items())[:20]:
            print(f"    {key} -> {worker}")
    return 0


def cmd_engine(args: argparse.Namespace) -> int:
    from skewlab.engine.runtimes.spark.engine import EngineConfig, SparkEngine

    wparams: dict[str, Any] = parse_assignments(args.workload_param or [])
    if args.zipf is not None:
        wparams["z"] = args.zipf
    if args.keys is not None:
        wparams["keys"] = args.keys
    cfg = EngineConfig(
        source=args.source, db=args.db, algorithm=args.algorithm, params=parse_assignments(args.param or []),
        workers=args.workers, sources=args.sources, interval=args.interval, rate=args.rate,
        max_per_batch=args.max_per_batch, checkpoint=args.checkpoint, run_name=args.run_name or "",
        duration=args.duration, master=args.master, window=args.window, operator=args.operator,
        workload=args.workload, workload_params=wparams, seed=args.seed, bootstrap=args.bootstrap or "",
        topic=args.topic or "", path=args.input or "", key_field=args.key_field or "", column=args.column or "",
        value_field=args.value_field or "",
        shadow=None if args.shadow is None else [n for n in args.shadow.split(",") if n],
        max_batches=args.max_batches, max_workers=args.max_workers, sink=args.sink, service_us=args.service_us,
        spark_conf=parse_assignments(args.conf or [], "--conf"), wait_for_kernels=args.wait_for_kernels,
        continue_on_dead_letters=args.continue_on_dead_letters,
    )
    from skewlab.engine.runtimes.spark.engine import EngineFailed
    from skewlab.engine.runtimes.spark.engine_config import default_data_dir
    from skewlab.storage import open_store

    cfg.validate()
    try:  # a typo in --db: one line before Spark starts, never a new database somewhere
        open_store(args.db).close()
    except ValueError as exc:
        raise UsageError(f"--db: {exc}") from None
    check_spark_can_start(cfg)
    spark_log = default_data_dir() / "logs" / f"spark-{os.path.basename(cfg.checkpoint_dir())}.log"
    try:
        return SparkEngine(cfg, spark_log=spark_log).run()
    except EngineFailed as exc:
        print(f"skewlab: error: {exc} (the batch is replayed when the engine restarts)", file=sys.stderr)
        return 1


def _key_field(args: argparse.Namespace) -> str | None:
    """``--key-field``, or its alias ``--column``; UsageError if both are given and differ."""
    if args.key_field is not None and args.column is not None and args.key_field != args.column:
        raise UsageError(f"--column is an alias of --key-field: give one, not both ({args.column!r}, {args.key_field!r})")
    return args.key_field if args.key_field is not None else args.column


def check_spark_can_start(cfg: Any) -> None:
    """What the engine needs outside Python, checked before Spark starts (which takes 10-30 s): a Java
    Spark runs on, and for ``--source kafka`` a broker that answers with the topic.  One-line
    :class:`UsageError` otherwise."""
    from skewlab.engine.runtimes.spark.java import java_problem

    problem = java_problem()
    if problem is not None:
        raise UsageError(problem)
    if cfg.source == "kafka":
        from skewlab.engine.io.kafka_io import topic_partitions

        try:
            topic_partitions(cfg.bootstrap, cfg.topic)
        except ValueError as exc:
            raise UsageError(str(exc)) from None


def cmd_produce(args: argparse.Namespace) -> int:
    from skewlab.engine.io.kafka_io import produce
    from skewlab.engine.cli.progress import Progress
    from skewlab.engine.workloads import create_workload

    wparams: dict[str, Any] = parse_assignments(args.workload_param or [])
    if args.zipf is not None:
        wparams["z"] = args.zipf
    if args.keys is not None:
        wparams["keys"] = args.keys
    if args.messages < 0:
        raise UsageError(f"--messages must be >= 0, got {args.messages}")
    if args.rate < 0:
        raise UsageError(f"--rate must be >= 0 (0 = as fast as possible), got {args.rate}")
    if args.partitions is not None and args.partitions < 1:
        raise UsageError(f"--partitions must be >= 1, got {args.partitions}")
    workload = create_workload(args.workload, args.seed, wparams)  # validates before connecting
    bar = Progress(args.messages, f"produce {args.topic}")
    stop = threading.Event()
    # SIGTERM (`docker compose stop`, kill): stop sending, flush what was sent, exit 0
    previous = signal.signal(signal.SIGTERM, lambda signum, frame: stop.set())
    try:
        out = produce(args.bootstrap, args.topic, workload, None, args.seed, args.rate, args.messages,
                      partitions=args.partitions, progress=bar, stop=stop)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    finally:
        signal.signal(signal.SIGTERM, previous)
        bar.close()
    print(f"{'stopped by SIGTERM after' if out['stopped'] else 'produced'} {out['messages']} messages to "
          f"{out['topic']} ({out['partitions']} partitions) in {out['seconds']:.1f} s ({out['rate']:.0f}/s)")
    return 0


def _live_settings(store: Any) -> dict[str, Any] | None:
    """The run a global command goes to (newest running or paused, else newest) and what is live in it:
    algorithm, parameters and workers after every change the engine recorded (not the run's start values)."""
    from skewlab.storage.run_state import RunState, current_run

    run = current_run(store.list_runs(limit=200))
    if run is None:
        return None
    run_id = int(run["id"])
    st = RunState.of_run(run).catch_up(store)
    latest = store.interval_metrics(run_id, limit=1, latest=True)
    config = run.get("config") if isinstance(run.get("config"), dict) else {}
    return {"id": run_id, "name": run.get("name") or "", "status": run.get("status"), "algorithm": st.algorithm,
            "params": dict(st.params), "workers": st.n_workers or (latest[0].get("n_workers") if latest else None),
            "operator": config.get("operator") or "count", "operator_mergeable": config.get("operator_mergeable"),
            "max_workers": config.get("max_workers")}


def cmd_control(args: argparse.Namespace) -> int:
    from skewlab.engine.control.commands import MAX_WORKERS, CommandError, validate_command
    from skewlab.storage import open_store
    from skewlab.storage.moves import cost_text, recent_moves
    from skewlab.storage.run_state import LIVE_STATUSES

    try:
        store = open_store(args.db, existing=True)  # never a fresh empty database nobody reads
    except ValueError as exc:
        raise UsageError(f"--db: {exc}") from None
    live = _live_settings(store)
    if args.action == "status":
        if live is not None:
            print(f"run {live['id']} {live['name']} algorithm={live['algorithm']} workers={live['workers']} "
                  f"status={live['status']}")
        # a command's move: what its interval moved, the figure the dashboard's card and table show
        moved = {m["interval"]: m for m in recent_moves(store, live["id"])} if live is not None else {}
        for c in store.recent_commands(args.limit, run_id=None if live is None else live["id"]):
            if c.get("applied_interval") is not None:
                where = f" at interval {c['applied_interval']}"
                if c["applied_interval"] in moved:
                    where += f", migration cost {cost_text(moved[c['applied_interval']]['migration_cost'])}"
            else:
                where = f" at batch {c['applied_batch']}" if c.get("applied_batch") is not None else ""
            reason = f" ({c['reason']})" if c.get("reason") else ""
            print(f"#{c['id']:<5} {c['kind']:<14} {json.dumps(c['payload']):<60} {c['status']}{where}{reason}")
        return 0
    if args.action == "set-algorithm":
        if not args.values:
            raise UsageError("set-algorithm needs NAME [name=value ...]")
        kind, payload = "set-algorithm", {"algorithm": args.values[0], "params": parse_assignments(args.values[1:])}
    elif args.action == "set-param":
        if not args.values:
            raise UsageError("set-param needs name=value [name=value ...]")
        kind, payload = "set-param", {"params": parse_assignments(args.values)}
    elif args.action == "set-workers":
        if len(args.values) != 1:
            raise UsageError("set-workers needs exactly one number")
        kind, payload = "set-workers", {"workers": args.values[0]}
    else:
        if args.values:
            raise UsageError(f"{args.action} takes no arguments")
        kind, payload = args.action, {}
    if live is None or live["status"] not in LIVE_STATUSES:
        which = "no run" if live is None else f"run {live['id']} is {live['status']}"
        raise UsageError(f"{which}: commands go to a running engine (start one with 'skewlab engine' or "
                         "'skewlab demo')")
    # Validate what can be validated here (the engine validates again against its current state,
    # applying the commands in order: a set-param after a pending set-algorithm is for the new one).
    current = live["algorithm"] if live else "hash"
    current_params = live["params"] if live else {}
    switches = [c for c in store.recent_commands(args.limit, run_id=live["id"])
                if c["kind"] == "set-algorithm" and c["status"] == "pending"]
    if switches:
        latest = max(switches, key=lambda c: c["id"])["payload"]
        current, current_params = latest["algorithm"], dict(latest.get("params") or {})
    operator = live["operator"] if live else "count"
    mergeable = live["operator_mergeable"] if live else None
    # set-workers: the run's own range, [1, its --max-workers] (Spark's state partitions), as the engine
    # and the dashboard's form check it
    max_workers = int(live["max_workers"]) if live and live.get("max_workers") else MAX_WORKERS
    try:
        if kind != "set-param":
            kind, payload = validate_command(kind, payload, current_algorithm=current, current_params={},
                                             operator=operator, mergeable=mergeable, max_workers=max_workers)
        else:
            validate_command(kind, payload, current_algorithm=current, current_params=current_params)
    except CommandError as exc:
        raise UsageError(str(exc)) from None
    cid = store.submit_command(kind, payload, run_id=live["id"])
    print(f"command {cid} {kind} submitted to run {live['id']} (pending); see 'skewlab control --db ... status'")
    return 0


# ------------------------------------------------------------------------------------- output
def _json_default(obj: Any) -> Any:
    import numpy as np

    if isinstance(obj, np.generic):
        return obj.item()
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    raise TypeError(f"cannot serialise {type(obj).__name__}")


def _widths(titles: Sequence[str], params: Sequence[str]) -> tuple[int, int]:
    """Column widths of a listing: the longest title, the longest parameter name (at least 18)."""
    return max(map(len, titles), default=0), max([18, *map(len, params)])


def _print_params(params: Sequence[dict[str, Any]], width: int, default_width: int = 10) -> None:
    """One line per declared parameter: name, default, range, help (names padded to ``width``, defaults
    to ``default_width``)."""
    for p in params:
        print(f"    {p['name']:<{width}} default {p['default']!s:<{default_width}} range {p['range']:<22} {p['help']}")


def _print_simulation(r: dict[str, Any]) -> None:
    wl = r["workload"]
    wparams = ", ".join(f"{k}={v}" for k, v in wl["params"].items() if v != "")
    print(f"{r['algorithm']} on {wl['workload']} ({wparams}), {r['messages']} messages, "
          f"{r['workers']} workers, {r['sources']} sources, seed {r['seed']}")
    rows = [
        ("imbalance (max/mean-1)", f"{r['imbalance']:.4f}"),
        ("theta_max observed", f"{r['theta_max_observed']:.4f}"),
        ("seeds' I (max-avg)", f"{r['seeds_imbalance']:.6f}"),
        ("load stddev / variance", f"{r['load_stddev']:.1f} / {r['load_variance']:.1f}"),
        ("replication", f"{r['replication']:.3f}"),
        ("routing table size", f"{r['routing_table_size']}"),
        ("migration cost", f"{r['migration_cost']:.4f} ({r['migrations']} migrations)"),
        ("plan time", f"{r['plan_seconds']:.3f} s"),
        ("routing throughput", f"{r['tuples_per_second'] / 1e6:.2f} M tuples/s"),
        ("routing warm-up", f"{r['warmup_seconds']:.2f} s (numba compilation / cache load; not in the throughput)"),
        ("elapsed", f"{r['elapsed_seconds']:.2f} s"),
    ]
    for name, value in rows:
        print(f"  {name:<24} {value}")
    loads = r["worker_loads"]
    shown = " ".join(f"{x:.0f}" for x in loads[:32]) + (" ..." if len(loads) > 32 else "")
    print(f"  {'worker loads':<24} {shown}")
    print()
    print(f"  {'interval':>8} {'tuples':>9} {'imbalance':>10} {'theta':>8} {'repl':>6} {'|A|':>6} {'migr':>7} {'plan s':>7}")
    for it in r["intervals"]:
        print(f"  {it['interval']:>8} {it['tuples']:>9} {it['imbalance']:>10.4f} {it['theta_max_observed']:>8.4f} "
              f"{it['replication']:>6.2f} {it['routing_table_size']:>6} {it['migration_cost']:>7.4f} {it['plan_seconds']:>7.3f}")
    for ev in r["events"]:
        print(f"  event @{ev['interval']}: {ev['kind']} " + ", ".join(f"{k}={v}" for k, v in ev.items() if k not in ("interval", "kind")))
    if r.get("run_id") is not None:
        print(f"  saved as run {r['run_id']} (see 'skewlab dashboard --db ...')")


# ------------------------------------------------------------------------------------- parser
def add_commands(sub: Any) -> None:
    """Add the engine's subcommands to ``skewlab``'s argparse subparsers."""
    a = sub.add_parser("algorithms", help="list groupings with their parameters")
    a.add_argument("--json", action="store_true", help="machine-readable output")
    a.set_defaults(func=cmd_algorithms)

    w = sub.add_parser("workloads", help="list workloads with their parameters")
    w.set_defaults(func=cmd_workloads)

    s = sub.add_parser("simulate", help="run a grouping on a workload in the local runtime")
    s.add_argument("--algorithm", default=settings.DEFAULT_ALGORITHM,
                   help=f"registry name (see 'skewlab algorithms'); default {settings.DEFAULT_ALGORITHM}")
    s.add_argument("--workers", type=int, default=settings.WORKERS.default, help=settings.flag_help(settings.WORKERS))
    s.add_argument("--sources", type=int, default=settings.SOURCES.default, help=settings.flag_help(settings.SOURCES))
    s.add_argument("--workload", default=None, help="workload name (see 'skewlab workloads'); default zipf")
    s.add_argument("--zipf", type=float, default=None, help="Zipf exponent z (zipf/drift workloads; default 1.0)")
    s.add_argument("--keys", type=int, default=None, help="number of distinct keys K (zipf/drift workloads; default 10000)")
    s.add_argument("--input", default=None, help="replay keys from FILE (one key per line, or a CSV column)")
    s.add_argument("--key-field", default=None, help="CSV column (name or 0-based index) of the key, with --input")
    s.add_argument("--column", default=None, help="alias of --key-field")
    s.add_argument("--value-field", default=None,
                   help="CSV column of each record's value, with --input: records without a number there are "
                        "dead letters, as in the engine (simulate has no operator: the values are not used)")
    s.add_argument("--workload-param", action="append", metavar="NAME=VALUE", help="workload parameter (repeatable)")
    s.add_argument("--messages", type=int, default=settings.MESSAGES.default, help=settings.flag_help(settings.MESSAGES, "default: the whole --input file, else 1e6"))
    s.add_argument("--interval-messages", type=int, default=settings.INTERVAL_MESSAGES.default,
                   help=settings.flag_help(settings.INTERVAL_MESSAGES))
    s.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    s.add_argument("--param", action="append", metavar="NAME=VALUE", help="algorithm parameter (repeatable)")
    s.add_argument("--window", type=int, default=settings.WINDOW.default, help=settings.flag_help(settings.WINDOW))
    s.add_argument("--cost-model", default="linear", help="linear (count) or join (quadratic); default linear")
    s.add_argument("--change", action="append", metavar="I:workers=N|I:algorithm=NAME",
                   help="operator action before interval I (repeatable)")
    s.add_argument("--json", action="store_true", help="print one JSON object on stdout")
    s.add_argument("--db", default=None, metavar="URL",
                   help="also save the run in this database (sqlite:///PATH or postgresql://…) for the dashboard; "
                        "default: not saved")
    s.set_defaults(func=cmd_simulate)

    pl = sub.add_parser("plan", help="what would an algorithm do with this snapshot?")
    pl.add_argument("--snapshot", required=True, help="JSON snapshot file ('-' for stdin)")
    pl.add_argument("--algorithm", default=settings.DEFAULT_REBALANCER,
                    help=f"rebalancing algorithm (default {settings.DEFAULT_REBALANCER})")
    pl.add_argument("--param", action="append", metavar="NAME=VALUE", help="algorithm parameter (repeatable)")
    pl.add_argument("--seed", type=int, default=0, help=argparse.SUPPRESS)
    pl.add_argument("--json", action="store_true", help="print one JSON object on stdout")
    pl.set_defaults(func=cmd_plan)
    e = sub.add_parser("engine", help="run the PySpark streaming engine")
    e.add_argument("--source", default="generator", help="generator|kafka|file (default generator)")
    e.add_argument("--db", default=None, help="database URL (default: SQLite file data/skewlab.db)")
    e.add_argument("--algorithm", default="",
                   help=f"registry name (default {settings.DEFAULT_SPLIT_KEY} for a mergeable operator such as the "
                        f"default count, {settings.DEFAULT_REBALANCER} otherwise)")
    e.add_argument("--param", action="append", metavar="NAME=VALUE", help="algorithm parameter (repeatable)")
    e.add_argument("--workers", type=int, default=settings.WORKERS.default, help=settings.flag_help(settings.WORKERS))
    e.add_argument("--sources", type=int, default=settings.SOURCES.default, help=settings.flag_help(settings.SOURCES))
    e.add_argument("--interval", type=float, default=settings.INTERVAL.default, help=settings.flag_help(settings.INTERVAL))
    e.add_argument("--rate", type=float, default=settings.RATE.default, help=settings.flag_help(settings.RATE, "0 = unlimited"))
    e.add_argument("--max-per-batch", type=int, default=settings.MAX_PER_BATCH.default, help=settings.flag_help(settings.MAX_PER_BATCH))
    e.add_argument("--checkpoint", default=None, help="checkpoint directory (restart with the same one)")
    e.add_argument("--run-name", default=None, help="name of the run (default checkpoint dir data/checkpoints/NAME)")
    e.add_argument("--duration", type=float, default=None, help="stop after this many seconds")
    e.add_argument("--max-batches", type=int, default=None, help=argparse.SUPPRESS)
    e.add_argument("--master", default=None,
                   help="Spark master URL (default: spark.master of spark-submit / spark-defaults.conf, else local[*])")
    e.add_argument("--conf", action="append", metavar="KEY=VALUE", default=None,
                   help="Spark setting (repeatable), as spark-submit takes it; wins over spark-defaults.conf, "
                        "PYSPARK_SUBMIT_ARGS and skewlab's defaults")
    e.add_argument("--window", type=int, default=settings.WINDOW.default, help=settings.flag_help(settings.WINDOW))
    e.add_argument("--max-workers", type=int, default=settings.MAX_WORKERS_SETTING.default,
                   help=settings.flag_help(settings.MAX_WORKERS_SETTING, "default 2 x --workers; each is a task of every "
                                                  "batch, used or not: room for set-workers costs speed"))
    e.add_argument("--sink", default=None,
                   help="where the operator's results go: a directory of Parquet files (default "
                        "data/results/<checkpoint name>) or kafka://HOST:PORT/TOPIC (worker W and the merge of its hash "
                        "bucket write partition W, exactly once; the topic is created with --max-workers "
                        "partitions if missing)")
    e.add_argument("--operator", default="count",
                   help="the keyed operator: count (windowed word count), join (self-join), or a user's "
                        "package.module:Class (a skewlab.engine.operators.KeyedOperator; see docs/operators.md)")
    e.add_argument("--service-us", type=float, default=0.0,
                   help="emulated service time per tuple in microseconds, slept by the worker that applies it "
                        "(Nasir et al. ICDE'16 add 1 ms per message; default 0 = none)")
    e.add_argument("--workload", default="zipf", help="generator workload (default zipf)")
    e.add_argument("--zipf", type=float, default=None, help="Zipf exponent for zipf/drift (default 1.0)")
    e.add_argument("--keys", type=int, default=None, help="distinct keys for zipf/drift (default 10000)")
    e.add_argument("--workload-param", action="append", metavar="NAME=VALUE", help="workload parameter")
    e.add_argument("--seed", type=int, default=0, help="seed (default 0)")
    e.add_argument("--bootstrap", default=None, help="Kafka bootstrap HOST:PORT (--source kafka)")
    e.add_argument("--topic", default=None, help="Kafka topic (--source kafka)")
    e.add_argument("--input", default=None, help="file to replay (--source file)")
    e.add_argument("--key-field", default=None,
                   help="where each record's key is: a CSV column, name or 0-based index (--source file; default "
                        "the whole line), or a dotted field of the JSON record value such as user.id (--source "
                        "kafka; default the record key)")
    e.add_argument("--column", default=None, help="alias of --key-field")
    e.add_argument("--value-field", default=None,
                   help="where each record's value is, for --operator sum|mean|min|max|distinct or a user's "
                        "operator of values: a CSV column (--source file) or a dotted JSON field such as "
                        "amount (--source kafka); the generator draws seeded values itself")
    e.add_argument("--continue-on-dead-letters", action="store_true",
                   help="go on when (nearly) all of a batch's records are dead letters for one reason (a "
                        "misspelt --key-field/--value-field, say); default: stop with one line naming the field "
                        "and the fields the records have, exit status 2")
    e.add_argument("--shadow", default=None, help="comma-separated shadow algorithms ('' = none; default all)")
    e.add_argument("--wait-for-kernels", action="store_true",
                   help="a new run whose grouping's numba kernels are not compiled yet (the first run after a "
                        "plain pip install) waits for them; default: it routes by hash until they are ready, "
                        "then switches to the grouping (an 'algorithm' event of the run)")
    e.set_defaults(func=cmd_engine)

    pr = sub.add_parser("produce", help="replay a workload into a Kafka topic")
    pr.add_argument("--bootstrap", required=True, help="Kafka bootstrap HOST:PORT")
    pr.add_argument("--topic", required=True, help="topic name")
    pr.add_argument("--workload", default="zipf", help="workload name (default zipf)")
    pr.add_argument("--zipf", type=float, default=None, help="Zipf exponent for zipf/drift (default 1.0)")
    pr.add_argument("--keys", type=int, default=None, help="distinct keys for zipf/drift (default 10000)")
    pr.add_argument("--workload-param", action="append", metavar="NAME=VALUE", help="workload parameter")
    pr.add_argument("--rate", type=float, default=10_000, help="messages/s (default 10000; 0 = as fast as possible)")
    pr.add_argument("--messages", type=int, default=1_000_000, help="messages to produce (default 1e6)")
    pr.add_argument("--partitions", type=int, default=None, help="create the topic with this many partitions")
    pr.add_argument("--seed", type=int, default=0, help="seed (default 0)")
    pr.set_defaults(func=cmd_produce)

    c = sub.add_parser("control", help="send an operator command to a running engine")
    c.add_argument("--db", default=None, help="database URL (default: SQLite file data/skewlab.db)")
    c.add_argument("--limit", type=int, default=20, help="commands shown by status")
    c.add_argument("action", choices=["set-algorithm", "set-param", "set-workers", "pause", "resume", "status"])
    c.add_argument("values", nargs="*", help="NAME [name=value ...] | name=value ... | N")
    c.set_defaults(func=cmd_control)

    from skewlab.engine.cli.broker import add_broker_command

    add_broker_command(sub)
