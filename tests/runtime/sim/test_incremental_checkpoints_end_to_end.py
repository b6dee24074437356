"""Incremental checkpoints end to end on the simulator, with a filesystem checkpoint storage: a keyed job whose
state grows and churns restores after task crashes and a JobManager failover, from checkpoints whose shared
runs went through several compactions, and stays exactly-once on both backends; the incremental backend writes
less per checkpoint than it refers to, its shared files live in ``shared/`` and go once no retained checkpoint
uses them (none are left when the job has finished); a damaged shared file is found when the checkpoint is read,
and the previous retained checkpoint is loaded instead."""

from __future__ import annotations

import pytest

from barriersim.runtime.sim.job_simulation import JobSimulation
from barriersim.runtime.state.incremental import IncrementalKeyedStateBackend
from barriersim.runtime.storage.errors import CorruptStateFileError
from barriersim.runtime.verification.reference import expected_sink_input, verify
from barriersim.scenarios.loader import effective_scenario, parse_scenario
from barriersim.scenarios.simulation_inputs import job_config, workload_splits


def scenario(backend: str, faults: list[dict]):
    return effective_scenario(
        parse_scenario(
            {
                "scenario": {"name": "incremental", "seed": 5},
                "workload": {
                    "records": 12_000,
                    "keys": 3_000,
                    "zipf_exponent": 0.3,
                    "rate_per_source": 4_000,
                    "key_growth": True,
                },
                "checkpointing": {
                    "mode": "aligned",
                    "interval_ms": 60,
                    "max_retained": 2,
                    "tolerable_failures": 10,
                    "memory_threshold_bytes": 0,
                    "recovery_claim_mode": "claim",
                },
                # small runs and levels so that a short job flushes and compacts many times
                "state": {
                    "backend": backend,
                    "entry_bytes": 100,
                    "write_buffer_bytes": 20_000,
                    "target_file_bytes": 30_000,
                    "level0_compaction_trigger": 2,
                    "max_bytes_for_level_base": 60_000,
                    "level_multiplier": 2,
                    "num_levels": 4,
                },
                "job": {
                    "vertex": [
                        {"name": "source", "operator": "source", "parallelism": 2},
                        {"name": "sum", "operator": "keyed_sum", "parallelism": 2},
                        {"name": "sink", "operator": "two_phase_commit_sink", "parallelism": 1},
                    ],
                    "edge": [
                        {"from": "source", "to": "sum", "partitioner": "hash"},
                        {"from": "sum", "to": "sink", "partitioner": "rebalance"},
                    ],
                },
                "faults": faults,
            }
        )
    )


FAULTS = [
    {"type": "crash_task", "task": "sum#1", "at_ms": 500},
    {"type": "crash_coordinator", "at_ms": 1_700},
    {"type": "crash_task", "task": "sum#0", "at_ms": 2_900},
]


def run(backend: str, tmp_path, faults=FAULTS):
    s = scenario(backend, faults)
    config = job_config(s)
    splits = workload_splits(s)
    sim = JobSimulation(config, splits, s.seed, checkpoint_directory=tmp_path)
    compactions = []
    deleted: list[str] = []
    discard = sim.storage.discard_shared_state

    def counting_discard(keys):
        keys = list(keys)
        present = sim.storage.shared_state_files()
        deleted.extend(k for k in keys if k in present)
        return discard(keys)

    sim.storage.discard_shared_state = counting_discard
    result = sim.run()
    for task in sim.tasks.values():
        backend_of = getattr(task.operator, "backend", None)
        if isinstance(backend_of, IncrementalKeyedStateBackend):
            compactions.append(backend_of.compactions)
    verdict = verify(expected_sink_input(config.graph, splits), result.committed_output)
    return sim, result, verdict, compactions, deleted


@pytest.mark.parametrize("backend", ["heap", "incremental"])
def test_restores_after_crashes_and_a_jobmanager_failover_stay_exactly_once(backend, tmp_path):
    sim, result, verdict, compactions, deleted = run(backend, tmp_path)
    assert result.outcome.value == "finished", result.failure_reason
    assert verdict.verdict.value == "exactly-once", verdict.as_dict()
    assert result.coordinator_failovers == 1 and result.restarts >= 3
    assert [c for c in result.restored_checkpoint_ids if c is not None], result.restored_checkpoint_ids
    completed = [c for c in result.checkpoints if c["status"] == "COMPLETED"]
    assert len(completed) >= 10
    if backend == "heap":
        assert all(c["checkpointed_size"] == c["state_size"] for c in completed)
        assert not deleted
    else:
        assert sum(compactions) >= 3, compactions  # the last attempt's backends alone compacted several times
        # a checkpoint writes what changed, and refers to the rest
        assert sum(c["checkpointed_size"] < c["state_size"] for c in completed) >= len(completed) // 2
        assert deleted  # shared files were written to shared/ and released once unused
    # the job finished: its checkpoints are discarded (Flink's default retention), shared state with them
    assert sim.storage.shared_state_files() == set()
    assert sim.storage.list_retained_checkpoints() == ()


def test_a_damaged_shared_file_is_found_and_the_previous_checkpoint_loads(tmp_path):
    s = scenario("incremental", [])
    config = job_config(s)
    sim = JobSimulation(config, workload_splits(s), s.seed, checkpoint_directory=tmp_path)
    storage = sim.storage
    seen: dict[int, set[str]] = {}

    def keep_everything(keys):  # the job's end would discard everything: keep the files to inspect them
        return 0

    storage.discard_shared_state = keep_everything
    discard_checkpoint = storage.discard_checkpoint
    storage.discard_checkpoint = lambda checkpoint_id: False
    sim.run()
    shared_dir = storage.shared_state_directory
    for location in storage.list_retained_checkpoints():
        loaded = storage.load_checkpoint(location)
        seen[location.checkpoint_id] = {
            h.file.removeprefix("shared/") for h in loaded.location.state_files if h.file.startswith("shared/")
        }
    # the newest checkpoint that wrote shared files of its own (the last ones, after the job's end, hold no state)
    ids = sorted(seen)
    newest = max(b for a, b in zip(ids, ids[1:]) if seen[b] - seen[a])
    previous = max(i for i in ids if i < newest)
    for later in ids:
        if later > newest:
            discard_checkpoint(later)
    only_newest = seen[newest] - seen[previous]
    victim = shared_dir / sorted(only_newest)[0]
    victim.write_bytes(victim.read_bytes()[:-1] + b"\x00")  # a flipped last byte
    with pytest.raises(CorruptStateFileError, match=victim.name):
        storage.load_checkpoint(storage.list_retained_checkpoints()[0])
    storage.files.write_pointer_list(None)  # no completed-checkpoint list: the newest checkpoint that loads is used
    latest = storage.load_latest_checkpoint()
    assert latest.location.checkpoint_id == previous
    assert any(victim.name in str(e) for e in latest.skipped)
    victim.unlink()  # a deleted shared file is found as well
    with pytest.raises(Exception, match=victim.name):
        storage.load_checkpoint(storage.list_retained_checkpoints()[0])
