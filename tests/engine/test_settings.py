"""Run settings are declared once (skewlab.engine.config.settings): every entry point rejects the same out-of-range value
with the declaration's message and accepts the boundaries."""

import pytest

from skewlab.engine.config import settings
from skewlab.engine.control.commands import CommandError, validate_command
from skewlab.engine.config.params import ParamError


def simulate_cli(capsys, flag, value):
    from skewlab.cli import main

    code = main(["simulate", "--algorithm", "hash", f"--{flag}", str(value), "--messages", "0"])
    err = capsys.readouterr().err
    if code == 2:
        raise ParamError(err.strip())
    assert code == 0, err


def simulate_config(capsys, name, value):
    from skewlab.engine.cli.simulate import SimulationConfig

    SimulationConfig(algorithm="hash", **{name: value}).validate()


def engine_config(capsys, name, value):
    from skewlab.engine.runtimes.spark.engine import EngineConfig

    EngineConfig(algorithm="hash", shadow=[], **{name: value}).validate()


def engine_command(capsys, _name, value):
    validate_command("set-workers", {"workers": value}, current_algorithm="hash", current_params={})


def dashboard_box(capsys, _name, value):
    from skewlab.dashboard.controls import build_workers_command

    build_workers_command(str(value))


def spark_generator(capsys, _name, value):
    from skewlab.engine.runtimes.spark.sources import GeneratorStreamReader

    GeneratorStreamReader({"workload": "zipf", "partitions": str(value), "messages": "10"})


def spark_file(capsys, _name, value):
    import os
    import tempfile

    from skewlab.engine.runtimes.spark.sources import FileStreamReader

    fd, path = tempfile.mkstemp(suffix=".txt")
    os.write(fd, b"a\nb\n")
    os.close(fd)
    try:
        FileStreamReader({"path": path, "partitions": str(value)})
    finally:
        os.unlink(path)


CASES = [
    # setting, entry points, values out of range (both sides), boundaries
    (settings.WORKERS, [simulate_config, engine_config, engine_command, dashboard_box], [0, 1025], [1, 1024]),
    (settings.SOURCES, [simulate_config, engine_config, spark_generator, spark_file], [0, 4097], [1, 4096]),
    (settings.WINDOW, [simulate_config, engine_config], [0], [1]),
    (settings.INTERVAL, [engine_config], [0.0, -1.0], [0.001]),
    (settings.INTERVAL_MESSAGES, [simulate_config], [0], [1]),
]


@pytest.mark.parametrize(
    "setting, entry, bad, good",
    [(s, e, bad, good) for s, entries, bad, good in CASES for e in entries],
    ids=lambda v: getattr(v, "__name__", None) or getattr(v, "name", None) or str(v),
)
def test_every_entry_point_validates_from_the_declaration(capsys, setting, entry, bad, good):
    for value in bad:
        with pytest.raises((ParamError, CommandError)) as err:
            entry(capsys, setting.name, value)
        with pytest.raises(ParamError) as declared:
            settings.check(setting, value)
        assert str(declared.value) == f"parameter {setting.name}: {value:g} is out of range {setting.range_text()}"
        # the same text after the parameter's name (the Spark options call sources "partitions")
        assert str(declared.value).split(": ", 1)[1] in str(err.value)
        assert "\n" not in str(err.value)
    for value in good:
        entry(capsys, setting.name, value)


@pytest.mark.parametrize("value, ok", [(0, False), (1, True), (1024, True), (1025, False)])
def test_simulate_cli_workers(capsys, value, ok):
    if ok:
        simulate_cli(capsys, "workers", value)
    else:
        with pytest.raises(ParamError, match=rf"parameter workers: {value} is out of range \[1, 1024\]"):
            simulate_cli(capsys, "workers", value)


def test_cli_help_and_dashboard_range_read_the_declaration(capsys):
    from skewlab.dashboard.controls import workers_range
    from skewlab.cli import main

    with pytest.raises(SystemExit):
        main(["simulate", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert f"in {settings.WORKERS.range_text()}" in text
    assert workers_range(None) == settings.WORKERS.range_text() == f"[1, {settings.MAX_WORKERS}]"


def test_a_runs_max_workers_lowers_the_command_limit():
    with pytest.raises(CommandError, match=r"parameter workers: 9 is out of range \[1, 8\] \(the run's --max-workers"):
        validate_command("set-workers", {"workers": 9}, current_algorithm="hash", current_params={}, max_workers=8)


def test_the_default_grouping_follows_the_operator():
    """Issue 25 item 5: W-Choices where the operator merges a key's partial states (the engine's default
    count, and simulate), Mixed where it cannot (a window join), declared once in settings."""
    from skewlab.engine.algorithms import registry
    from skewlab.engine.cli.simulate import SimulationConfig
    from skewlab.engine.runtimes.spark.engine import EngineConfig

    assert settings.default_algorithm(True) == settings.DEFAULT_SPLIT_KEY == "wchoices"
    assert settings.default_algorithm(False) == settings.DEFAULT_REBALANCER == "mixed"
    assert not registry.get(settings.DEFAULT_SPLIT_KEY).single_owner
    assert registry.get(settings.DEFAULT_REBALANCER).rebalancing
    assert SimulationConfig().algorithm == "wchoices"
    assert EngineConfig(shadow=[]).algorithm == "wchoices"
    join = EngineConfig(shadow=[], operator="join")
    assert join.algorithm == "mixed"
    join.validate()  # the default is never refused for the operator
    assert EngineConfig(shadow=[], operator="join", algorithm="hash").algorithm == "hash"


def test_simulate_runs_the_default_grouping(tmp_path):
    """The real CLI without --algorithm runs W-Choices."""
    import json
    import subprocess
    import sys

    proc = subprocess.run([sys.executable, "-m", "skewlab", "simulate", "--messages", "20000", "--json"],
                          capture_output=True, text=True, cwd=tmp_path, timeout=300)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert {i["algorithm"] for i in out["intervals"]} == {"wchoices"}
