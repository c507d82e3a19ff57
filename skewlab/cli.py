"""The ``skewlab`` command: the composition root, the one module that may import every layer.

It builds the top-level parser and lets each layer add its own subcommands: the engine
(:func:`skewlab.engine.cli.add_commands`: algorithms, workloads, simulate, plan, engine, produce, control,
broker), the
dashboard (:func:`skewlab.dashboard.commands.add_commands`: dashboard, demo) and the benchmarks
(:func:`skewlab.bench.cli.add_commands`: bench).  Every user mistake (unknown algorithm, out-of-range
parameter, unreadable file, malformed snapshot) ends with one line on stderr and exit status 2
(:data:`skewlab.shared.EXIT_USAGE`), never a traceback.
"""

from __future__ import annotations

import argparse
import signal
import sys
from typing import Sequence

from skewlab.shared import EXIT_USAGE, UsageError

__all__ = ["Parser", "build_parser", "main"]


class Parser(argparse.ArgumentParser):
    """An argparse parser whose errors are one :class:`~skewlab.shared.UsageError` line."""

    def error(self, message: str) -> None:  # one line instead of usage + message
        raise UsageError(f"{message} (see '{self.prog} --help')")


def _version() -> str:
    """The installed package's version (its metadata)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("skewlab")
    except PackageNotFoundError:
        return "(version unknown: the package is not installed)"


def build_parser() -> argparse.ArgumentParser:
    """The ``skewlab`` parser with every layer's subcommands."""
    from skewlab.bench.cli import add_commands as add_bench_commands
    from skewlab.dashboard.commands import add_commands as add_dashboard_commands
    from skewlab.engine.cli import add_commands as add_engine_commands

    p = Parser(prog="skewlab", description="Skew-aware load balancing for keyed stream processing.")
    p.add_argument("--version", action="version", version=f"skewlab {_version()}")
    sub = p.add_subparsers(dest="command", required=True, parser_class=Parser)
    add_engine_commands(sub)  # algorithms, workloads, simulate, plan, engine, produce, control, broker
    add_dashboard_commands(sub)  # dashboard, demo
    add_bench_commands(sub)  # bench
    return p


def main(argv: Sequence[str] | None = None) -> int:
    """Run one ``skewlab`` command; returns its exit status."""
    from skewlab.engine.config.params import ParamError

    parser = build_parser()
    try:
        args = parser.parse_args(argv)
        return int(args.func(args) or 0)
    except (UsageError, ParamError) as exc:
        print(f"skewlab: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print("skewlab: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 0


def console_main() -> int:
    """The ``skewlab`` console script: :func:`main` on ``sys.argv``, then Ctrl-C is ignored while the
    interpreter exits.  A command that has finished and printed its result would otherwise die by SIGINT
    (exit status -2, nothing printed) when Ctrl-C lands in the ~0.5 s of interpreter shutdown (kafka-python
    and numpy teardown), and a script would read a finished command as an interrupted one.  Ctrl-C that
    lands after :func:`main` returned, before it is ignored, keeps main's status too; one that lands before
    main's own handler is in place (while the parser is built) is an interruption, status 130."""
    status: int | None = None
    try:
        status = main()
        signal.signal(signal.SIGINT, signal.SIG_IGN)
    except KeyboardInterrupt:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        if status is None:
            print("skewlab: interrupted", file=sys.stderr)
            status = 130
    return status


if __name__ == "__main__":  # pragma: no cover
    sys.exit(console_main())
