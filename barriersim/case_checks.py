"""The whole-job properties every generated case (``barriersim.strategies.SimulatedCase``) must keep, as the
property suite and ``barriersim campaign`` check them: the job finishes once faults stop, no record is lost or
wrong, every exactly-once mode is exactly once, checkpoints complete in order with ids never reused, every completed
checkpoint is a consistent cut with one statistics row per subtask, and a task finishes only after every task it
reads did (Flink's ``END_OF_INPUT``), every alignment ends, and a subtask reports unaligned exactly when it persisted
in-flight data. ``check`` raises ``CaseViolation`` (an ``AssertionError``) naming the first
property broken."""

from __future__ import annotations

from barriersim.runtime.job.config import JobOutcome
from barriersim.runtime.verification.reference import Verdict


class CaseViolation(AssertionError):
    """A generated case broke a property; ``str()`` says which, in one line."""


def violation(case, outcome) -> str | None:
    """The first property ``outcome`` (``strategies.CaseResult`` of ``case``) breaks, or None."""
    sim, verdict = outcome.simulation, outcome.verdict
    if sim.outcome is not JobOutcome.FINISHED:
        return f"the job did not finish once faults stopped: {sim.outcome.value}"
    if verdict.lost:
        return f"lost {verdict.lost} records"
    if verdict.wrong:
        return f"{verdict.wrong} wrong records"
    if case.mode != "at-least-once" and verdict.verdict is not Verdict.EXACTLY_ONCE:
        return f"{case.mode} is not exactly once: {verdict}"
    completed = [c["id"] for c in sim.checkpoints if c["status"] == "COMPLETED"]
    if completed != sorted(completed):
        return f"checkpoints completed out of order: {completed}"
    ids = [c["id"] for c in sim.checkpoints]
    if len(ids) != len(set(ids)):
        return f"a checkpoint id was used twice: {ids}"
    if outcome.cut_violations:
        return "not a consistent cut: " + "; ".join(map(str, outcome.cut_violations[:3]))
    # Flink's END_OF_INPUT: a task finishes only after every task it reads did (else a later checkpoint's barrier
    # from a running upstream meets a finished task, and that checkpoint waits until it expires)
    if outcome.finish_order_violations:
        return "; ".join(outcome.finish_order_violations[:3])
    # Flink's barrier handler: an alignment ends when every channel delivered its barrier, a cancellation marker or
    # its end of partition (runtime.sim.alignment_liveness)
    if outcome.alignment_violations:
        return "; ".join(outcome.alignment_violations[:3])
    # Flink's statistics: a completed checkpoint has one subtask row per subtask, its acknowledgement or, for a task
    # finished before the trigger (FLIP-147), Flink's report of it at the trigger
    rows: dict[tuple, list[str]] = {}
    for row in sim.subtasks:
        rows.setdefault((row.get("job"), row["id"]), []).append(row["task"])
    for row in sim.subtasks:
        # Flink's checkpoint statistics since 1.16 (FLINK-31588): a subtask checkpointed unaligned exactly when it
        # persisted in-flight data
        if row["unaligned_checkpoint"] != (row["alignment_persisted"] > 0):
            return (
                f"checkpoint {row['id']}, {row['task']}: reported unaligned={row['unaligned_checkpoint']} with "
                f"{row['alignment_persisted']} bytes of in-flight data persisted"
            )
    for c in sim.checkpoints:
        if c["status"] == "COMPLETED":
            tasks = rows.get((c.get("job"), c["id"]), [])
            if not len(tasks) == len(set(tasks)) == c["num_acknowledged_subtasks"] == c["num_subtasks"]:
                return (
                    f"checkpoint {c['id']}: {len(tasks)} subtask rows ({len(set(tasks))} subtasks) for "
                    f"{c['num_acknowledged_subtasks']} of {c['num_subtasks']} acknowledged"
                )
    return None


def check(case, outcome) -> None:
    """Raise ``CaseViolation`` if ``outcome`` breaks a property."""
    problem = violation(case, outcome)
    if problem is not None:
        raise CaseViolation(problem)
