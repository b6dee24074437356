"""What the command line prints after a run: the run's figures as rich tables, with units, in Flink's words.

How this works: ``console()`` gives a rich Console for stdout that never cuts a value (a value folds within its
column; printed to a pipe or a file each table bounds its own value columns, ``VALUE_WIDTH``, so the three modes of
``--mode all`` fit in 120 columns). ``run_table`` is one Ray run (its figures, source rates, timed phases);
``modes_table`` sets runs side by side (the modes of ``--mode all``, or simulated runs); both start with the
checkpoint figures (``checkpoint_rows``: completed and failed checkpoints with the failures' reasons, p50 / p99 of
end-to-end duration, alignment, start delay, persisted and processed data, from ``barriersim.run_statistics``).
``shared_setup_table`` gives the phases a Ray run's modes share; ``cache_line`` the workload cache's part.
"""

from __future__ import annotations

from collections.abc import Callable

from rich.console import Console, JustifyMethod
from rich.table import Table

from barriersim.backends import Backend, ran_on
from barriersim.runtime.faults.fault_log import fired_line

UNLIMITED_WIDTH = 10_000


def console(stderr: bool = False) -> Console:
    c = Console(stderr=stderr)
    return c if c.is_terminal else Console(stderr=stderr, width=UNLIMITED_WIDTH)


def new_table(title: str, *headers: tuple[str, JustifyMethod]) -> Table:
    """A table whose columns ``(header, justify)`` fold long values rather than cutting them."""
    table = Table(title=title)
    for header, justify in headers:
        table.add_column(header, justify=justify, overflow="fold")
    return table


def _n(value, digits: int = 0) -> str:
    if value is None:
        return "-"
    if isinstance(value, (int, float)):
        return f"{value:,.{digits}f}"
    return str(value)


def _seconds(value) -> str:
    return "-" if value is None else f"{value:,.1f}"


def _rate_cell(summary: dict) -> str:
    """The slowest source subtask's achieved rate, flagged when the offered rate was not reached."""
    t = summary["throughput"]
    achieved = [r["achieved_per_second"] for r in t.get("sources", []) if r["achieved_per_second"] is not None]
    if not achieved:
        return "-"
    cell = _n(min(achieved))
    if t.get("offered_rate_reached") is False:
        cell += " (NOT REACHED)"
    return cell


SHARED_PHASES = (
    ("ray_start", "Ray start"),
    ("spark_start", "Spark start, the first job deploying meanwhile"),
    ("workload", "workload generation in Spark"),
    ("cache_write", "verification reference in Spark and workload cache write"),
    ("analytics", "checkpoint statistics in Spark"),
)
CACHED_PHASES = {  # the shared phases' labels when the workload and its reference came from the workload cache
    "spark_start": "Spark start (not started: workload and reference cached)",
    "workload": "workload and Spark's reference read from the cache",
}


def cache_line(summary: dict) -> str | None:
    """The workload cache's part in a Ray run: hit, miss (and written), corrupt (recomputed) or disabled, with
    the key."""
    c = summary.get("workload_cache")
    if not c:
        return None
    if c["status"] == "disabled":
        return "not used (--no-cache)"
    what = {
        "hit": "hit: workload and reference from the cache",
        "miss": "miss: generated in Spark",
        "corrupt": "unreadable entry: regenerated in Spark",
    }[c["status"]]
    if c["status"] != "hit":
        what += ", entry written" if c.get("written") else ", entry not written"
    if c.get("statistics") == "pandas":
        what += "; statistics in pandas"
    return f"{what} (key {c['key']})"


def shared_phase_rows(summary: dict) -> list[tuple[str, str]]:
    """``(phase, seconds)`` of the phases the modes of one Ray run share, labelled as they ran."""
    timings = summary.get("timings_seconds", {})
    hit = (summary.get("workload_cache") or {}).get("status") == "hit"
    pandas = (summary.get("workload_cache") or {}).get("statistics") == "pandas"
    rows = []
    for key, label in SHARED_PHASES:
        if key not in timings:
            continue
        if hit and key in CACHED_PHASES:
            label = CACHED_PHASES[key]
        if key == "analytics" and pandas:
            label = "checkpoint statistics in pandas"
        rows.append((label, _seconds(timings[key])))
    return rows


