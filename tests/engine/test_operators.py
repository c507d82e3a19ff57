"""The keyed-operator interface and its built-ins (engine/operators): results against a direct
computation, merges over split workers, the distinct sketch's error, the loader's one-line errors and
the split-key rule."""

from __future__ import annotations

import numpy as np
import pytest

from skewlab.engine.operators import BUILTINS, OperatorError, is_mergeable, load_operator, split_key_refusal


def _batch(rng: np.random.Generator, n: int, keys: int) -> tuple[np.ndarray, np.ndarray]:
    codes = rng.integers(0, keys, n)
    codes[:keys] = np.arange(keys)  # every key occurs
    return codes, rng.normal(10.0, 3.0, n).round(3)


EXPECTED = {
    "count": lambda v: (len(v),),
    "sum": lambda v: (pytest.approx(float(v.sum())),),
    "mean": lambda v: (pytest.approx(float(v.mean())), len(v)),
    "min": lambda v: (float(v.min()),),
    "max": lambda v: (float(v.max()),),
}


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_windowed_result_equals_direct_computation(name: str) -> None:
    """emit(window partials, new partial) = the aggregate of the key's tuples of the window."""
    op = BUILTINS[name]()
    rng = np.random.default_rng(1)
    batches = [_batch(rng, 500, 7) for _ in range(3)]
    parts = [op.partials(c, 7, v) for c, v in batches]
    for k in range(7):
        got = op.emit([parts[0][k], parts[1][k]], parts[2][k])
        vals = np.concatenate([v[c == k] for c, v in batches])
        assert got == EXPECTED[name](vals)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_partials_of_split_workers_merge_to_the_whole(name: str) -> None:
    """A key's tuples split over three workers: the merge of their partials gives the one-worker result."""
    op = BUILTINS[name]()
    rng = np.random.default_rng(2)
    codes, values = _batch(rng, 3000, 5)
    worker = rng.integers(0, 3, codes.size)
    whole = op.partials(codes, 5, values)
    shares = []
    for w in range(3):
        sel = worker == w
        c, v = codes[sel], values[sel]
        present = np.unique(c)
        remap = np.searchsorted(present, c)
        shares.append(dict(zip(present.tolist(), op.partials(remap, present.size, v))))
    for k in range(5):
        merged = op.finish(op.merge([s[k] for s in shares if k in s]))
        assert merged == pytest.approx(op.finish(whole[k]))


def test_distinct_error_within_two_percent_merged_over_split_workers() -> None:
    """HLL at the default lg_k: 4 keys of 20k–200k distinct values, each split over 4 workers and 3
    batches (repeated values across workers and batches): relative error <= 2 % after the merges."""
    op = BUILTINS["distinct"]()
    rng = np.random.default_rng(3)
    truth = [20_000, 50_000, 100_000, 200_000]
    worker_parts: list[list] = [[] for _ in range(4)]
    seen: list[list[np.ndarray]] = [[] for _ in truth]
    for batch in range(3):
        codes = np.concatenate([np.full(2 * t, k) for k, t in enumerate(truth)])
        values = np.concatenate([rng.integers(0, t, 2 * t) + k * 10**7 for k, t in enumerate(truth)]).astype(np.float64)
        for k in range(len(truth)):
            seen[k].append(values[codes == k])
        worker = rng.integers(0, 4, codes.size)
        for w in range(4):
            sel = worker == w
            worker_parts[w].append(op.partials(codes[sel], len(truth), values[sel]))
    for k, t in enumerate(truth):
        # each worker's window result state, then the merge over the workers
        per_worker = [op.merge([batch[k] for batch in parts]) for parts in worker_parts]
        estimate = op.finish(op.merge(per_worker))[0]
        exact = len(np.unique(np.concatenate(seen[k])))
        assert abs(estimate - exact) / exact <= 0.02, (k, estimate, exact)


def test_join_counts_pairs_and_checksum_pair_by_pair() -> None:
    op = BUILTINS["join"]()
    old = [np.array([1, 2], np.int64), np.array([7], np.int64)]
    new = np.array([3, 4, 9], np.int64)
    allv = [1, 2, 7]
    pairs = [(a, b) for i, a in enumerate(new.tolist()) for b in allv + new.tolist()[:i]]
    assert op.emit(old, new) == (len(pairs), sum((a ^ b) & 0xFFFF for a, b in pairs))
    assert not op.mergeable


