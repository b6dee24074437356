"""Fault schedules: validation naming fault and field, and lossless round trips for replay commands."""

import dataclasses

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from barriersim.runtime.faults.fault_schedule import (
    CrashCoordinator,
    CrashTask,
    CrashTaskManager,
    DelayMessage,
    DropMessage,
    FailCheckpoints,
    FailStorageWrite,
    FaultSchedule,
    FaultScheduleError,
    KillNode,
    MessageKind,
    ProtocolPoint,
    SlowTask,
)
from barriersim.runtime.job.placement import ClusterConfig, place
from barriersim.runtime.jobgraph import JobGraph
from barriersim.scenarios.loader import quickstart_graph

JOBMASTER_POINTS = (ProtocolPoint.AFTER_SAVEPOINT_COMPLETED, ProtocolPoint.AFTER_CHECKPOINT_COMPLETED)
POINTS = [p for p in ProtocolPoint if p not in JOBMASTER_POINTS]

faults = st.one_of(
    st.builds(CrashTask, task=st.sampled_from(["sum#0", "source#1"]), at_ms=st.integers(0, 10_000)),
    st.builds(CrashTask, task=st.just("sum#1"), point=st.sampled_from(POINTS), checkpoint_id=st.integers(1, 20)),
    st.builds(
        CrashTask,
        task=st.just("sum#1"),
        point=st.just(ProtocolPoint.AFTER_SAVEPOINT_COMPLETED),
        checkpoint_id=st.none() | st.integers(1, 20),
        delay_ms=st.integers(0, 50),
    ),
    st.builds(CrashCoordinator, at_ms=st.integers(0, 10_000)),
    st.builds(
        CrashCoordinator,
        point=st.just(ProtocolPoint.AFTER_CHECKPOINT_COMPLETED),
        checkpoint_id=st.integers(1, 20),
        delay_ms=st.none() | st.integers(0, 50),
    ),
    st.builds(CrashTaskManager, taskmanager=st.integers(0, 3), at_ms=st.integers(0, 10_000)),
    st.builds(KillNode, node=st.integers(1, 3), point=st.sampled_from(POINTS), checkpoint_id=st.integers(1, 9)),
    st.builds(
        DelayMessage,
        kind=st.sampled_from(list(MessageKind)),
        delay_ms=st.integers(0, 5000),
        task=st.none() | st.just("sink#0"),
        checkpoint_id=st.none() | st.integers(1, 9),
    ),
    st.builds(DropMessage, kind=st.sampled_from(list(MessageKind)), checkpoint_id=st.integers(1, 9)),
    st.builds(SlowTask, task=st.just("sum#0"), factor=st.floats(0.1, 100), from_ms=st.integers(0, 100)),
    st.builds(FailStorageWrite, checkpoint_id=st.integers(1, 9), task=st.none() | st.just("sum#0")),
    st.builds(FailCheckpoints, first_checkpoint_id=st.integers(1, 9), count=st.integers(1, 5)),
)


@settings(max_examples=200, deadline=None)
@given(st.lists(faults, max_size=6))
def test_schedules_round_trip_through_json(items):
    schedule = FaultSchedule(tuple(items))
    assert FaultSchedule.from_json(schedule.to_json()) == schedule


