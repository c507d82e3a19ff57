import os
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)


def pytest_configure(config):
    """Ctrl-C reaches the commands the tests start as it does in a terminal.  A suite started in the
    background of a non-interactive shell (``.ci/run &``) inherits SIGINT ignored, and so would every
    command it starts: ``skewlab dashboard`` or ``skewlab broker`` would then sit out the tests' Ctrl-C
    (a run of ``.ci/run`` started that way failed three such stops, 2026-12-04)."""
    import signal

    if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


@pytest.fixture
def vocab_1k():
    from skewlab.engine.algorithms.keys import Vocabulary

    return Vocabulary([f"k{i}" for i in range(1000)])


@pytest.fixture(scope="session", autouse=True)
def data_dir_of_this_process(tmp_path_factory):
    """In-process engine runs started from the working directory the suite runs in write their default
    results (``data/results/<checkpoint name>``: ``ckpt`` for most tests) under a directory of this test
    process, not ``<cwd>/data``: with ``-n 2`` two processes' runs would otherwise share one results
    directory, and a new run empties it (``ParquetSink.clear``) under the other's feet.  ``$SKEWLAB_DATA_DIR``
    and a test that changes directory (``monkeypatch.chdir``) keep the engine's own default; subprocesses
    are not affected."""
    from pathlib import Path

    from skewlab.engine.runtimes.spark import engine_config

    own = tmp_path_factory.mktemp("data")
    suite_cwd = Path.cwd()
    default = engine_config.default_data_dir

    def data_dir() -> Path:
        if os.environ.get("SKEWLAB_DATA_DIR") or Path.cwd() != suite_cwd:
            return default()
        return own

    patch = pytest.MonkeyPatch()
    patch.setattr(engine_config, "default_data_dir", data_dir)
    yield own
    patch.undo()


from tests.kafka_fixtures import kafka_broker  # noqa: E402,F401 - session fixture for every test module
from tests.spark_fixtures import spark  # noqa: E402,F401 - ONE SparkSession for the whole run
from tests.kernels_fixtures import kernels_in_process  # noqa: E402,F401 - engine runs: no warm-up child per run


#: the default suite's longest files (summed seconds measured in docs/design-notes.md, CI budget),
#: longest first: with ``--dist loadfile`` a file runs whole in one process, so a long file that starts last
#: leaves the other process idle (xdist's own order, by number of tests, started them last)
LONGEST_FILES = ("tests/engine/test_engine.py", "tests/dashboard/test_dashboard_browser.py",
                 "tests/engine/test_spark_sources.py", "tests/engine/test_engine_records.py")


def pytest_collection_modifyitems(config, items):
    """Longest files first (:data:`LONGEST_FILES`), then the files that run Spark queries or drive
    Chromium, then the rest, each group in collection order and each file's tests together: the two
    processes of the README's ``-n 2 --dist loadfile --no-loadscope-reorder`` finish close together
    (without ``--no-loadscope-reorder``, as in ``.ci/run``'s slow suite, xdist orders the files by
    their number of tests)."""
    def path(item) -> str:
        return item.nodeid.split("::", 1)[0]

    heavy = {path(item) for item in items
             if "spark" in getattr(item, "fixturenames", ()) or item.get_closest_marker("browser") is not None}
    first = {}
    for index, item in enumerate(items):
        first.setdefault(path(item), index)

    def rank(pair) -> tuple[int, int, int, int]:
        index, item = pair
        p = path(item)
        group = (0, LONGEST_FILES.index(p)) if p in LONGEST_FILES else ((1 if p in heavy else 2), 0)
        return (*group, first[p], index)

    items[:] = [item for _, item in sorted(enumerate(items), key=rank)]
