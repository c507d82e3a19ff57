"""A Spark standalone cluster whose worker is another host: the worker (and so its executors) runs in
its own network namespace, joined to this machine by a veth pair on a private /24 of 10.77.x.0 that no
interface uses.  Its 127.0.0.1 is its own, so a driver advertising loopback is unreachable from it.
Needs root and ``ip`` (the CI runs as root); everything is created by the fixture and removed in its
teardown, and only the addresses it created are used."""

from __future__ import annotations

import ipaddress
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest


@dataclass
class NetnsCluster:
    master: str           # spark://HOST:PORT
    host_ip: str          # this machine's end of the veth: where the driver must be reachable
    worker_ip: str        # the worker's address inside its namespace
    namespace: str
    work_dir: Path        # the worker's work directory (executors' current directories are below it)
    logs: Path

    def executor_pids(self) -> list[int]:
        """PIDs of the running executors (their JVMs) of this cluster's worker."""
        out = subprocess.run(["pgrep", "-f", f"CoarseGrainedExecutorBackend.*--hostname {self.worker_ip}"],
                             capture_output=True, text=True).stdout
        return [int(p) for p in out.split()]


def stop_process_groups(procs: list[subprocess.Popen]) -> None:
    """SIGTERM the process groups of ``procs`` (each started with ``start_new_session``), last started
    first; SIGKILL a group that is still there after 30 s."""
    for p in reversed(procs):
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGTERM)
    for p in procs:
        try:
            p.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()


def _run(*args: str) -> None:
    subprocess.run(args, check=True, capture_output=True)


def _used_networks() -> list[ipaddress.IPv4Network]:
    out = subprocess.run(["ip", "-4", "-o", "addr"], capture_output=True, text=True).stdout
    return [ipaddress.ip_interface(f.split()[3]).network for f in out.splitlines() if len(f.split()) > 3]


def _free_subnet() -> ipaddress.IPv4Network:
    used = _used_networks()
    start = os.getpid() % 200
    for i in range(250):
        net = ipaddress.ip_network(f"10.77.{(start + i) % 250 + 1}.0/24")
        if not any(net.overlaps(u) for u in used):
            return net
    pytest.skip("no free 10.77.x.0/24 subnet")


def _free_port(host: str) -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def _await(path: Path, text: str, procs: list[subprocess.Popen], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while text not in path.read_text(errors="replace"):
        assert all(p.poll() is None for p in procs), f"{path.name} died:\n{path.read_text(errors='replace')[-3000:]}"
        assert time.monotonic() < deadline, f"{path.name}: no {text!r} in {timeout:.0f} s"
        time.sleep(0.5)


@pytest.fixture
def netns_cluster(tmp_path):
    if os.geteuid() != 0 or shutil.which("ip") is None:
        pytest.skip("needs root and iproute2 (ip netns)")
    import pyspark

    home = Path(pyspark.__file__).parent
    spark_class = home / "bin" / "spark-class"
    net = _free_subnet()
    host_ip, worker_ip = str(net.network_address + 1), str(net.network_address + 2)
    tag = f"{os.getpid() % 100000}"
    ns, veth_host, veth_ns = f"skewlab-t{tag}", f"skh{tag}", f"skn{tag}"
    logs = tmp_path / "cluster"
    logs.mkdir()
    procs: list[subprocess.Popen] = []
    created_ns = created_link = False
    try:
        _run("ip", "netns", "add", ns)
        created_ns = True
        _run("ip", "link", "add", veth_host, "type", "veth", "peer", "name", veth_ns)
        created_link = True
        _run("ip", "link", "set", veth_ns, "netns", ns)
        _run("ip", "addr", "add", f"{host_ip}/{net.prefixlen}", "dev", veth_host)
        _run("ip", "link", "set", veth_host, "up")
        _run("ip", "netns", "exec", ns, "ip", "addr", "add", f"{worker_ip}/{net.prefixlen}", "dev", veth_ns)
        _run("ip", "netns", "exec", ns, "ip", "link", "set", veth_ns, "up")
        _run("ip", "netns", "exec", ns, "ip", "link", "set", "lo", "up")

        env = dict(os.environ, SPARK_HOME=str(home), SPARK_NO_DAEMONIZE="1")
        env.pop("PYSPARK_SUBMIT_ARGS", None)
        port = _free_port(host_ip)

        def start(name: str, argv: list[str], extra: dict[str, str]) -> None:
            procs.append(subprocess.Popen(argv, env={**env, **extra}, cwd=logs, stdin=subprocess.DEVNULL,
                                          stdout=open(logs / f"{name}.log", "wb"), stderr=subprocess.STDOUT,
                                          start_new_session=True))

        start("master", [str(spark_class), "org.apache.spark.deploy.master.Master", "--host", host_ip,
                         "--port", str(port), "--webui-port", str(_free_port(host_ip))], {"SPARK_LOCAL_IP": host_ip})
        _await(logs / "master.log", "I have been elected leader", procs, 120)
        # the "other host": skewlab is installed there in this interpreter (README: what each node needs)
        start("worker", ["ip", "netns", "exec", ns, str(spark_class), "org.apache.spark.deploy.worker.Worker",
                         f"spark://{host_ip}:{port}", "--host", worker_ip, "--cores", "2", "--memory", "1g",
                         "--webui-port", "8181", "--work-dir", str(logs / "work")],
              {"SPARK_LOCAL_IP": worker_ip, "PYSPARK_PYTHON": sys.executable})
        _await(logs / "worker.log", "Successfully registered with master", procs, 120)
        yield NetnsCluster(f"spark://{host_ip}:{port}", host_ip, worker_ip, ns, logs / "work", logs)
    finally:
        stop_process_groups(procs)
        if created_link:
            subprocess.run(["ip", "link", "del", veth_host], capture_output=True)
        if created_ns:
            subprocess.run(["ip", "netns", "del", ns], capture_output=True)
