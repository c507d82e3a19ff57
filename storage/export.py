"""Export of a run (JSON-ready dict, CSV per table) and import of such an export as a new run."""

from __future__ import annotations

import csv
import io
import json
from typing import Any, Mapping

from sqlalchemy import Table, select
from sqlalchemy import insert as sa_insert

from skewlab.storage.base import StoreBase, UnknownRun
from skewlab.storage.models import SCHEMA_VERSION
from skewlab.storage.tables import CHILD_TABLES, JSON_COLUMNS, T_CMD, T_EV, T_RUN
from skewlab.storage.values import decode_row, dump_json

__all__ = ["EXPORT_FORMAT", "Export"]

EXPORT_FORMAT = "skewlab-run"


class Export(StoreBase):
    """Whole-run export / import (any backend to any backend)."""

    def export_run(self, run_id: int) -> dict[str, Any]:
        """Everything recorded for a run as a JSON-serialisable dict (one consistent snapshot).

        Layout: ``{"format": "skewlab-run", "schema_version", "run": {...}, "<table>": [rows...]}``
        for the tables of :mod:`skewlab.storage.models` (rows without ``run_id``; JSON columns decoded).
        Commands addressed to the run or marked by it are included, and so are global commands
        (``run_id`` NULL) that an event of the run names, and the dead letters per batch and reason
        (``dead_letter_batches``: the replay markers, which carry the per-interval counts since schema 5).
        """
        out: dict[str, Any] = {"format": EXPORT_FORMAT, "schema_version": SCHEMA_VERSION}
        with self._read(snapshot=True) as conn:
            run = conn.execute(select(T_RUN).where(T_RUN.c.id == int(run_id))).mappings().first()
            if run is None:
                raise UnknownRun(f"no run with id {run_id}")
            out["run"] = decode_row("runs", run)
            for name, table, order in CHILD_TABLES:
                cond = table.c.run_id == int(run_id)
                if table is T_CMD:  # global commands this run applied (events name them)
                    cond = cond | (T_CMD.c.run_id.is_(None) & T_CMD.c.id.in_(
                        select(T_EV.c.command_id).where(T_EV.c.run_id == int(run_id),
                                                         T_EV.c.command_id.is_not(None))))
                stmt = select(table).where(cond).order_by(*[table.c[c] for c in order])
                rows = []
                for r in conn.execute(stmt).mappings():
                    d = decode_row(name, r)
                    d.pop("run_id", None)
                    rows.append(d)
                out[name] = rows
        return out

    def export_csv(self, run_id: int) -> dict[str, str]:
        """CSV text per table of :meth:`export_run` (``run`` is a one-row table; JSON cells as JSON)."""
        data = self.export_run(run_id)
        out = {}
        for name in ["run"] + [n for n, _, _ in CHILD_TABLES]:
            rows = [data["run"]] if name == "run" else data[name]
            table = T_RUN if name == "run" else dict((n, t) for n, t, _ in CHILD_TABLES)[name]
            cols = [c.name for c in table.columns if name == "run" or c.name != "run_id"]
            buf = io.StringIO()
            writer = csv.DictWriter(buf, fieldnames=cols, lineterminator="\n")
            writer.writeheader()
            for r in rows:
                writer.writerow({
                    c: (json.dumps(r[c], sort_keys=True) if isinstance(r.get(c), (dict, list)) else r.get(c))
                    for c in cols
                })
            out[name] = buf.getvalue()
        return out

    def import_run(self, data: Mapping[str, Any]) -> int:
        """Insert a run exported by :meth:`export_run` (from any backend) as a new run; its new id.

        Exports of an older schema version are accepted: the columns added since are NULL.
        """
        if not isinstance(data, Mapping) or data.get("format") != EXPORT_FORMAT:
            raise ValueError(f"not a {EXPORT_FORMAT} export")
        if not 1 <= int(data.get("schema_version", -1)) <= SCHEMA_VERSION:
            raise ValueError(f"export schema version {data.get('schema_version')} is not 1 to {SCHEMA_VERSION}")
        run = dict(data["run"])
        run.pop("id", None)
        for extra_col in ("intervals", "last_interval", "last_batch", "last_wall_time"):
            run.pop(extra_col, None)
        _encode_row("runs", T_RUN, run)
        with self._write() as conn:
            new_id = int(conn.execute(sa_insert(T_RUN).values(**run).returning(T_RUN.c.id)).scalar_one())
            for name, table, _ in CHILD_TABLES:
                rows = []
                for r in data.get(name, []) or []:
                    row = dict(r)
                    row["run_id"] = new_id
                    if name in ("events", "commands"):
                        row.pop("id", None)
                    _encode_row(name, table, row)
                    rows.append(row)
                if rows:
                    conn.execute(sa_insert(table), rows)
        return new_id


def _encode_row(name: str, table: Table, row: dict[str, Any]) -> None:
    """Re-encode an exported row for insertion (JSON columns → text); drop unknown keys strictly."""
    unknown = set(row) - {c.name for c in table.columns}
    if unknown:
        raise ValueError(f"{name}: unknown column(s) {sorted(unknown)} in import")
    for col in JSON_COLUMNS.get(name, ()):
        if col in row and not isinstance(row[col], str):
            row[col] = dump_json(row[col], f"{name}.{col}")
