"""What several layers share and no layer owns: the usage error of the command line and the operator
command kinds.

This module sits below ``storage``, ``engine``, ``dashboard`` and ``bench`` and imports nothing of the
project (``tests/end_to_end/test_layers.py`` checks it), so any layer may import it without creating a cycle.
"""

from __future__ import annotations

__all__ = ["COMMAND_KINDS", "EXIT_USAGE", "UsageError"]

#: Exit status of a user mistake on the command line (argparse's convention).
EXIT_USAGE = 2


class UsageError(Exception):
    """A user mistake: ``skewlab`` prints it as one line on stderr and exits with :data:`EXIT_USAGE`."""


#: Operator command kinds (issue, "Operator commands"): what ``skewlab control`` and the dashboard
#: submit, what the ``commands`` table stores and what the engine applies.  Absolute semantics:
#: re-applying a command is harmless.
COMMAND_KINDS: tuple[str, ...] = ("set-algorithm", "set-param", "set-workers", "pause", "resume")