OWN_PHASES = (
    ("deploy", "deploy after the workload was ready"),
    ("job", "job (tasks running)"),
    ("verification", "verification"),
)
VALUE_WIDTH = 22  # at most, each mode's column of a side-by-side table (a longer value folds within it)
STATISTICS_CAPTION = (
    "p50 / p99: Flink's checkpoint statistics, over the completed checkpoints (alignment and "
    "start delay: over their subtasks)"
)


def _ms(value) -> str:
    if value is None:
        return "-"
    return f"{value:,.0f}" if float(value).is_integer() else f"{value:,.1f}"


def _bytes(value) -> str:
    if value is None:
        return "-"
    for unit in ("B", "KiB", "MiB"):
        if abs(value) < 1024:
            return f"{value:,.0f} {unit}" if unit == "B" else f"{value:,.1f} {unit}"
        value /= 1024
    return f"{value:,.1f} GiB"


def _pair(values: tuple, fmt) -> str:
    p50, p99 = values
    return "-" if p50 is None else f"{fmt(p50)} / {fmt(p99)}"


def checkpoint_rows(statistics: dict) -> list[tuple[str, Callable]]:
    """The checkpoint figures of a run's table, ``(label, get(summary))``: completed and failed checkpoints with
    the reasons of the failures, and the p50 / p99 of Flink's checkpoint statistics (``statistics``: mode ->
    ``barriersim.run_statistics.ModeStatistics``)."""

    def stats(s):
        return statistics.get(s["mode"])

    def failures(s):
        st = stats(s)
        return "\n".join(f"{n} {reason}" for n, reason in st.failures) if st and st.failures else "-"

    def percentiles(metric, fmt):
        return lambda s: _pair(stats(s).percentiles[metric], fmt) if stats(s) else "-"

    return [
        (
            "checkpoints completed / failed",
            lambda s: f"{_n(s['checkpoints']['completed'])} / {_n(s['checkpoints']['failed'])}",
        ),
        ("  failed because", failures),
        ("end-to-end duration p50 / p99 (ms)", percentiles("end_to_end_duration", _ms)),
        ("alignment duration p50 / p99 (ms)", percentiles("alignment_duration", _ms)),
        ("start delay p50 / p99 (ms)", percentiles("start_delay", _ms)),
        ("persisted data p50 / p99", percentiles("persisted_data", _bytes)),
        ("processed data p50 / p99", percentiles("processed_data", _bytes)),
    ]


def outcome_rows() -> list[tuple[str, Callable]]:
    return [
        ("restarts", lambda s: _n(s["job"]["restarts"])),
        ("faults", lambda s: fired_line(s["faults_fired"], detail=False)),
        (
            "lost / duplicated / wrong (records)",
            lambda s: " / ".join(_n(s["verification"][k]) for k in ("lost", "duplicated", "wrong")),
        ),
        ("verdict", lambda s: s["verification"]["verdict"]),
    ]


def run_table(summary: dict, total_seconds: float | None = None, statistics: dict | None = None) -> Table:
    """One Ray run: its checkpoint figures, its outcome, the rate offered and achieved per source subtask, and
    its timed phases."""
    s, t = summary, summary["throughput"]
    table = new_table(
        f"barriersim run: {s['scenario']} (seed {s['seed']}, {s['backend']}, {s['mode']})",
        ("figure", "left"),
        ("value", "right"),
    )
    table.columns[1].max_width = 3 * VALUE_WIDTH
    table.caption = STATISTICS_CAPTION
    rows = [(label, get(s)) for label, get in checkpoint_rows(statistics or {}) + outcome_rows()]
    rows += [
        ("records", _n(s["workload"]["records"])),
        (f"records/s through the job ({t['clock']} clock)", _n(t["records_per_second"], 1)),
        ("offered rate per source subtask (records/s)", _n(t.get("offered_per_source_subtask"))),
    ]
    for r in t.get("sources", []):
        flag = "" if r["reached"] in (True, None) else " (NOT REACHED)"
        rows.append((f"achieved rate of {r['task']} (records/s)", _n(r["achieved_per_second"]) + flag))
    timings = s.get("timings_seconds", {})
    rows += [(f"{label} (s)", value) for label, value in shared_phase_rows(s)]
    for key, label in OWN_PHASES:
        if key in timings:
            rows.append((f"{label} (s)", _seconds(timings[key])))
    if total_seconds is not None:
        rows.append(("total wall time of the command (s)", _seconds(total_seconds)))
    for what, value in rows:
        table.add_row(what, value)
    return table


