"""The store's operator-command queue: the dashboard / CLI submit, the engine takes and marks.

Command payload conventions (validated by the engine against the registry, not here):
``set-algorithm`` ``{"algorithm": name, "params": {…}}``; ``set-param`` ``{"params": {name: value}}``;
``set-workers`` ``{"workers": n}``; ``pause`` / ``resume`` ``{}``.  The store only checks that the
kind is known and that the payload is a JSON object of at most :data:`MAX_PAYLOAD_CHARS` characters,
stored as JSON text and never evaluated.
"""

from __future__ import annotations

from typing import Any, Mapping

from sqlalchemy import Connection, select, update
from sqlalchemy import insert as sa_insert

from skewlab.storage.base import StoreBase, UnknownCommand
from skewlab.shared import COMMAND_KINDS
from skewlab.storage.tables import T_CMD, T_IM
from skewlab.storage.values import as_int, clean_text, decode_row, dump_json, wall_clock

__all__ = ["Commands", "MAX_PAYLOAD_CHARS"]

MAX_PAYLOAD_CHARS = 65_536


class Commands(StoreBase):
    """The ``commands`` table: submit, list pending, mark applied / rejected, recent ones."""

    def submit_command(self, kind: str, payload: Mapping[str, Any] | None = None, *, run_id: int | None = None) -> int:
        """Queue an operator command (``pending``); returns its id.

        ``kind`` must be one of :data:`skewlab.shared.COMMAND_KINDS`; ``payload`` a JSON object.  The
        payload is stored as JSON text only — the engine validates it against the registry.
        ``run_id`` None addresses whichever run is active.
        """
        if not isinstance(kind, str) or kind not in COMMAND_KINDS:
            raise ValueError(f"unknown command kind {str(kind)[:40]!r}; valid: {', '.join(COMMAND_KINDS)}")
        if payload is None:
            payload = {}
        if not isinstance(payload, Mapping):
            raise ValueError("command payload must be a JSON object (a mapping)")
        payload_json = dump_json(payload, "command payload", MAX_PAYLOAD_CHARS, strict=True)
        now = wall_clock()
        row = {
            "run_id": None if run_id is None else int(run_id),
            "kind": kind,
            "payload": payload_json,
            "status": "pending",
            "reason": "",
            "applied_batch": None,
            "created_at": now,
            "updated_at": now,
        }
        with self._write() as conn:
            if run_id is not None:
                self._require_run(conn, int(run_id))
            return int(conn.execute(sa_insert(T_CMD).values(**row).returning(T_CMD.c.id)).scalar_one())

    def pending_commands(self, run_id: int | None = None) -> list[dict[str, Any]]:
        """Pending commands in submission order: global ones, plus those addressed to ``run_id``."""
        cond = T_CMD.c.run_id.is_(None)
        if run_id is not None:
            cond = cond | (T_CMD.c.run_id == int(run_id))
        stmt = select(T_CMD).where(T_CMD.c.status == "pending", cond).order_by(T_CMD.c.id)
        with self._read() as conn:
            return [decode_row("commands", r) for r in conn.execute(stmt).mappings()]

    def mark_command(
        self,
        command_id: int,
        status: str,
        reason: str = "",
        applied_batch: int | None = None,
        *,
        run_id: int | None = None,
    ) -> bool:
        """Move a pending command to ``applied`` or ``rejected``; True if this call changed it.

        Only a pending command changes (a replay after a crash is harmless and returns False).
        ``run_id`` records which run handled a global command.  Unknown ids raise
        :class:`UnknownCommand`.
        """
        if status not in ("applied", "rejected"):
            raise ValueError("command status must be 'applied' or 'rejected'")
        values: dict[str, Any] = {
            "status": status,
            "reason": clean_text(reason),
            "applied_batch": as_int(applied_batch),
            "updated_at": wall_clock(),
        }
        with self._write() as conn:
            if run_id is not None:
                self._require_run(conn, int(run_id))
            cur = conn.execute(select(T_CMD.c.run_id, T_CMD.c.status).where(T_CMD.c.id == int(command_id))).first()
            if cur is None:
                raise UnknownCommand(f"no command with id {command_id}")
            if run_id is not None and cur.run_id is None:
                values["run_id"] = int(run_id)
            res = conn.execute(
                update(T_CMD).where(T_CMD.c.id == int(command_id), T_CMD.c.status == "pending").values(**values)
            )
            return res.rowcount == 1

    def get_command(self, command_id: int) -> dict[str, Any] | None:
        with self._read() as conn:
            row = conn.execute(select(T_CMD).where(T_CMD.c.id == int(command_id))).mappings().first()
        return None if row is None else decode_row("commands", row)

    def recent_commands(self, limit: int = 50, run_id: int | None = None) -> list[dict[str, Any]]:
        """Most recent commands first (all statuses); with ``run_id``: that run's and global ones.

        Each row also carries ``applied_interval``: the interval of the run from which the command is
        in effect (see :meth:`_applied_interval`), None when unknown.
        """
        stmt = select(T_CMD)
        if run_id is not None:
            stmt = stmt.where(T_CMD.c.run_id.is_(None) | (T_CMD.c.run_id == int(run_id)))
        stmt = stmt.order_by(T_CMD.c.id.desc()).limit(max(int(limit), 0))
        with self._read(snapshot=True) as conn:
            rows = [decode_row("commands", r) for r in conn.execute(stmt).mappings()]
            for r in rows:
                r["applied_interval"] = self._applied_interval(conn, r["run_id"], r["applied_batch"])
        return rows

    @staticmethod
    def _applied_interval(conn: Connection, run_id: int | None, batch_id: int | None) -> int | None:
        """The interval number of ``batch_id`` in ``run_id``.

        A command takes effect from a batch that may not be recorded yet (the next one): its interval is
        then counted on from the last recorded batch before it (batches and intervals advance together).
        """
        if run_id is None or batch_id is None:
            return None
        got = conn.execute(
            select(T_IM.c.batch_id, T_IM.c.interval)
            .where(T_IM.c.run_id == int(run_id), T_IM.c.batch_id <= int(batch_id))
            .order_by(T_IM.c.batch_id.desc()).limit(1)
        ).first()
        return None if got is None else int(got.interval) + int(batch_id) - int(got.batch_id)
