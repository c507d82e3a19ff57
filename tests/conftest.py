import os
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)


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

    from skewlab.engine.runtimes.spark import engine

    own = tmp_path_factory.mktemp("data")
    suite_cwd = Path.cwd()
    default = engine.default_data_dir

    def data_dir() -> Path:
        if os.environ.get("SKEWLAB_DATA_DIR") or Path.cwd() != suite_cwd:
            return default()
        return own

    patch = pytest.MonkeyPatch()
    patch.setattr(engine, "default_data_dir", data_dir)
    yield own
    patch.undo()


from tests.kafka_fixtures import kafka_broker  # noqa: E402,F401 - session fixture for every test module
from tests.spark_fixtures import spark  # noqa: E402,F401 - ONE SparkSession for the whole run
from tests.kernels_fixtures import kernels_in_process  # noqa: E402,F401 - engine runs: no warm-up child per run
