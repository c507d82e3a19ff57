"""The "Dead letters" panel: malformed input records of the run, per interval and reason, and the
latest samples as the records read (issue 38, item 4; docs/operators.md "Keys and values").

Everything of the panel is here: its card (:func:`card`), its data (:func:`panel_data`, from
:meth:`skewlab.storage.store.Store.dead_letter_counts` — the count of every (interval, reason) as the
engine recorded it with the interval — and :meth:`~skewlab.storage.store.Store.dead_letters` — the
run's total and the last samples per reason), its figure and its callback (:func:`register`), which
follows the live view's ``tick`` and ``run-select`` and redraws only when the stored counts changed.
The samples are shown as stored: the first bytes of each bad record as text
(:func:`skewlab.engine.workloads.key_file.raw_text`).
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from dash import Input, Output, State, dcc, html, no_update

from skewlab.dashboard import cards
from skewlab.dashboard.figures import MIN_SPAN, _base_layout, empty_figure

__all__ = ["SAMPLES_SHOWN", "WINDOW", "card", "dead_letter_figure", "panel_data", "register", "samples_view"]

#: intervals on the panel's time axis (the latest ones)
WINDOW = 120
#: samples listed per reason, newest first (the store keeps more: storage.interval_rows.DEAD_LETTER_SAMPLE_LIMIT)
SAMPLES_SHOWN = 3
#: one sample per line, as the record reads (long ones wrap)
_SAMPLE_STYLE = {"display": "block", "whiteSpace": "pre-wrap", "overflowWrap": "anywhere", "margin": "1px 0"}
_COLORS = ("#dc2626", "#f59e0b", "#7c3aed", "#0891b2", "#db2777", "#65a30d", "#6b7280", "#2563eb")


def card() -> html.Div:
    """The panel's card (figure, total line, samples table) and the store of what it last drew."""
    return cards.card("Dead letters", [
        dcc.Store(id="dead-letter-drawn"),
        html.Div("", id="dead-letter-total", className="verdict"),
        cards.graph("fig-dead-letters", "skewlab-dead-letters", 240),
        html.Div(id="dead-letter-samples", className="table-box"),
    ], metric="dead_letters", card_id="dead-letters")


def panel_data(store: Any, run_id: int, upper: int | None) -> dict[str, Any]:
    """The panel's content for ``run_id``: ``intervals`` (the last :data:`WINDOW` up to ``upper``, the newest
    recorded interval), ``per_reason`` ({reason: counts per interval}), ``reasons`` (stored rows: total count,
    samples, last batch) and ``signature`` (what changes when anything new is stored)."""
    since = None if upper is None else int(upper) - WINDOW
    rows = store.dead_letter_counts(int(run_id), since_interval=since)
    reasons = store.dead_letters(int(run_id))
    intervals = sorted({int(r["interval"]) for r in rows})
    at = {iv: i for i, iv in enumerate(intervals)}
    per_reason: dict[str, list[int]] = {}
    for r in rows:
        per_reason.setdefault(str(r["reason"]), [0] * len(intervals))[at[int(r["interval"])]] += int(r["count"])
    signature = [run_id, [(d["reason"], int(d["count"]), d.get("last_batch")) for d in reasons]]
    return {"intervals": intervals, "per_reason": per_reason, "reasons": reasons, "signature": signature,
            "upper": upper}


def dead_letter_figure(data: Mapping[str, Any]) -> dict[str, Any]:
    """Stacked bars: dead letters per interval, one colour per reason."""
    if not data["per_reason"]:
        return empty_figure("no malformed records in this run", height=240)
    traces = [dict(type="bar", name=reason, x=data["intervals"], y=counts, width=0.8,
                   marker=dict(color=_COLORS[i % len(_COLORS)]),
                   hovertemplate=f"%{{y:,}} dead letters<extra>{reason} · interval %{{x}}</extra>")
              for i, (reason, counts) in enumerate(sorted(data["per_reason"].items()))]
    layout = _base_layout(240, f"dead-{data['signature'][0]}", top=56)
    upper = data.get("upper")
    span = {} if upper is None else dict(autorangeoptions=dict(include=[max(upper - MIN_SPAN, 0), upper]))
    layout.update(barmode="stack", xaxis=dict(title=dict(text="interval", font=dict(size=11)), **span),
                  yaxis=dict(title=dict(text="dead letters", font=dict(size=11)), rangemode="tozero"))
    return {"data": traces, "layout": layout}


def total_line(reasons: Sequence[Mapping[str, Any]]) -> str:
    """``817 malformed records: bad_json 300 · missing_value 517`` (the run's totals per reason)."""
    if not reasons:
        return "no malformed records in this run"
    total = sum(int(r["count"]) for r in reasons)
    parts = " · ".join(f"{r['reason']} {int(r['count']):,}" for r in sorted(reasons, key=lambda r: -int(r["count"])))
    return f"{total:,} malformed record{'s' if total != 1 else ''}: {parts}"


def samples_view(reasons: Sequence[Mapping[str, Any]]) -> Any:
    """A table: reason, count, last batch, and the latest :data:`SAMPLES_SHOWN` samples, newest first."""
    if not reasons:
        return []
    head = html.Tr([html.Th("reason"), html.Th("count"), html.Th("last batch"), html.Th("latest samples")])
    body = []
    for r in sorted(reasons, key=lambda r: -int(r["count"])):
        samples = [s for s in (r.get("sample") or [])][-SAMPLES_SHOWN:][::-1]
        body.append(html.Tr([
            html.Td(str(r["reason"])), html.Td(f"{int(r['count']):,}"),
            html.Td("—" if r.get("last_batch") is None else str(r["last_batch"])),
            html.Td([html.Code(str(s), className="dead-sample", style=_SAMPLE_STYLE) for s in samples] or "—"),
        ], className="dead-reason"))
    return html.Table([html.Thead(head), html.Tbody(body)], className="data-table dead-table")


def register(app: Any, D: Any) -> None:
    """The panel's callback: on every tick (and a change of run) the counts are read again; the panel is
    drawn again only when they changed."""

    @app.callback(Output("fig-dead-letters", "figure"), Output("dead-letter-total", "children"),
                  Output("dead-letter-samples", "children"), Output("dead-letter-drawn", "data"),
                  Input("tick", "n_intervals"), Input("run-select", "value"), State("dead-letter-drawn", "data"))
    def refresh(_n: Any, run_id: Any, drawn: Any):
        if run_id is None:
            return no_update, no_update, no_update, no_update
        run_id = int(run_id)
        latest = D.store.interval_metrics(run_id, limit=1, latest=True)
        upper = int(latest[0]["interval"]) if latest else None
        data = D.cache.get(("dead-letters", run_id, upper), lambda: panel_data(D.store, run_id, upper))
        signature = [*data["signature"], None if upper is None else upper // 10]  # the axis follows every 10 intervals
        if drawn == signature:
            return no_update, no_update, no_update, no_update
        return dead_letter_figure(data), total_line(data["reasons"]), samples_view(data["reasons"]), signature
