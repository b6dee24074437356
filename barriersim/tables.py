"""What the command line prints after a run: the run's figures as rich tables, with units, in Flink's words.

How this works: ``console()`` gives a rich Console for stdout that never cuts a value: on a terminal every
column folds (wraps) what does not fit instead of ending it with an ellipsis; printed to a pipe or a file, where
rich would assume 80 columns, the console is as wide as the widest table needs. ``run_table`` is the table of one
Ray run (its figures, its source rates and every timed phase); ``modes_table`` sets several runs (the modes of
``--mode all``, or simulated runs) side by side, each with its own times; ``shared_setup_table`` gives the phases
a Ray run's modes share (printed once); ``rate_warnings`` names each source subtask that did not reach the
offered rate. Times are in seconds, rates in records per second.
"""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

from barriersim.runtime.faults.fault_log import fired_line

UNLIMITED_WIDTH = 10_000


def console(stderr: bool = False) -> Console:
    c = Console(stderr=stderr)
    return c if c.is_terminal else Console(stderr=stderr, width=UNLIMITED_WIDTH)


def new_table(title: str, *headers: tuple[str, str]) -> Table:
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
    what = {"hit": "hit: workload and reference from the cache", "miss": "miss: generated in Spark",
            "corrupt": "unreadable entry: regenerated in Spark"}[c["status"]]
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


def run_table(summary: dict, total_seconds: float | None = None) -> Table:
    """One Ray run: its figures, the rate offered and achieved per source subtask, and its timed phases."""
    s, v, t = summary, summary["verification"], summary["throughput"]
    table = new_table(f"barriersim run: {s['scenario']} (seed {s['seed']}, {s['backend']}, {s['mode']})",
                      ("figure", "left"), ("value", "right"))
    rows = [
        ("records", _n(s["workload"]["records"])),
        (f"records/s through the job ({t['clock']} clock)", _n(t["records_per_second"], 1)),
        ("offered rate per source subtask (records/s)", _n(t.get("offered_per_source_subtask"))),
    ]
    for r in t.get("sources", []):
        flag = "" if r["reached"] in (True, None) else " (NOT REACHED)"
        rows.append((f"achieved rate of {r['task']} (records/s)", _n(r["achieved_per_second"]) + flag))
    rows += [
        ("checkpoints completed", _n(s["checkpoints"]["completed"])),
        ("checkpoints failed", _n(s["checkpoints"]["failed"])),
        ("restarts", _n(s["job"]["restarts"])),
        ("faults", fired_line(s["faults_fired"])),
        ("lost (records)", _n(v["lost"])),
        ("duplicated (records)", _n(v["duplicated"])),
        ("wrong (records)", _n(v["wrong"])),
        ("verdict", v["verdict"]),
    ]
    timings = s.get("timings_seconds", {})
    if cache_line(s) is not None:
        rows.append(("workload cache", cache_line(s)))
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
    """The phases the modes of one Ray run share, once."""
    table = new_table("shared by the modes", ("phase", "left"), ("seconds", "right"))
    if cache_line(summary) is not None:
        table.add_row("workload cache", cache_line(summary))
    for label, value in shared_phase_rows(summary):
        table.add_row(label, value)
    if total_seconds is not None:
        table.add_row("total wall time of the command", _seconds(total_seconds))
    return table


def modes_table(summaries: list[dict]) -> Table:
    """Runs side by side (the modes of one request, or one simulated run), each with its own time."""
    first = summaries[0]
    ray = first["backend"] == "ray"
    table = new_table(f"barriersim {first['backend']}: {first['scenario']} (seed {first['seed']})",
                      ("figure", "left"), *((s["mode"], "right") for s in summaries))
    rows = [
        ("checkpoints completed", lambda s: _n(s["checkpoints"]["completed"])),
        ("checkpoints failed", lambda s: _n(s["checkpoints"]["failed"])),
        ("restarts", lambda s: _n(s["job"]["restarts"])),
        ("faults", lambda s: fired_line(s["faults_fired"], detail=False)),
        ("lost (records)", lambda s: _n(s["verification"]["lost"])),
        ("duplicated (records)", lambda s: _n(s["verification"]["duplicated"])),
        ("wrong (records)", lambda s: _n(s["verification"]["wrong"])),
        ("verdict", lambda s: s["verification"]["verdict"]),
        (f"records/s through the job ({first['throughput']['clock']} clock)",
         lambda s: _n(s["throughput"]["records_per_second"], 1)),
        ("offered rate per source subtask (records/s)",
         lambda s: _n(s["throughput"].get("offered_per_source_subtask"))),
        ("slowest source subtask's rate (records/s)", _rate_cell),
    ]
    if ray:
        rows += [(f"{label} (s)", lambda s, key=key: _seconds(s.get("timings_seconds", {}).get(key)))
                 for key, label in OWN_PHASES]
        rows.append(("own wall time (s)", lambda s: _seconds(s["wall_seconds"])))
    else:
        rows += [
            ("virtual time (s)", lambda s: _n(s.get("simulation", {}).get("virtual_seconds"), 3)),
            ("wall time (s)", lambda s: _n(s["wall_seconds"], 3)),
            ("trace sha256", lambda s: s.get("trace_sha256", "-")),
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
            lines.append(f"{s['mode']}: the restored snapshot is older than the earlier run's last commit: that run "
                         f"had committed {_n(after['records'])} records in {_n(after['transactions'])} transactions "
                         f"after it, which this run processes and commits again (as Flink's restore of an older "
                         f"snapshot does), counted as duplicated")
    return lines


def rate_warnings(summaries: list[dict]) -> list[str]:
    """One line per run whose sources did not reach the offered rate."""
    lines = []
    for s in summaries:
        t = s["throughput"]
        if t.get("offered_rate_reached") is False:
            slow = ", ".join(f"{r['task']} {_n(r['achieved_per_second'])}" for r in t["sources"] if r["reached"] is False)
            lines.append(f"{s['mode']}: offered rate not reached: {_n(t['offered_per_source_subtask'])} records/s per "
                         f"source subtask offered, achieved {slow} records/s ({t['clock']} clock)")
    return lines