@pytest.mark.parametrize(
    "plain, message",
    [
        ([{"type": "explode"}], "faults[0].type: unknown fault 'explode'"),
        ([{"type": [1, 2]}], "faults[0].type: unknown fault [1, 2]"),
        ([{"at_ms": 3}], "faults[0].type: is required"),
        (
            [{"type": "crash_task", "task": "a"}],
            "faults[0].at_ms: give exactly one of at_ms and point (in a crash_task fault)",
        ),
        (
            [{"type": "crash_task", "task": "a", "point": "mid_alignment"}],
            "faults[0].checkpoint_id: is required with point mid_alignment",
        ),
        ([{"type": "crash_task", "task": "a", "point": "sometime"}], "faults[0].point: must be one of"),
        (
            [{"type": "crash_task", "task": "a", "point": "after_savepoint_completed"}],
            "faults[0].delay_ms: give delay_ms exactly with point after_savepoint_completed",
        ),
        (
            [{"type": "crash_task", "task": "a", "at_ms": 4, "delay_ms": 3}],
            "faults[0].delay_ms: give delay_ms exactly with point after_savepoint_completed",
        ),
        (
            [{"type": "kill_node", "node": 1, "point": "after_savepoint_completed"}],
            "faults[0].point: after_savepoint_completed is a point of crash_task faults only",
        ),
        ([{"type": "crash_coordinator", "at_ms": -5}], "faults[0].at_ms: must be >= 0, got -5"),
        ([{"type": "crash_coordinator"}], "faults[0].at_ms: give exactly one of at_ms and point"),
        (
            [{"type": "crash_coordinator", "point": "after_checkpoint_completed"}],
            "faults[0].checkpoint_id: give checkpoint_id exactly with point after_checkpoint_completed",
        ),
        (
            [{"type": "crash_coordinator", "point": "mid_alignment", "checkpoint_id": 2}],
            "faults[0].point: a crash_coordinator's point is after_checkpoint_completed, got mid_alignment",
        ),
        (
            [{"type": "crash_coordinator", "at_ms": 5, "delay_ms": 3}],
            "faults[0].delay_ms: give delay_ms only with point after_checkpoint_completed",
        ),
        (
            [{"type": "crash_task", "task": "a", "point": "after_checkpoint_completed", "checkpoint_id": 2}],
            "faults[0].point: after_checkpoint_completed is a point of crash_coordinator faults only",
        ),
        ([{"type": "crash_coordinator", "at_ms": "soon"}], "faults[0].at_ms: must be an integer"),
        ([{"type": "slow_task", "task": "a", "factor": 0}], "faults[0].factor: must be > 0"),
        ([{"type": "fail_checkpoints", "first_checkpoint_id": 0, "count": 1}], "checkpoint ids start at 1"),
        ([{"type": "drop_message", "kind": "ack"}], "faults[0].kind: must be one of acknowledge"),
        ([{"type": "fail_storage_write"}], "faults[0].checkpoint_id: is required"),
        ([{"type": "crash_coordinator", "at_ms": 1, "when": 2}], "faults[0].when: unknown field"),
        (
            [{"type": "crash_taskmanager", "taskmanager": 1}],
            "faults[0].at_ms: give exactly one of at_ms and point (in a crash_taskmanager fault)",
        ),
        ([{"type": "crash_taskmanager", "at_ms": 5}], "faults[0].taskmanager: is required"),
        (
            [{"type": "crash_taskmanager", "taskmanager": "tm1", "at_ms": 5}],
            "faults[0].taskmanager: must be an integer",
        ),
        (
            [{"type": "kill_node", "node": 2, "point": "after_sync_snapshot_before_ack"}],
            "faults[0].checkpoint_id: is required with point",
        ),
        (
            [{"type": "kill_node", "node": 0, "at_ms": 5}],
            "faults[0].node: node 0 hosts the JobManager and cannot be killed",
        ),
        (
            [{"type": "damage_checkpoint", "at_ms": 5, "damage": "roll_back"}],
            "faults[0].target: roll_back rolls the completed-checkpoint list back (target completed_list)",
        ),
        (
            [{"type": "damage_checkpoint", "at_ms": 5, "damage": "unreadable", "target": "completed_list"}],
            "faults[0].damage: unreadable does not strike the completed-checkpoint list (its damages: append_junk, "
            "delete, flip_byte, pickle_payload, roll_back, truncate)",
        ),
    ],
)
def test_malformed_faults_name_the_fault_and_field(plain, message):
    with pytest.raises(FaultScheduleError) as info:
        FaultSchedule.from_plain(plain)
    assert message in str(info.value)


def test_bad_json_is_reported_in_one_line():
    with pytest.raises(FaultScheduleError, match="faults: not valid JSON"):
        FaultSchedule.from_json("[{")


def test_how_drivers_read_a_schedule():
    schedule = FaultSchedule.from_plain(
        [
            {"type": "drop_message", "kind": "notify_complete", "task": "sink#0", "checkpoint_id": 2},
            {"type": "delay_message", "kind": "acknowledge", "delay_ms": 30},
            {"type": "delay_message", "kind": "acknowledge", "delay_ms": 5, "task": "sum#1"},
            {"type": "fail_checkpoints", "first_checkpoint_id": 2, "count": 2},
            {"type": "fail_storage_write", "checkpoint_id": 4},
            {"type": "fail_storage_write", "checkpoint_id": 5, "task": "sum#1"},
            {"type": "crash_coordinator", "at_ms": 300},
            {"type": "crash_coordinator", "at_ms": 100},
        ]
    )
    assert schedule.message_fate(MessageKind.NOTIFY_COMPLETE, "sink#0", 2) == (True, 0)
    assert schedule.message_fate(MessageKind.NOTIFY_COMPLETE, "sink#0", 3) == (False, 0)
    assert schedule.message_fate(MessageKind.ACKNOWLEDGE, "sum#1", 7) == (False, 35)
    assert schedule.message_fate(MessageKind.ACKNOWLEDGE, "sum#0", 7) == (False, 30)
    assert [schedule.declines("source#0", cid, "source#0") for cid in (1, 2, 3, 4)] == [False, True, True, False]
    assert not schedule.declines("sum#0", 2, "source#0")
    assert schedule.fails_storage_write(4) and not schedule.fails_storage_write(3)
    assert not schedule.fails_storage_write(5)  # a task's state write, not the _metadata write
    assert schedule.fails_state_write("sum#1", 5) and not schedule.fails_state_write("sum#0", 5)
    assert not schedule.fails_state_write("sum#1", 4)
    assert schedule.coordinator_crashes() == [100, 300]


