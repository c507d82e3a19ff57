import copy

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from skewlab.engine.algorithms import registry
from skewlab.engine.control.commands import apply_command
from skewlab.engine.control.controller import Controller
from skewlab.engine.algorithms.keys import Vocabulary


@pytest.fixture
def controller():
    v = Vocabulary([f"k{i}" for i in range(50)])
    c = Controller(registry.create("consistent", 4, 2), v, window=3)
    c.end_interval(np.arange(50) % 50, np.zeros(50, np.int64) + 0)
    return c


def snapshot(c):
    return (c.planner.name, dict(c.planner.p), c.planner.n_workers, c.state.merged()[0].tolist())


@pytest.mark.parametrize(
    "kind, payload, fragment",
    [
        ("set-algorithm", {"algorithm": "nosuch"}, "unknown algorithm"),
        ("set-algorithm", {"algorithm": "hash", "params": {"x": 1}}, "unknown parameter"),
        ("set-algorithm", {"algorithm": 3}, "must be a registry name"),
        ("set-algorithm", {"algorithm": "consistent", "params": {"replicas": 0}}, "out of range"),
        ("set-param", {"params": {"replicas": "many"}}, "expected an integer"),
        ("set-param", {"params": {}}, "non-empty"),
        ("set-param", {"params": {"replicas": "1; DROP TABLE commands"}}, "expected an integer"),
        ("set-workers", {"workers": 0}, "out of range"),
        ("set-workers", {"workers": 5000}, "out of range"),
        ("set-workers", {"workers": "4'; --"}, "must be an integer"),
        ("set-workers", {"workers": 2.5}, "must be an integer"),
        ("set-workers", {"workers": True}, "must be an integer"),
        ("set-workers", {"workers": 3, "evil": 1}, "unexpected field"),
        ("drop-table", {}, "unknown command kind"),
        (None, {}, "unknown command kind"),
        ("pause", [1, 2], "payload must be a JSON object"),
    ],
)
def test_bad_commands_rejected_state_unchanged(controller, kind, payload, fragment):
    before = snapshot(controller)
    res = apply_command(controller, kind, payload)
    assert res.status == "rejected" and fragment in res.reason and "\n" not in res.reason
    assert snapshot(controller) == before


def test_join_refuses_split_key_groupings(controller):
    res = apply_command(controller, "set-algorithm", {"algorithm": "shuffle"}, operator="join")
    assert res.status == "rejected" and "shuffle splits keys over workers, and operator join cannot merge" in res.reason


def test_split_key_rule_follows_the_operators_declaration(controller):
    """A user operator: refused when its run declared it not mergeable (or did not say), applied when
    it declared it mergeable; a built-in's own declaration (mean: mergeable) holds without a flag."""
    res = apply_command(controller, "set-algorithm", {"algorithm": "pkg"}, operator="my.ops:Ewma")
    assert res.status == "rejected" and "operator my.ops:Ewma cannot merge" in res.reason
    assert apply_command(controller, "set-algorithm", {"algorithm": "pkg"}, operator="my.ops:Ewma",
                         mergeable=False).status == "rejected"
    assert apply_command(controller, "set-algorithm", {"algorithm": "pkg"}, operator="mean").status == "applied"
    assert apply_command(controller, "set-algorithm", {"algorithm": "dchoices"}, operator="my.ops:Ewma",
                         mergeable=True).status == "applied"


def test_commands_apply_and_are_idempotent(controller):
    res = apply_command(controller, "set-workers", {"workers": 6})
    assert (res.status, res.action) == ("applied", "workers") and controller.n_workers == 6
    assert apply_command(controller, "set-workers", {"workers": "6"}).action == "noop"
    res = apply_command(controller, "set-param", {"params": {"replicas": "64"}})
    assert res.action == "params" and controller.planner.p["replicas"] == 64
    assert apply_command(controller, "set-param", {"params": {"replicas": 64}}).action == "noop"
    res = apply_command(controller, "set-algorithm", {"algorithm": "hash"})
    assert res.action == "switch" and controller.planner.name == "hash"
    assert apply_command(controller, "set-algorithm", {"algorithm": "hash"}).action == "noop"
    assert apply_command(controller, "pause", {}).action == "pause"
    assert apply_command(controller, "resume", None).action == "resume"
    assert sum(controller.results().values()) == 50


@settings(max_examples=60, deadline=None)
@given(kind=st.one_of(st.text(max_size=15), st.sampled_from(["set-algorithm", "set-param", "set-workers"])),
       payload=st.dictionaries(st.text(max_size=10), st.one_of(st.integers(), st.text(max_size=20), st.floats(),
                               st.none(), st.dictionaries(st.text(max_size=8), st.text(max_size=8), max_size=3)),
                               max_size=3))
def test_fuzzed_commands_never_raise(kind, payload):
    v = Vocabulary(["a", "b"])
    c = Controller(registry.create("hash", 2), v)
    res = apply_command(c, kind, copy.deepcopy(payload))
    assert res.status in ("applied", "rejected")


def test_pause_while_paused_and_resume_while_running_are_noops(controller):
    """The runtime's pause state decides: a second pause (or a resume while running) records no event."""
    assert apply_command(controller, "pause", {}, paused=False).action == "pause"
    res = apply_command(controller, "pause", {}, paused=True)
    assert (res.status, res.action, res.reason) == ("applied", "noop", "already paused")
    assert apply_command(controller, "resume", {}, paused=True).action == "resume"
    assert apply_command(controller, "resume", {}, paused=False).action == "noop"
    assert apply_command(controller, "pause", {}).action == "pause"  # state unknown: as asked
