"""Spark settings precedence (the cluster's settings win; loopback and the driver's interpreter only for
local masters), the loopback check, and the real CLI with --conf / spark-defaults.conf / PYSPARK_SUBMIT_ARGS."""

from __future__ import annotations

import subprocess
import sys

import pytest

from skewlab.engine.runtimes.spark.cluster_settings import (LOCAL_ONLY_CONF, is_local_master, loopback_problem,
                                                             plan_settings, python_env)
from skewlab.engine.runtimes.spark.session import DEFAULT_CONF


@pytest.mark.parametrize("master, local", [("local", True), ("local[*]", True), ("local[2]", True),
                                           ("local[2,3]", True), ("local-cluster[2,1,1024]", True),
                                           ("spark://10.0.0.1:7077", False), ("yarn", False),
                                           ("k8s://https://api:6443", False)])
def test_is_local_master(master, local):
    assert is_local_master(master) is local


def test_local_master_gets_loopback_defaults():
    master, settings = plan_settings(None, {}, {}, DEFAULT_CONF)
    assert master == "local[*]"
    assert settings["spark.driver.host"] == "127.0.0.1" and settings["spark.driver.bindAddress"] == "127.0.0.1"
    assert settings["spark.sql.shuffle.partitions"] == DEFAULT_CONF["spark.sql.shuffle.partitions"]


def test_cluster_master_gets_no_loopback():
    master, settings = plan_settings("spark://10.0.0.1:7077", {}, {}, DEFAULT_CONF)
    assert master == "spark://10.0.0.1:7077"
    assert not set(LOCAL_ONLY_CONF) & set(settings)


def test_cluster_settings_win_over_skewlab_defaults():
    cluster = {"spark.master": "spark://m:7077", "spark.driver.host": "10.1.2.3",
               "spark.sql.shuffle.partitions": "64"}
    master, settings = plan_settings(None, cluster, {}, DEFAULT_CONF)
    assert master == "spark://m:7077"
    # keys the cluster set are left to the cluster (the session keeps them)
    assert "spark.driver.host" not in settings and "spark.sql.shuffle.partitions" not in settings
    assert settings["spark.ui.enabled"] == "false"  # the rest of skewlab's defaults still apply


def test_cluster_driver_host_wins_even_for_a_local_master():
    _, settings = plan_settings("local[2]", {"spark.driver.host": "10.1.2.3"}, {}, DEFAULT_CONF)
    assert "spark.driver.host" not in settings
    assert settings["spark.driver.bindAddress"] == "127.0.0.1"


def test_explicit_settings_win_over_everything():
    cluster = {"spark.master": "spark://m:7077", "spark.sql.shuffle.partitions": "64"}
    master, settings = plan_settings(None, cluster, {"spark.sql.shuffle.partitions": "8",
                                                     "spark.master": "spark://other:7077"}, DEFAULT_CONF)
    assert master == "spark://other:7077" and settings["spark.sql.shuffle.partitions"] == "8"
    assert "spark.master" not in settings  # given to the builder as its master
    master, _ = plan_settings("local[1]", cluster, {"spark.master": "spark://other:7077"}, DEFAULT_CONF)
    assert master == "local[1]"  # --master itself is the most explicit


def test_python_env_local_only_and_never_over_a_choice():
    assert python_env("local[*]", {}, {}) == {"PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable}
    assert python_env("spark://m:7077", {}, {}) == {}
    assert python_env("local[*]", {}, {"PYSPARK_PYTHON": "/opt/py", "PYSPARK_DRIVER_PYTHON": "/opt/py"}) == {}
    assert python_env("spark://m:7077", {"spark.pyspark.python": "/opt/py/bin/python"}, {}) == {
        "PYSPARK_PYTHON": "/opt/py/bin/python"}


@pytest.mark.parametrize("master, host, refused", [
    ("local[*]", "127.0.0.1", False),
    ("spark://10.77.0.1:7077", "127.0.0.1", True),
    ("spark://10.77.0.1:7077", "localhost", True),
    ("spark://10.77.0.1:7077", "::1", True),
    ("spark://10.77.0.1:7077", "10.77.0.1", False),
    ("spark://127.0.0.1:7077", "127.0.0.1", False),  # a standalone cluster on this machine's loopback
    ("yarn", "127.0.0.1", True),
    ("yarn", None, False),
])
def test_loopback_problem(master, host, refused):
    problem = loopback_problem(master, host)
    assert (problem is not None) is refused
    if refused:
        assert "spark.driver.host" in problem and "\n" not in problem


def _engine(args, env_extra, tmp_path):
    import os

    env = {k: v for k, v in os.environ.items() if k not in ("SPARK_LOCAL_IP", "PYSPARK_SUBMIT_ARGS", "SPARK_CONF_DIR")}
    env.update({"SKEWLAB_DATA_DIR": str(tmp_path / "data"), **env_extra})
    return subprocess.run([sys.executable, "-m", "skewlab", "engine", "--db", f"sqlite:///{tmp_path}/m.db",
                           "--max-batches", "1", *args], capture_output=True, text=True, env=env, timeout=300,
                          cwd=tmp_path)


@pytest.mark.slow
@pytest.mark.parametrize("how", ["conf", "spark-defaults", "submit-args"])
def test_cli_refuses_a_loopback_driver_for_a_remote_master_in_one_line(tmp_path, how):
    """The settings reach the check from each place Spark users put them (nothing contacts the
    master: the check runs before the SparkContext starts)."""
    args, env = ["--master", "spark://10.77.255.254:7077"], {}
    if how == "conf":
        args += ["--conf", "spark.driver.host=127.0.0.1"]
    elif how == "spark-defaults":
        (tmp_path / "conf").mkdir()
        (tmp_path / "conf" / "spark-defaults.conf").write_text("spark.driver.host   127.0.0.1\n")
        env["SPARK_CONF_DIR"] = str(tmp_path / "conf")
    else:
        env["PYSPARK_SUBMIT_ARGS"] = "--conf spark.driver.host=127.0.0.1 pyspark-shell"
    r = _engine(args, env, tmp_path)
    assert r.returncode == 2, r.stderr[-2000:]
    lines = [ln for ln in r.stderr.splitlines() if ln.startswith("skewlab: error:")]
    assert len(lines) == 1 and "loopback" in lines[0] and "Traceback" not in r.stderr, r.stderr[-2000:]


def test_cli_conf_malformed_is_a_usage_error(tmp_path):
    r = _engine(["--conf", "spark.driver.host"], {}, tmp_path)
    # issue 38 item 5: the one line names --conf and the form it expects
    assert r.returncode == 2 and "--conf: expected KEY=VALUE" in r.stderr and "Traceback" not in r.stderr


def test_demo_refuses_a_malformed_conf_before_starting(tmp_path):
    import os

    env = dict(os.environ, SKEWLAB_DATA_DIR=str(tmp_path / "data"))
    r = subprocess.run([sys.executable, "-m", "skewlab", "demo", "--conf", "spark.driver.host", "--port", "0",
                        "--duration", "1"], capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120)
    assert r.returncode == 2 and "--conf" in r.stderr and "name=value" in r.stderr and "Traceback" not in r.stderr
