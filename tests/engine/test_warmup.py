"""``python3 -m skewlab.engine.cli.warmup`` (run by ``scripts/install``) leaves nothing for the engine to compile.

Checked the way the engine meets it: a fresh process, other settings than the warm-up used (workers,
sources, window, stream, the join operator's cost model), every registered grouping through the
controller, and the key fingerprinting / vocabulary index of the Spark path; numba reports every real
compilation (not a cache load) as a ``numba:compile`` event, and there must be none.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

_CHECK = r"""
import json
import pyarrow as pa
from numba.core import event

compiled = []

class Listener(event.Listener):
    def on_start(self, ev):
        compiled.append(str(ev.data["dispatcher"].py_func.__qualname__))
    def on_end(self, ev):
        pass

event.register("numba:compile", Listener())
from skewlab.engine.algorithms import registry
from skewlab.engine.algorithms.keys import FingerprintVocabulary, fingerprint_keys
from skewlab.engine.cli.simulate import SimulationConfig, parse_change, run_simulation

for name in registry.names():
    for cost_model in (("linear", "join") if name == "mixed" else ("linear",)):
        run_simulation(SimulationConfig(algorithm=name, workers=13, sources=3, window=4, seed=5, messages=30_000,
                                        interval_messages=3_000, cost_model=cost_model,
                                        workload_params={"keys": 5_000, "z": 1.3},
                                        changes=[parse_change("4:workers=11")]))
keys = pa.chunked_array([[f"w{i % 301}" for i in range(2_000)], ["x", "y"]])
FingerprintVocabulary().encode_fps(fingerprint_keys(keys))
print(json.dumps(sorted(set(compiled))))
"""


@pytest.mark.slow
@pytest.mark.timeout(2400)
def test_after_the_warm_up_the_engine_paths_compile_nothing(tmp_path):
    """From an empty cache of its own (``NUMBA_CACHE_DIR``): the install's cache has usually been
    completed by other tests' compilations by the time this runs, which would hide a kernel the warm-up
    misses (D-Choices' pick among all workers, d >= n, was one)."""
    env = dict(os.environ, NUMBA_CACHE_DIR=str(tmp_path / "numba"))
    warm = subprocess.run([sys.executable, "-m", "skewlab.engine.cli.warmup"], capture_output=True, text=True,
                          timeout=2000, env=env)
    assert warm.returncode == 0 and "routing kernels compiled and cached" in warm.stderr, warm
    assert any((tmp_path / "numba").rglob("*.nbi")), "the warm-up wrote nothing to its cache"
    check = subprocess.run([sys.executable, "-c", _CHECK], capture_output=True, text=True, timeout=600, env=env)
    assert check.returncode == 0, check.stderr[-3000:]
    assert json.loads(check.stdout.strip().splitlines()[-1]) == [], "compiled after the warm-up"


def test_an_unknown_grouping_name_is_one_line_and_exit_2_and_help_is_usage():
    """A mistyped name (or ``--help`` read as a name, as before) gave a traceback with exit status 1."""
    bad = subprocess.run([sys.executable, "-m", "skewlab.engine.cli.warmup", "hash", "dchoise"],
                         capture_output=True, text=True, timeout=120)
    assert bad.returncode == 2, bad.stderr
    assert bad.stderr.count("\n") == 1 and "unknown algorithm 'dchoise'" in bad.stderr and "Traceback" not in bad.stderr
    assert "ready hash" not in bad.stdout  # refused before compiling anything
    helped = subprocess.run([sys.executable, "-m", "skewlab.engine.cli.warmup", "--help"],
                            capture_output=True, text=True, timeout=120)
    assert helped.returncode == 0 and helped.stdout.startswith("usage:") and not helped.stderr