def test_split_key_rule() -> None:
    join, count = load_operator("join"), load_operator("count")
    assert split_key_refusal(join.name, join.mergeable, "hash", single_owner=True) is None
    assert split_key_refusal(count.name, count.mergeable, "pkg", single_owner=False) is None
    reason = split_key_refusal(join.name, join.mergeable, "pkg", single_owner=False)
    assert reason and "pkg splits keys" in reason and "join" in reason
    assert not is_mergeable("join") and is_mergeable("mean") and not is_mergeable("my.mod:Op")
    assert is_mergeable("my.mod:Op", declared=True)


def test_a_users_mergeable_operator_gets_the_default_for_mergeable_operators() -> None:
    """Issue 38 item 2: with no --algorithm, a user's MergeableOperator (--operator module:Class) runs
    under the split-key default the README promises, a user's KeyedOperator under the rebalancer;
    the operator class's own declaration decides, as for the built-ins."""
    from skewlab.engine.config.settings import DEFAULT_REBALANCER, DEFAULT_SPLIT_KEY
    from skewlab.engine.runtimes.spark.engine import EngineConfig

    assert is_mergeable("examples.value_mean:ValueMean") and not is_mergeable("examples.ewma_rate:EwmaRate")
    assert not is_mergeable("examples.value_mean:ValueMean", declared=False)  # a run's stored flag wins
    assert EngineConfig(operator="examples.value_mean:ValueMean").algorithm == DEFAULT_SPLIT_KEY == "wchoices"
    assert EngineConfig(operator="examples.latency_histogram:LatencyHistogram").algorithm == DEFAULT_SPLIT_KEY
    assert EngineConfig(operator="examples.ewma_rate:EwmaRate").algorithm == DEFAULT_REBALANCER
    assert EngineConfig(operator="no_such_module_xyz:Op").algorithm == DEFAULT_REBALANCER


@pytest.mark.parametrize("spec, message", [
    ("median", "must be one of count|sum|mean|min|max|distinct|join or package.module:Class"),
    ("no_such_module_xyz:Op", "cannot import no_such_module_xyz"),
    ("json:Nope", "module json has no Nope"),
    ("json:JSONDecoder", "is not a subclass of skewlab.engine.operators.KeyedOperator"),
    ("skewlab.engine.operators.base:KeyedOperator", "does not implement concat, emit, partials"),
])
def test_loader_one_line_errors(spec: str, message: str) -> None:
    with pytest.raises(OperatorError, match=message.replace("|", r"\|").replace(".", r"\.")) as err:
        load_operator(spec)
    assert "\n" not in str(err.value)


def test_user_operator_loads_by_module_path() -> None:
    op = load_operator("skewlab.engine.operators.builtin:Mean")
    assert op.name == "mean" and op.mergeable


def test_docs_say_what_a_mergeable_operator_implements_and_the_format_of_columns() -> None:
    """Issue 38 item 8: docs/operators.md's table of what a KeyedOperator and a MergeableOperator implement
    is the classes' abstract methods, and its ``columns`` example is a declaration the sink takes."""
    import re
    from pathlib import Path

    import pyarrow as pa

    from skewlab.engine.operators import KeyedOperator, MergeableOperator
    from skewlab.engine.runtimes.spark.result_sink import sink_schema

    text = (Path(__file__).resolve().parents[2] / "docs" / "operators.md").read_text(encoding="utf-8")
    rows = re.findall(r"^\| `(\w+)\([^)]*\)` \| ([^|]+) \| ([^|]+) \|$", text, re.M)
    assert rows, "docs/operators.md has no table of the members an operator implements"
    for cls, col in ((KeyedOperator, 1), (MergeableOperator, 2)):
        said = {row[0] for row in rows if row[col].startswith("you implement it")}
        assert said == set(cls.__abstractmethods__), (cls.__name__, said)
    declared = re.search(r"^    columns = (.+)$", text, re.M)
    assert declared, "docs/operators.md shows no columns declaration"
    columns = eval(declared.group(1), {"pa": pa})  # noqa: S307 - the doc's own example

    class Documented(MergeableOperator):
        name = "documented"

        def partials(self, codes, n_keys, values): ...
        def combine(self, a, b): ...
        def finish(self, state): ...

    Documented.columns = columns
    assert sink_schema(Documented).names == ["batch", "key", "result", "p50", "n", "shares"]
