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


from tests.kafka_fixtures import kafka_broker  # noqa: E402,F401 - session fixture for every test module
from tests.spark_fixtures import spark  # noqa: E402,F401 - ONE SparkSession for the whole run
from tests.kernels_fixtures import kernels_in_process  # noqa: E402,F401 - engine runs: no warm-up child per run
