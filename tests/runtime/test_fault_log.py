"""The fault log: readings answer as the schedule does and count what matched; a run reports which faults fired
(a crash of a task that already finished does not), in summary.json and in the CLI's output."""

import json

from barriersim.cli import main
from barriersim.runtime.coordinator.configuration import CheckpointingConfig
from barriersim.runtime.faults.fault_log import FaultLog, describe, fired_line
from barriersim.runtime.faults.fault_schedule import FaultSchedule, MessageKind
from barriersim.runtime.job.config import JobConfig, WorkloadConfig
from barriersim.runtime.job.restart_strategy import RestartStrategyConfig
from barriersim.runtime.jobgraph import JobEdge, JobGraph, JobVertex
from barriersim.runtime.jobgraph import OperatorKind as K
from barriersim.runtime.jobgraph import Partitioner as P
from barriersim.runtime.sim.job_simulation import JobSimulation
from barriersim.scenarios.workload import local_splits

SCHEDULE = FaultSchedule.from_json(
    '[{"type":"delay_message","kind":"acknowledge","delay_ms":5},'
    '{"type":"drop_message","kind":"acknowledge","task":"sum#0","checkpoint_id":2},'
    '{"type":"fail_checkpoints","first_checkpoint_id":3,"count":2},'
    '{"type":"fail_storage_write","checkpoint_id":4},'
    '{"type":"fail_storage_write","checkpoint_id":5,"task":"sum#1"},'
    '{"type":"crash_task","task":"sum#0","at_ms":100}]'
)


def test_readings_answer_as_the_schedule_and_count_every_matching_fault():
    log = FaultLog(SCHEDULE)
    for cid in (1, 2, 3):
        for task in ("sum#0", "sum#1"):
            assert log.message_fate(MessageKind.ACKNOWLEDGE, task, cid, at_ms=cid * 10) == SCHEDULE.message_fate(
                MessageKind.ACKNOWLEDGE, task, cid
            )
    assert log.message_fate(MessageKind.ACKNOWLEDGE, "sum#0", 2, at_ms=20) == (True, 5)
    assert [log.declines("source#0", cid, "source#0", at_ms=cid) for cid in (2, 3, 4, 5)] == [False, True, True, False]
    assert not log.fails_storage_write(3, at_ms=1) and log.fails_storage_write(4, at_ms=44)
    assert not log.fails_state_write("sum#0", 5, at_ms=1) and log.fails_state_write("sum#1", 5, at_ms=55)

    report = log.report()
    assert [e["fired"] for e in report] == [7, 2, 2, 1, 1, 0]
    assert [e["first_at_ms"] for e in report] == [10, 20, 3, 44, 55, None]
    assert report[0] == {"type": "delay_message", "kind": "acknowledge", "delay_ms": 5, "fired": 7, "first_at_ms": 10}


def test_the_driver_reports_the_rest_and_the_first_time_stays():
    log = FaultLog(SCHEDULE)
    crash = SCHEDULE.faults[5]
    log.fired(crash, 130)
    log.fired(crash, 170)
    assert log.times_fired(crash) == 2 and log.report()[5]["first_at_ms"] == 130


def test_the_printed_line_names_what_did_not_fire():
    log = FaultLog(SCHEDULE)
    log.fired(SCHEDULE.faults[5], 100)
    line = fired_line(log.report())
    assert line.startswith("1 of 6 fired; not fired: delay_message kind=acknowledge delay_ms=5, ")
    assert fired_line(log.report(), detail=False) == "1 of 6 fired"
    assert fired_line([]) == "none"
    assert describe(log.report()[5]) == "crash_task task=sum#0 at_ms=100"


GRAPH = JobGraph(
    (JobVertex("source", K.SOURCE, 2), JobVertex("sum", K.KEYED_SUM, 2), JobVertex("sink", K.TWO_PHASE_COMMIT_SINK, 1)),
    (JobEdge("source", "sum", P.HASH), JobEdge("sum", "sink", P.REBALANCE)),
)


def test_a_crash_while_the_job_restarts_or_after_it_ended_does_not_fire():
    # 2 x 2,000 records at 10,000/s; sum#1 crashes at 150 ms and the job is down until 250 ms, so the crash of
    # source#0 at 200 ms meets no running task; the job ends long before the coordinator crash at 90 s
    splits = {"source": local_splits(4000, 50, 1.0, 100, 2, seed=3)}
    schedule = FaultSchedule.from_json(
        '[{"type":"crash_task","task":"sum#1","at_ms":150},'
        '{"type":"crash_task","task":"source#0","at_ms":200},'
        '{"type":"crash_coordinator","at_ms":90000}]'
    )
    config = JobConfig(
        GRAPH,
        checkpointing=CheckpointingConfig(mode="aligned", interval_ms=50),
        workload=WorkloadConfig(rate_per_source=10_000),
        restart=RestartStrategyConfig(delay_ms=100),
        faults=schedule,
    )
    result = JobSimulation(config, splits, seed=5).run()
    assert result.outcome.value == "finished" and result.restarts == 1 and result.virtual_ms < 90_000
    assert [(e["fired"], e["first_at_ms"]) for e in result.fault_log] == [(1, 150), (0, None), (0, None)]


def test_summary_json_and_the_cli_say_which_faults_fired(tmp_path, capsys):
    scenario = tmp_path / "tiny.toml"
    scenario.write_text(
        '[scenario]\nname = "tiny"\nseed = 3\n[workload]\nrecords = 2000\nkeys = 20\nrate_per_source = 10000\n'
        '[checkpointing]\nmode = "aligned"\ninterval_ms = 50\n'
        '[[faults]]\ntype = "crash_task"\ntask = "keyed-sum#0"\nat_ms = 30\n'
        '[[faults]]\ntype = "crash_task"\ntask = "sink#0"\nat_ms = 50000\n'
    )
    out = tmp_path / "run"
    assert main(["run", str(scenario), "--backend", "sim", "--out", str(out)]) == 0
    summary = json.loads((out / "summary.json").read_text())
    assert summary["faults"] == [
        {"type": "crash_task", "task": "keyed-sum#0", "at_ms": 30},
        {"type": "crash_task", "task": "sink#0", "at_ms": 50000},
    ]
    assert [(e["task"], e["fired"], e["first_at_ms"]) for e in summary["faults_fired"]] == [
        ("keyed-sum#0", 1, 30),
        ("sink#0", 0, None),
    ]
    printed = capsys.readouterr().out
    assert "faults: 1 of 2 fired; not fired: crash_task task=sink#0 at_ms=50000" in printed
