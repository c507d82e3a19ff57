#!/usr/bin/env python
"""Time to the first data batch of ``skewlab engine`` on a cold numba cache (the first run after a
plain ``pip install``), with the breakdown: Spark's start, the wait for the live grouping's kernels,
the first batch with tuples, and when every shadow grouping has joined.

Usage::

    python bench/bench_first_batch.py [--python PYTHON] [--runs 1] [--max-batches 6] [--timeout 600] [--warm-cache]
                                       [--wait-for-kernels no|yes|both]

Each run starts ``PYTHON -m skewlab engine`` (default: this interpreter; pass another checkout's
interpreter to compare) in a fresh temporary directory with ``NUMBA_CACHE_DIR`` set to a fresh empty
directory, so every kernel is compiled, and timestamps its stderr lines.  "Spark up" is the engine's
first line after its session exists (``Spark started in``; an older engine's ``run N: ...``), "live
kernels ready" the line that ends the wait for them (absent when Spark took longer than compiling
them); the first data batch is the first status line with ``tuples`` > 0.  On a cold cache the
engine routes by hash until the live grouping's kernels are compiled (``--wait-for-kernels`` makes it
wait instead, as it did before): ``grouping_joined_s`` is the line of its switch to the grouping,
``grouping_from_batch`` the first batch routed by it.  The breakdown after Spark is up comes from the
files the run writes, by their modification times: ``query_started_s`` the routing snapshot the
engine publishes just before it starts its query (``routes/route-0.snap``), ``query_running_s``
Spark's query metadata (the query's thread is running), and per batch up to the first data batch
``batches``: ``planned_s`` (Spark's offset log entry: the batch's offsets are fixed), ``done_s`` (the
batch's status line) and ``tuples``.  Prints one JSON line per run with the seconds since the process
start and the 1-minute load average before and after (the machine's load changes every number here).
With ``--warm-cache`` the installation's own cache is used instead: the same run without compilation, so
cold minus warm is what compiling costs.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import threading
import time


def one_run(python: str, max_batches: int, timeout: float, warm: bool = False, wait: bool = False) -> dict:
    with tempfile.TemporaryDirectory(prefix="skewlab-first-batch-") as tmp:
        env = dict(os.environ, SKEWLAB_DATA_DIR=os.path.join(tmp, "data"), PYTHONUNBUFFERED="1")
        env.pop("SKEWLAB_DB_URL", None)
        if warm:  # the installation's own cache (warm after scripts/install or an earlier run)
            env.pop("NUMBA_CACHE_DIR", None)
        else:
            env["NUMBA_CACHE_DIR"] = os.path.join(tmp, "numba-cache")
            os.mkdir(env["NUMBA_CACHE_DIR"])
        load_before = os.getloadavg()[0]
        started, started_wall = time.monotonic(), time.time()
        proc = subprocess.Popen([python, "-m", "skewlab", "engine", "--max-batches", str(max_batches),
                                 "--run-name", "first-batch", *(["--wait-for-kernels"] if wait else [])], cwd=tmp, env=env, stdout=subprocess.DEVNULL,
                                stderr=subprocess.PIPE, text=True)
        timer = threading.Timer(timeout, proc.kill)
        timer.start()
        lines: list[tuple[float, str]] = []
        assert proc.stderr is not None
        for line in proc.stderr:
            lines.append((time.monotonic() - started, line.rstrip()))
        proc.wait()
        timer.cancel()
        out: dict = {"cache": "warm" if warm else "cold", "wait_for_kernels": wait, "exit_status": proc.returncode, "load_before": round(load_before, 1),
                     "load_after": round(os.getloadavg()[0], 1)}
        batches: dict[int, dict] = {}
        for t, line in lines:
            if "spark_up_s" not in out and (line.startswith("Spark started in") or re.match(r"run \d+: ", line)):
                out["spark_up_s"] = round(t, 1)  # this engine's line after its session exists; older ones: "run N:"
            if re.match(r"routing kernels of \S+ ready", line):
                out["live_kernels_ready_s"] = round(t, 1)
            m = re.match(r"batch (\d+) \| .*tuples=(\d+)", line)
            if m and "first_data_batch_s" not in out:
                batches[int(m.group(1))] = {"done_s": round(t, 1), "tuples": int(m.group(2))}
            if m and int(m.group(2)) > 0 and "first_data_batch_s" not in out:
                out["first_data_batch_s"] = round(t, 1)
                out["first_data_batch"] = int(m.group(1))
            joined = re.match(r"switch to \S+ \(its routing kernels are compiled\) applied at interval \d+ \(batch (\d+)", line)
            if joined:
                out["grouping_joined_s"], out["grouping_from_batch"] = round(t, 1), int(joined.group(1))
            if "all shadows running" in line:
                out["all_shadows_joined_s"] = round(t, 1)
        out.update(_file_times(os.path.join(tmp, "data", "checkpoints", "first-batch"), started_wall, batches))
        if "spark_up_s" in out and "first_data_batch_s" in out:
            out["first_data_batch_after_spark_up_s"] = round(out["first_data_batch_s"] - out["spark_up_s"], 1)
        if proc.returncode != 0:
            out["last_lines"] = [line for _, line in lines[-3:]]
        return out


def _file_times(checkpoint: str, started_wall: float, batches: dict[int, dict]) -> dict:
    """The run's start-up steps from its files' modification times, seconds since ``started_wall``
    (see the module docstring); ``batches`` (batch -> status line) gets each batch's ``planned_s``."""
    def since(*parts: str) -> float | None:
        try:
            return round(os.path.getmtime(os.path.join(checkpoint, *parts)) - started_wall, 1)
        except OSError:
            return None

    out = {"query_started_s": since("routes", "route-0.snap"), "query_running_s": since("spark", "metadata")}
    for batch, row in batches.items():
        row["planned_s"] = since("spark", "offsets", str(batch))
    out["batches"] = {str(b): batches[b] for b in sorted(batches)}
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--python", default=sys.executable, help="interpreter whose skewlab to run (default: this one)")
    ap.add_argument("--runs", type=int, default=1)
    ap.add_argument("--max-batches", type=int, default=6)
    ap.add_argument("--timeout", type=float, default=600.0)
    ap.add_argument("--warm-cache", action="store_true",
                    help="use the installation's numba cache instead of a fresh one (the compile-free reference)")
    ap.add_argument("--wait-for-kernels", choices=("no", "yes", "both"), default="no",
                    help="pass --wait-for-kernels to the engine (both: alternate, without first)")
    args = ap.parse_args(argv)
    waits = {"no": (False,), "yes": (True,), "both": (False, True)}[args.wait_for_kernels]
    for _ in range(args.runs):
        for wait in waits:
            print(json.dumps({"python": args.python, **one_run(args.python, args.max_batches, args.timeout,
                                                               args.warm_cache, wait)}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
