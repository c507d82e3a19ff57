"""``spark-submit`` launches the engine (README "Run on a cluster"): skewlab's entry script with the
engine's arguments; the master and settings come from spark-submit, relative locations are resolved
on the driver."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

from skewlab.engine.runtimes.spark.result_sink import read_sink

pytestmark = pytest.mark.slow


def test_engine_runs_under_spark_submit(tmp_path):
    import pyspark

    submit = Path(pyspark.__file__).parent / "bin" / "spark-submit"
    entry = importlib.util.find_spec("skewlab.__main__").origin
    (tmp_path / "keys.txt").write_text("\n".join(f"k{i % 50}" for i in range(3000)) + "\n")
    env = {k: v for k, v in os.environ.items() if k not in ("PYSPARK_SUBMIT_ARGS", "SPARK_CONF_DIR", "SPARK_HOME")}
    env.update(PYSPARK_PYTHON=sys.executable, PYSPARK_DRIVER_PYTHON=sys.executable, SKEWLAB_DATA_DIR="data")
    r = subprocess.run([str(submit), "--master", "local[1]", "--conf", "spark.driver.host=127.0.0.1",
                        "--conf", "spark.driver.bindAddress=127.0.0.1", entry, "engine", "--checkpoint", "ck",
                        "--sink", "results", "--db", "sqlite:///skewlab.db", "--source", "file", "--input", "keys.txt",
                        "--workers", "2", "--interval", "0.5", "--shadow", ""],
                       capture_output=True, text=True, env=env, cwd=tmp_path, timeout=600)
    text = r.stdout + r.stderr  # spark-submit joins its Python driver's stderr to stdout
    assert r.returncode == 0, text[-4000:]
    assert "master local[1]" in text, text[-4000:]  # spark-submit's master, not skewlab's default
    assert "input file fully replayed" in text
    assert sum(read_sink(str(tmp_path / "results")).column("result").to_pylist()) > 0
