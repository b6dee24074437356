"""What the strategies put into a generated case, without running it: savepoints between faults are followed by a
crash a few ms after the first one completed (FLINK-10354's window)."""

from hypothesis import given, settings

from barriersim.runtime.faults.fault_schedule import CrashTask, ProtocolPoint
from barriersim.strategies import simulated_cases


@settings(max_examples=60, deadline=None)
@given(simulated_cases())
def test_savepoints_between_faults_are_followed_by_a_crash_after_the_first(case):
    after = [f for f in case.faults.faults if getattr(f, "point", None) is ProtocolPoint.AFTER_SAVEPOINT_COMPLETED]
    if not case.document.get("actions"):
        assert after == []
        return
    assert len(after) == 1
    (crash,) = after
    assert isinstance(crash, CrashTask) and crash.checkpoint_id is None and 3 <= crash.delay_ms <= 12
    vertices = {v["name"]: v["parallelism"] for v in case.document["job"]["vertex"]}
    name, _, index = crash.task.partition("#")
    assert 0 <= int(index) < vertices[name]
