"""``skewlab bench TARGET`` finds the module of every target under the package's import name
(a target whose module cannot be imported fails only when that target runs, so check them all here)."""

from skewlab.bench import TARGETS
from skewlab.bench.cli import _module


def test_every_bench_target_imports_with_a_run_function():
    for target in TARGETS:
        module = _module(target)
        assert module.__name__.startswith("skewlab.bench."), module.__name__
        assert callable(getattr(module, "run", None)), f"{target}: {module.__name__} has no run(ctx)"
