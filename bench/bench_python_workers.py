#!/usr/bin/env python
"""The first pandas job of a fresh ``local[2]`` session with and without the engine's Python-worker
warm-up (:func:`skewlab.engine.runtimes.spark.python_workers.start_python_workers`) overlapped with a
wait of the driver (standing for the wait for the routing kernels on a cold numba cache).

Usage::

    python bench/bench_python_workers.py [--rounds 2] [--wait 15]

Each variant runs in its own process (a fresh JVM and fresh Python workers), alternating
``warm``/``cold`` per round: start the session, (warm: start the warm-up job,) sleep ``--wait`` seconds,
then time a ``groupBy().applyInPandas`` whose function imports what the engine's query functions
import.  Prints one JSON line per run with the 1-minute load average.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time


def _one(variant: str, wait: float) -> dict:
    import pandas as pd

    from skewlab.engine.runtimes.spark.python_workers import start_python_workers
    from skewlab.engine.runtimes.spark.session import get_session

    spark = get_session("local[2]", "bench-python-workers")
    if variant == "warm":
        start_python_workers(spark)
    time.sleep(wait)

    def f(key, df):
        from skewlab.engine.runtimes.spark import operator, sources, topology  # noqa: F401 - the query's imports
        return pd.DataFrame({"n": [len(df)]})

    started = time.perf_counter()
    spark.range(0, 1000, 1, 4).groupBy("id").applyInPandas(f, "n long").collect()
    return {"variant": variant, "wait_s": wait, "first_pandas_job_s": round(time.perf_counter() - started, 1),
            "load": round(os.getloadavg()[0], 1)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--wait", type=float, default=15.0, help="seconds the driver waits before the job")
    ap.add_argument("--variant", choices=("warm", "cold"), help=argparse.SUPPRESS)  # one run (child process)
    args = ap.parse_args(argv)
    if args.variant:
        print(json.dumps(_one(args.variant, args.wait)), flush=True)
        return 0
    for _ in range(args.rounds):
        for variant in ("warm", "cold"):
            out = subprocess.run([sys.executable, __file__, "--variant", variant, "--wait", str(args.wait)],
                                 capture_output=True, text=True)
            print(out.stdout.strip().splitlines()[-1] if out.returncode == 0 else
                  json.dumps({"variant": variant, "exit_status": out.returncode}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