def shared_setup_table(summary: dict, total_seconds: float | None = None) -> Table:
    """The phases the modes of one Ray run share, once, in seconds (the workload cache's part: ``cache_line``)."""
    table = new_table("shared by the modes", ("phase", "left"), ("seconds", "right"))
    for label, value in shared_phase_rows(summary):
        table.add_row(label, value)
    if total_seconds is not None:
        table.add_row("total wall time of the command", _seconds(total_seconds))
    return table


def modes_table(summaries: list[dict], statistics: dict | None = None) -> Table:
    """Runs side by side (the modes of one request, or one simulated run), each with its own times; the
    simulator's trace hashes are printed after it (``trace_lines``), not in it."""
    first = summaries[0]
    ray = ran_on(first) is Backend.RAY
    table = new_table(
        f"barriersim {first['backend']}: {first['scenario']} (seed {first['seed']})",
        ("figure", "left"),
        *((s["mode"], "right") for s in summaries),
    )
    for column in table.columns[1:]:
        column.max_width = VALUE_WIDTH
    table.caption = STATISTICS_CAPTION
    rows = (
        checkpoint_rows(statistics or {})
        + outcome_rows()
        + [
            (
                f"records/s through the job ({first['throughput']['clock']} clock)",
                lambda s: _n(s["throughput"]["records_per_second"], 1),
            ),
            ("offered rate per source (records/s)", lambda s: _n(s["throughput"].get("offered_per_source_subtask"))),
            ("slowest source's rate (records/s)", _rate_cell),
        ]
    )
    if ray:
        rows += [
            (f"{label} (s)", lambda s, key=key: _seconds(s.get("timings_seconds", {}).get(key)))
            for key, label in OWN_PHASES
        ]
        rows.append(("own wall time (s)", lambda s: _seconds(s["wall_seconds"])))
    else:
        rows += [
            ("virtual time (s)", lambda s: _n(s.get("simulation", {}).get("virtual_seconds"), 3)),
            ("wall time (s)", lambda s: _n(s["wall_seconds"], 3)),
        ]
    for name, get in rows:
        table.add_row(name, *(get(s) for s in summaries))
    return table


def rewind_warnings(summaries: list[dict]) -> list[str]:
    """One line per run restored from a snapshot older than what the run it continues had committed: that output
    is committed again (``restore.earlier_output_after_snapshot``)."""
    lines = []
    for s in summaries:
        after = (s.get("restore") or {}).get("earlier_output_after_snapshot") or {}
        if after.get("transactions"):
            lines.append(
                f"{s['mode']}: the restored snapshot is older than the earlier run's last commit: that run "
                f"had committed {_n(after['records'])} records in {_n(after['transactions'])} transactions "
                f"after it, which this run processes and commits again (as Flink's restore of an older "
                f"snapshot does), counted as duplicated"
            )
    return lines


def rate_warnings(summaries: list[dict]) -> list[str]:
    """One line per run whose sources did not reach the offered rate."""
    lines = []
    for s in summaries:
        t = s["throughput"]
        if t.get("offered_rate_reached") is False:
            slow = ", ".join(
                f"{r['task']} {_n(r['achieved_per_second'])}" for r in t["sources"] if r["reached"] is False
            )
            lines.append(
                f"{s['mode']}: offered rate not reached: {_n(t['offered_per_source_subtask'])} records/s per "
                f"source subtask offered, achieved {slow} records/s ({t['clock']} clock)"
            )
    return lines
