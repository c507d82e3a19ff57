"""The executors' Python workers started while the driver waits are the ones the query's pandas
functions then run in (a fresh ``local[2]`` session in its own process: no other test warmed them)."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

pytest.importorskip("pyspark")

_SCRIPT = textwrap.dedent("""
    import os, sys
    import pandas as pd
    from skewlab.engine.runtimes.spark.session import get_session
    from skewlab.engine.runtimes.spark.python_workers import start_python_workers

    spark = get_session("local[2]", "python-workers-test")
    start_python_workers(spark).join(timeout=300)

    def seen(key, df):
        return pd.DataFrame({"warm": ["skewlab.engine.runtimes.spark.operator" in sys.modules]})

    rows = spark.range(0, 40, 1, 4).groupBy("id").applyInPandas(seen, "warm boolean").collect()
    print("warm" if all(r.warm for r in rows) else "cold")
""")


@pytest.mark.slow
def test_a_later_pandas_job_runs_in_the_warmed_workers(tmp_path):
    out = subprocess.run([sys.executable, "-c", _SCRIPT], cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip().splitlines()[-1] == "warm"
