"""A user's own grouping (issue 38, item 9): named ``package.module:Class`` or by a ``skewlab.groupings``
entry point, checked at start-up with one-line errors, and usable wherever a built-in's name is:
``simulate`` (also through ``--change``), ``engine``, commands, the controller's switch and the shadows.
The example is examples/bounded_loads.py (consistent hashing with bounded loads)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from examples.bounded_loads import BoundedLoads, bounded_placement
from skewlab.cli import main
from skewlab.engine.algorithms import registry
from skewlab.engine.algorithms.groupings.basic import ConsistentHashRing
from skewlab.engine.algorithms.keys import Vocabulary
from skewlab.engine.control.commands import CommandError, validate_command
from skewlab.engine.control.controller import Controller
from skewlab.engine.control.shadow import ShadowEvaluator
from skewlab.engine.runtimes.local import LocalRuntime

SPEC = "examples.bounded_loads:BoundedLoads"
ROOT = Path(__file__).resolve().parents[2]


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_a_spec_loads_the_users_class_and_names_its_planner():
    assert registry.get(SPEC) is BoundedLoads
    planner = registry.create(SPEC, 4, 2, 0, {"epsilon": "0.1"})
    assert planner.name == SPEC and planner.p["epsilon"] == 0.1 and planner.p["gate"] is True
    assert SPEC not in registry.names()  # listed are the built-ins and installed entry points
    info = registry.describe_one(SPEC)
    assert info["name"] == SPEC and info["rebalancing"] and info["single_owner"]
    assert [p["name"] for p in info["params"]][:3] == ["epsilon", "replicas", "theta_max"]


def test_bounded_placement_keeps_every_worker_within_its_capacity():
    rng = np.random.default_rng(5)
    keys = rng.integers(1, 2**63, size=3000, dtype=np.uint64)
    cost = rng.pareto(1.5, size=3000) + 1.0
    cost = np.minimum(cost, cost.sum() / 40)  # no key heavier than a capacity
    ring = ConsistentHashRing(8, 64, 0)
    for eps in (0.05, 0.25, 1.0):
        w = bounded_placement(ring, keys, cost, 8, eps)
        loads = np.bincount(w, weights=cost, minlength=8)
        assert loads.max() <= (1 + eps) * cost.sum() / 8 + 1e-9
    # with room everywhere every key stays where the ring puts it
    assert np.array_equal(bounded_placement(ring, keys, cost, 8, 10.0), ring.lookup(keys))


def test_simulate_runs_the_user_grouping_and_switches_to_it(capsys):
    args = ("--workers", "8", "--keys", "2000", "--zipf", "1.1", "--messages", "60000", "--interval-messages",
            "10000", "--json")
    code, out, err = run(capsys, "simulate", "--algorithm", SPEC, "--param", "gate=false", *args)
    assert code == 0, err
    mine = json.loads(out)
    assert mine["algorithm"] == SPEC and mine["routing_table_size"] > 0 and mine["migrations"] > 0
    hashed = json.loads(run(capsys, "simulate", "--algorithm", "hash", *args)[1])
    # after its first plan the bounded placement beats the hash on the same stream
    assert max(i["imbalance"] for i in mine["intervals"][2:]) < min(i["imbalance"] for i in hashed["intervals"][2:])
    code, out, err = run(capsys, "simulate", "--algorithm", "hash", "--change", f"2:algorithm={SPEC}", *args)
    assert code == 0, err
    switched = json.loads(out)
    assert switched["final_algorithm"] == SPEC
    assert [i["algorithm"] for i in switched["intervals"]][1:4] == ["hash", SPEC, SPEC]


BAD = [
    ("no_such_pkg.groupings:Mine", "algorithm 'no_such_pkg.groupings:Mine': cannot import no_such_pkg.groupings: "
                                   "ModuleNotFoundError: No module named 'no_such_pkg'"),
    ("examples.bounded_loads:Nope", "algorithm 'examples.bounded_loads:Nope': module examples.bounded_loads has no Nope"),
    ("examples.bounded_loads:bounded_placement", "bounded_placement is not a subclass of "
                                                 "skewlab.engine.algorithms.grouping.Planner"),
    ("tests.user_groupings:NoRouter", "NoRouter does not implement make_router"),
    ("tests.user_groupings:NotParams", "NotParams.params must be a tuple of skewlab.engine.config.params.Param"),
    ("tests.user_groupings:BadDefault", "BadDefault.params: the default is invalid: parameter k: 0 is out of range [1, 10]"),
    ("tests.user_groupings:FailsToStart", "FailsToStart on 2 workers with its defaults: RuntimeError: table file missing"),
    ("tests.user_groupings:OffByOne", "router.route must return one integer worker in [0, n) per key; on n=2 workers "
                                      "it gave workers 2..2"),
    ("tests.user_groupings:Unpicklable", "Unpicklable on 2 workers with its defaults: AttributeError: Can't pickle local"),
    ("examples." + "x" * 60 + ":Mine", "a name is at most 64 characters"),
]


@pytest.mark.parametrize("spec, fragment", BAD)
@pytest.mark.parametrize("command", ["simulate", "engine"])
def test_a_bad_grouping_is_refused_at_start_up_in_one_line(capsys, command, spec, fragment):
    code, out, err = run(capsys, command, "--algorithm", spec)
    assert code == 2 and fragment in err, err
    assert err.count("\n") == 1 and "Traceback" not in err


@pytest.mark.parametrize("param, fragment", [
    ("epsilon=0", "parameter epsilon: 0 is out of range (0, 10]"),
    ("replicas=many", "parameter replicas: expected an integer in [1, 4096], got 'many'"),
    ("bogus=1", f"unknown parameter 'bogus' for {SPEC} (known: epsilon, gate"),
])
@pytest.mark.parametrize("command", ["simulate", "engine"])
def test_bad_params_of_a_user_grouping_are_refused_in_one_line(capsys, command, param, fragment):
    code, out, err = run(capsys, command, "--algorithm", SPEC, "--param", param)
    assert code == 2 and fragment in err, err
    assert err.count("\n") == 1


def test_commands_validate_a_user_grouping_by_its_declarations():
    kind, payload = validate_command("set-algorithm", {"algorithm": SPEC, "params": {"epsilon": "0.5"}},
                                     current_algorithm="hash", current_params={})
    assert payload == {"algorithm": SPEC, "params": registry.validate_params(SPEC, {"epsilon": 0.5})}
    with pytest.raises(CommandError, match=r"parameter epsilon: -1 is out of range \(0, 10\]"):
        validate_command("set-algorithm", {"algorithm": SPEC, "params": {"epsilon": -1}},
                         current_algorithm="hash", current_params={})
    with pytest.raises(CommandError, match="module examples.bounded_loads has no Mine"):
        validate_command("set-algorithm", {"algorithm": "examples.bounded_loads:Mine"},
                         current_algorithm="hash", current_params={})
    _, payload = validate_command("set-param", {"params": {"replicas": "32"}}, current_algorithm=SPEC,
                                  current_params=payload["params"])
    assert payload["params"]["replicas"] == 32 and payload["params"]["epsilon"] == 0.5


def test_the_controller_switches_to_it_and_shadows_evaluate_it():
    v = Vocabulary([f"k{i}" for i in range(400)])
    rng = np.random.default_rng(1)
    p = 1 / np.arange(1, 401) ** 1.2
    batches = [rng.choice(400, size=6000, p=p / p.sum()) for _ in range(4)]
    live = LocalRuntime(registry.create("hash", 4), v, window=2)
    shadow = ShadowEvaluator([SPEC], v, n_workers=4, max_tuples=0)
    live.step(batches[0])
    event = live.controller.switch(SPEC, {"gate": False, "theta_max": 0.01})
    assert event["algorithm"] == SPEC and event["previous"] == "hash"
    planner = live.controller.planner
    live.controller.switch(SPEC, {"gate": False, "theta_max": 0.01, "epsilon": 0.05})  # same name: its parameters
    assert live.controller.planner is planner and planner.p["epsilon"] == 0.05
    for b in batches[1:]:
        row = live.step(b)
        keys, counts = np.unique(b, return_counts=True)
        (shadow_row,) = shadow.evaluate(keys, counts)
    assert row["algorithm"] == SPEC and shadow_row["algorithm"] == SPEC
    assert live.controller.planner.routing_table_size() > 0


def _install_entry_points(tmp_path: Path, lines: str) -> dict[str, str]:
    """A distribution on ``tmp_path`` declaring ``lines`` in the skewlab.groupings group (as pip would
    install one); the environment of a process that sees it and examples/."""
    dist = tmp_path / "my_groupings-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: my-groupings\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text(f"[skewlab.groupings]\n{lines}\n")
    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), str(ROOT)])}


def test_entry_point_groupings_are_listed_named_and_checked(tmp_path):
    env = _install_entry_points(tmp_path, f"bounded = {SPEC}\nbroken = no_such_pkg.groupings:Mine\nhash = {SPEC}\n"
                                          f"{'b' * 65} = {SPEC}")
    listing = subprocess.run([sys.executable, "-m", "skewlab", "algorithms", "--json"], capture_output=True,
                             text=True, env=env, timeout=120)
    assert listing.returncode == 0, listing.stderr
    names = [a["name"] for a in json.loads(listing.stdout)]
    assert names[-1] == "bounded" and names.count("hash") == 1 and "broken" not in names and "b" * 65 not in names
    shadows = subprocess.run([sys.executable, "-c", "from skewlab.engine.control.shadow import default_shadow_names; "
                              "print(default_shadow_names('hash'))"], capture_output=True, text=True, env=env, timeout=120)
    assert "'bounded'" in shadows.stdout, shadows.stderr  # an installed grouping is a what-if of every run
    sim = subprocess.run([sys.executable, "-m", "skewlab", "simulate", "--algorithm", "bounded", "--messages", "20000",
                          "--keys", "500", "--interval-messages", "5000", "--json"],
                         capture_output=True, text=True, env=env, timeout=120)
    assert sim.returncode == 0, sim.stderr
    assert json.loads(sim.stdout)["algorithm"] == "bounded"
    for name, fragment in (("broken", "cannot import no_such_pkg.groupings"),
                           ("hash", None)):
        proc = subprocess.run([sys.executable, "-m", "skewlab", "simulate", "--algorithm", name, "--messages", "5000",
                               "--keys", "100", "--interval-messages", "5000", "--json"],
                              capture_output=True, text=True, env=env, timeout=120)
        if fragment is None:  # an entry point cannot take a built-in's name: the built-in runs
            assert proc.returncode == 0 and json.loads(proc.stdout)["routing_table_size"] == 0, proc.stderr
        else:
            assert proc.returncode == 2 and proc.stderr.count("\n") == 1, proc.stderr
            assert proc.stderr.startswith("skewlab: error: algorithm 'broken' (entry point skewlab.groupings: "
                                          "no_such_pkg.groupings:Mine): " + fragment), proc.stderr


def test_the_engine_refuses_a_bad_shadow_grouping_in_one_line(capsys):
    code, out, err = run(capsys, "engine", "--algorithm", "hash", "--shadow", f"{SPEC},examples.bounded_loads:Gone")
    assert code == 2 and err == "skewlab: error: algorithm 'examples.bounded_loads:Gone': module " \
                                "examples.bounded_loads has no Gone\n"
