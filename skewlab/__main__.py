"""``python -m skewlab ...``: the same as the ``skewlab`` console script."""

import sys

from skewlab.cli import main

sys.exit(main())
