"""What several layers share and no layer owns: the usage error of the command line and the operator
command kinds.

This module sits below ``storage``, ``engine``, ``dashboard`` and ``bench`` and imports nothing of the
project (``tests/end_to_end/test_layers.py`` checks it), so any layer may import it without creating a cycle.
"""

from __future__ import annotations

__all__ = ["COMMAND_KINDS", "EXIT_USAGE", "UsageError", "copy_as_in_memory"]

#: Exit status of a user mistake on the command line (argparse's convention).
EXIT_USAGE = 2


class UsageError(Exception):
    """A user mistake: ``skewlab`` prints it as one line on stderr and exits with :data:`EXIT_USAGE`."""


#: Operator command kinds (issue, "Operator commands"): what ``skewlab control`` and the dashboard
#: submit, what the ``commands`` table stores and what the engine applies.  Absolute semantics:
#: re-applying a command is harmless.
COMMAND_KINDS: tuple[str, ...] = ("set-algorithm", "set-param", "set-workers", "pause", "resume")


def copy_as_in_memory(obj: object, memo: dict) -> object:
    """A deep copy of ``obj``'s attributes as they are in memory, for a class's ``__deepcopy__``.

    Classes whose pickled form is packed, or leaves out an index rebuilt on load, would otherwise be
    deep-copied through that round trip (``copy.deepcopy`` uses ``__getstate__``/``__setstate__``);
    the Spark engine's driver step copies its controller every batch (``driver_step``)."""
    import copy

    new = object.__new__(type(obj))
    memo[id(obj)] = new
    slots = getattr(type(obj), "__slots__", None)
    if slots is None:
        new.__dict__.update(copy.deepcopy(obj.__dict__, memo))
    for name in slots or ():
        if hasattr(obj, name):
            setattr(new, name, copy.deepcopy(getattr(obj, name), memo))
    return new