def test_taskmanager_and_node_faults_are_checked_against_the_placement():
    graph = quickstart_graph(4, 4)  # slot i holds source#i and keyed-sum#i; the sink shares slot 0
    placement = place(graph, ClusterConfig(taskmanagers=4, slots_per_taskmanager=1, nodes=3))
    FaultSchedule((CrashTaskManager(3, at_ms=1), KillNode(2, at_ms=1))).check_against_placement(graph, placement)
    cases = [
        (
            CrashTaskManager(4, at_ms=1),
            "faults[0].taskmanager: the job runs in 4 TaskManager(s), numbered from 0, got 4",
        ),
        (
            KillNode(3, at_ms=1),
            "faults[0].node: the job's TaskManagers are spread over 3 node(s) (cluster.nodes), "
            "so kill_node needs cluster.nodes >= 2 and a node from 1 to 2, got 3",
        ),
    ]
    for fault, message in cases:
        with pytest.raises(FaultScheduleError) as info:
            FaultSchedule((fault,)).check_against_placement(graph, placement)
        assert str(info.value) == message
    one_node = place(graph, ClusterConfig(taskmanagers=4, slots_per_taskmanager=1))
    with pytest.raises(FaultScheduleError, match=r"spread over 1 node\(s\) \(cluster.nodes\), so kill_node needs"):
        FaultSchedule((KillNode(1, at_ms=1),)).check_against_placement(graph, one_node)
    # sources read no channels: a TaskManager of sources alone never aligns barriers
    apart = JobGraph(
        tuple(
            dataclasses.replace(v, params={"slot_sharing_group": "sources"}) if v.name == "source" else v
            for v in graph.vertices
        ),
        graph.edges,
    )
    sources_apart = place(apart, ClusterConfig(taskmanagers=2, slots_per_taskmanager=4))
    assert sources_apart.subtasks_of(0) == [("source", i) for i in range(4)]
    with pytest.raises(FaultScheduleError, match=r"faults\[0\].point: no subtask of its TaskManager"):
        FaultSchedule(
            (CrashTaskManager(0, point=ProtocolPoint.MID_ALIGNMENT, checkpoint_id=2),)
        ).check_against_placement(apart, sources_apart)


def test_a_group_crash_arms_every_subtask_of_its_taskmanager_or_node():
    schedule = FaultSchedule(
        (
            CrashTaskManager(1, point=ProtocolPoint.MID_ALIGNMENT, checkpoint_id=2),
            KillNode(2, point=ProtocolPoint.BEFORE_FORWARDING_BARRIER, checkpoint_id=3),
            CrashTask("sum#0", point=ProtocolPoint.MID_ALIGNMENT, checkpoint_id=5),
        )
    )
    assert schedule.armed_crash_points("sum#1", set(), taskmanager=1, node=1) == {(ProtocolPoint.MID_ALIGNMENT, 2)}
    assert schedule.armed_crash_points("sum#2", set(), taskmanager=2, node=2) == {
        (ProtocolPoint.BEFORE_FORWARDING_BARRIER, 3)
    }
    assert schedule.armed_crash_points("sum#0", set(), taskmanager=0, node=0) == {(ProtocolPoint.MID_ALIGNMENT, 5)}
    assert schedule.armed_crash_points("sum#1", {schedule.faults[0]}, taskmanager=1, node=1) == frozenset()
    assert schedule.group_crash_at(1, 0, ProtocolPoint.MID_ALIGNMENT, 2, set()) is schedule.faults[0]
    assert schedule.group_crash_at(0, 2, ProtocolPoint.BEFORE_FORWARDING_BARRIER, 3, set()) is schedule.faults[1]
    assert schedule.group_crash_at(0, 1, ProtocolPoint.BEFORE_FORWARDING_BARRIER, 3, set()) is None
    assert schedule.group_crash_at(1, 0, ProtocolPoint.MID_ALIGNMENT, 3, set()) is None
