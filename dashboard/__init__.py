"""skewlab dashboard: a Dash app that reads only :mod:`storage` and writes only operator commands.

* :func:`skewlab.dashboard.app.create_app` — the app (``app.server`` is the Flask server, for gunicorn);
* :mod:`skewlab.dashboard.data` — incremental queries (``since_interval``) with a small cache;
* :mod:`skewlab.dashboard.figures` — Plotly figures and the ``Patch`` objects that extend them;
* :mod:`skewlab.dashboard.controls` — forms from the registry's declarations, validation, authorisation;
* :mod:`skewlab.dashboard.panels` — the live view's panels, one module each, listed once in ``PANELS``;
* :mod:`skewlab.dashboard.layout` — the page around them (header, KPI strip, sidebar, runs tab);
* :mod:`skewlab.dashboard.commands` — ``skewlab dashboard`` and ``skewlab demo``.

Importing this package is cheap (Dash is imported by :mod:`skewlab.dashboard.app` only), so the CLI can add
the subcommands without loading the web stack; nothing here imports ``skewlab.engine.runtimes.spark`` or pyspark.
"""

from __future__ import annotations

from typing import Any

__all__ = ["create_app"]


def create_app(*args: Any, **kwargs: Any) -> Any:
    """See :func:`skewlab.dashboard.app.create_app`."""
    from skewlab.dashboard.app import create_app as _create

    return _create(*args, **kwargs)
