"""A source that holds its end of input until it was notified of ``source_min_checkpoints`` completed checkpoints,
as Flink's test sources do (``UnalignedCheckpointTestBase.LongSource``: its reader returns ``END_OF_INPUT`` only
once ``numCompletedCheckpoints >= minCheckpoints``): a job then completes at least that many checkpoints however
fast or slow it runs, which is what tests of real-time (Ray) runs need to ask for a number of checkpoints."""

import random

import pytest
from test_stream_task_end_of_data import _sent_after  # runs the task, flushes, returns what it sent
from two_source_map_job import source_map_sink_graph

from barriersim.runtime.checkpointing.api import CheckpointingMode, ManualClock, ManualTimerService
from barriersim.runtime.coordinator.configuration import CheckpointingConfig
from barriersim.runtime.events import CheckpointBarrier, CheckpointOptions, EndOfData, ResultSubpartitionInfo
from barriersim.runtime.ids import ExecutionAttemptID
from barriersim.runtime.job.config import JobConfig, JobConfigError, WorkloadConfig
from barriersim.runtime.network.config import NetworkConfig
from barriersim.runtime.task.stream_task import StepOutcome, StreamTask

GRAPH = source_map_sink_graph(1)
OUT = ResultSubpartitionInfo(0, 0)


def _source_task(min_checkpoints: int) -> StreamTask:
    task = StreamTask(
        GRAPH,
        "source",
        0,
        ExecutionAttemptID("source", 0, 0),
        mode=CheckpointingMode.ALIGNED,
        clock=ManualClock(0),
        timer_service=ManualTimerService(),
        rng=random.Random(0),
        network=NetworkConfig(buffer_size=64, record_size=32, max_buffers_per_channel=100),
        split=[(i, 1, 1, 0) for i in range(4)],
        source_min_checkpoints=min_checkpoints,
    )
    task.restore(None)
    task.on_credit(OUT, 100)
    return task


def test_the_source_ends_its_input_only_after_the_asked_for_completed_checkpoints():
    task = _source_task(2)
    sent = _sent_after(task)
    assert not any(isinstance(e, EndOfData) for e in sent)  # every record read, the end of input held back
    assert task.process_next().outcome is StepOutcome.IDLE
    for checkpoint_id in (1, 2):
        task.trigger_checkpoint(checkpoint_id, 0, CheckpointOptions.aligned())
        assert [e.checkpoint_id for e in _sent_after(task) if isinstance(e, CheckpointBarrier)] == [checkpoint_id]
        task.on_resume_consumption(OUT)  # the consumer aligned it
        task.notify_checkpoint_complete(checkpoint_id)
        held = checkpoint_id < 2
        ended = [e for e in _sent_after(task) if isinstance(e, EndOfData)]
        assert (ended == []) is held, (checkpoint_id, ended)
    assert task.lifecycle_report()["completed_checkpoints_notified"] == 2


def test_without_the_setting_the_source_ends_with_its_records():
    assert any(isinstance(e, EndOfData) for e in _sent_after(_source_task(0)))


def test_the_setting_needs_periodic_checkpoints():
    with pytest.raises(JobConfigError, match="workload.min_checkpoints: needs periodic checkpoints"):
        JobConfig(GRAPH, checkpointing=CheckpointingConfig(interval_ms=0), workload=WorkloadConfig(min_checkpoints=3))
    with pytest.raises(JobConfigError, match="workload.min_checkpoints: must be at least 0"):
        JobConfig(GRAPH, workload=WorkloadConfig(min_checkpoints=-1))


@pytest.mark.parametrize("mode", ["aligned", "unaligned", "at-least-once"])
def test_a_scenario_s_sources_hold_the_job_for_its_min_checkpoints(mode, tmp_path):
    """``[workload] min_checkpoints`` on the simulator: the job reads its records in about 0.1 s, then its sources
    wait until 12 checkpoints (every 100 ms) completed; it ends after one more, the final one, and verifies."""
    from barriersim.scenarios.loader import load_scenario
    from tests.simulated_runs import simulate_and_verify

    path = tmp_path / "held.toml"
    for min_checkpoints in (0, 12):
        path.write_text(
            f'[scenario]\nname="held"\nseed=3\n[workload]\nrecords=4000\nrate_per_source=20000\n'
            f'min_checkpoints={min_checkpoints}\n[checkpointing]\nmode="{mode}"\ninterval_ms=100\n'
        )
        scenario = load_scenario(path)
        assert scenario.workload.min_checkpoints == min_checkpoints
        _, result, verification, _ = simulate_and_verify(scenario)
        assert result.outcome.value == "finished" and verification.lost == verification.wrong == 0, verification
        completed = result.counts["completed"]
        assert (completed >= 13) is (min_checkpoints > 0), (min_checkpoints, result.counts)  # without: 2
