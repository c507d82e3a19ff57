"""The generic class registry behind the algorithm and workload registries."""

import pytest

from skewlab.engine.algorithms import registry
from skewlab.engine.config.class_registry import ClassRegistry
from skewlab.engine.config.params import ParamError
from skewlab.engine.workloads import UnknownWorkload, create_workload, workload_class, workload_names


class UnknownThing(ParamError):
    pass


def make(name):
    return type(f"Thing_{name.replace('-', '_')}", (), {"name": name})


def test_declared_order_lookup_and_did_you_mean():
    reg = ClassRegistry("thing", (), order=("beta", "alpha", "gamma"), unknown=UnknownThing)
    a, b = reg.register(make("alpha")), reg.register(make("beta"))
    assert reg.names() == ["beta", "alpha"] and reg.get("alpha") is a and reg.classes["beta"] is b
    with pytest.raises(UnknownThing, match=r"unknown thing 'alpah' \(did you mean 'alpha'\?\); known: beta, alpha$"):
        reg.get("alpah")
    with pytest.raises(ValueError, match="not a registry name"):
        reg.register(make("delta"))
    with pytest.raises(ValueError, match="registered twice"):
        reg.register(type("Other", (), {"name": "alpha"}))


def test_without_order_names_are_alphabetical():
    reg = ClassRegistry("thing", ())
    for n in ("zeta", "eta"):
        reg.register(make(n))
    assert reg.names() == ["eta", "zeta"]
    with pytest.raises(ParamError, match="known: eta, zeta"):
        reg.get("nope")


def test_both_registries_use_it():
    assert registry.names()[:3] == ["hash", "consistent", "shuffle"]
    with pytest.raises(registry.UnknownAlgorithm, match="did you mean 'pkg'"):
        registry.get("pkgg")
    assert workload_names() == sorted(workload_names()) and "zipf" in workload_names()
    assert workload_class("zipf").name == "zipf"
    with pytest.raises(UnknownWorkload, match="did you mean 'zipf'"):
        create_workload("zipff")
