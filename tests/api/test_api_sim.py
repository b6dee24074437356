"""``barriersim.run`` on the simulator: results as pandas DataFrames with Flink's names, modes side by side,
overrides, and the CLI's typed errors for bad input (no Ray, no Spark)."""

from __future__ import annotations

import json

import pandas as pd
import pytest

import barriersim
from barriersim import api
from barriersim.errors import UnsupportedScenario
from barriersim.runtime.faults.fault_schedule import FaultScheduleError
from barriersim.scenarios.loader import ScenarioError, effective_scenario, load_scenario
from barriersim.sim_backend import simulate
from tests.api.scenarios import TINY, TWO_SOURCES, write


@pytest.fixture
def tiny(tmp_path):
    return write(tmp_path, TINY)


def test_run_returns_the_run_directory_as_dataframes(tiny, tmp_path):
    results = barriersim.run(tiny, out=tmp_path / "run")
    assert isinstance(results, api.RunResult) and list(results) == ["aligned"]
    result = results.only
    assert result.out_dir == tmp_path / "run"
    on_disk = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert result.summary == on_disk
    assert (result.backend, result.mode, result.verdict) == ("sim", "aligned", "exactly-once")
    assert result.summary["workload"]["generated_by"] == "local"

    cps, sts = result.checkpoints, result.subtasks
    assert isinstance(cps, pd.DataFrame) and isinstance(sts, pd.DataFrame)
    for name in (
        "id",
        "status",
        "trigger_timestamp",
        "end_to_end_duration",
        "state_size",
        "checkpointed_size",
        "persisted_data",
        "num_acknowledged_subtasks",
    ):
        assert name in cps.columns, name
    for name in ("id", "task", "ack_timestamp", "alignment_duration", "start_delay", "checkpoint_sync", "aborted"):
        assert name in sts.columns, name
    completed = result.summary["checkpoints"]["completed"]
    assert completed >= 2
    assert (cps["status"] == "COMPLETED").sum() == completed
    # The subtask rows of a completed checkpoint are its acknowledgements, one per subtask: by the running subtasks,
    # and, for those finished before it (FLIP-147), Flink's report of a finished task (``finished``).
    done = cps[cps["status"] == "COMPLETED"].set_index("id")["num_acknowledged_subtasks"]
    acks = sts[sts["id"].isin(done.index) & ~sts["aborted"]].groupby("id")["task"].nunique()
    assert set(acks.index) == set(done.index)
    assert (acks == done).all() and acks.max() == 5  # two sources, two keyed sums, one sink
    assert "finished" in sts.columns


def test_barriersim_exports_run_and_the_errors_it_raises():
    assert barriersim.run is api.run
    assert barriersim.RunResult is api.RunResult
    assert barriersim.ScenarioError is ScenarioError and barriersim.FaultScheduleError is FaultScheduleError
    assert barriersim.UnsupportedScenario is UnsupportedScenario
    assert issubclass(barriersim.ArgumentError, ValueError)


def test_same_trace_as_the_simulator_backend(tiny, tmp_path):
    scenario = load_scenario(tiny)
    direct = simulate(effective_scenario(scenario, seed=5, mode="unaligned"), tmp_path / "direct")
    result = barriersim.run(scenario, out=tmp_path / "api", seed=5, mode="unaligned").only
    assert result.summary["trace_sha256"] == direct["trace_sha256"]
    assert result.summary["seed"] == 5 and result.mode == "unaligned"
    assert result.checkpoints.equals(pd.read_parquet(tmp_path / "direct" / "checkpoints.parquet"))


def test_mode_all_gives_one_result_per_mode(tiny, tmp_path):
    results = barriersim.run(tiny, out=tmp_path / "all", mode="all")
    assert isinstance(results, api.RunResult)
    assert list(results) == ["aligned", "unaligned", "at-least-once"]
    for mode, r in results.items():
        assert r.out_dir == tmp_path / "all" / mode
        assert r.summary["mode"] == mode
        assert (r.out_dir / "checkpoints.parquet").exists()
    assert set(results.verdicts.values()) <= {"exactly-once", "at-least-once"}
    both = results.checkpoints
    assert both.columns[0] == "mode"
    assert len(both) == sum(len(r.checkpoints) for r in results.values())
    assert len({r.summary["trace_sha256"] for r in results.values()}) == 3


def test_overrides_change_the_scenario(tiny, tmp_path):
    # 200 records at 50 records/s per source: 2 s of data, so that checkpoints every second trigger at least twice
    result = barriersim.run(
        tiny,
        out=tmp_path / "o",
        overrides={"workload.records": 200, "workload.rate_per_source": 50, "checkpointing.interval_ms": 1000},
    ).only
    assert result.summary["workload"]["records"] == 200
    triggers = result.checkpoints.sort_values("id")["trigger_timestamp"]
    assert len(triggers) >= 2 and triggers.diff().dropna().min() >= 1000
    default = barriersim.run(tiny, out=tmp_path / "d").only
    assert default.checkpoints.sort_values("id")["trigger_timestamp"].diff().dropna().min() < 1000


def test_a_general_graph_with_two_source_vertices(tmp_path):
    result = barriersim.run(write(tmp_path, TWO_SOURCES), out=tmp_path / "two").only
    assert result.summary["workload"]["records"] == 2 * 300
    assert result.verdict == "exactly-once"
    assert set(result.subtasks["task"].str.partition("#")[0]) == {"left", "right", "both", "sum", "sink"}


def test_precomputed_splits_give_the_same_run_and_record_their_origin(tiny, tmp_path):
    scenario = effective_scenario(load_scenario(tiny), seed=3, mode="aligned")
    plain = simulate(scenario, tmp_path / "plain")
    splits = api.local_workload_splits(scenario)
    given = simulate(scenario, tmp_path / "given", splits=splits, generated_by="spark")
    assert given["trace_sha256"] == plain["trace_sha256"]
    assert given["workload"]["generated_by"] == "spark"
    assert json.loads((tmp_path / "given" / "summary.json").read_text())["workload"]["generated_by"] == "spark"


def test_faults_given_as_plain_tables_or_json(tiny, tmp_path):
    crash = [{"type": "crash_task", "task": "keyed-sum#0", "at_ms": 5}]
    result = barriersim.run(tiny, out=tmp_path / "f", faults=crash).only
    assert result.summary["faults"] == crash
    assert result.summary["simulation"]["restarts"] >= 1
    assert result.verdict == "exactly-once"
    again = barriersim.run(tiny, out=tmp_path / "g", faults=json.dumps(crash)).only
    assert again.summary["trace_sha256"] == result.summary["trace_sha256"]


@pytest.mark.parametrize(
    "kwargs, error, words",
    [
        ({"overrides": {"workload.nope": 1}}, ScenarioError, "overrides.workload.nope"),
        ({"overrides": {"job.source_parallelism": 3}}, ScenarioError, "overrides.job.source_parallelism"),
        ({"overrides": {"workload.records": "many"}}, ScenarioError, "must be an integer"),
        ({"overrides": {"workload.records": 0}}, ScenarioError, "overrides.workload.records"),
        (
            {"overrides": {"checkpointing.mode": "unaligned", "checkpointing.max_concurrent": 2}},
            ScenarioError,
            "checkpointing.max_concurrent",
        ),
        ({"mode": "exactly-twice"}, ScenarioError, "mode: must be one of"),
        ({"seed": -1}, ScenarioError, "seed: must be a non-negative integer"),
        ({"seed": True}, ScenarioError, "seed"),
        ({"faults": [{"type": "meteor"}]}, FaultScheduleError, "faults[0]"),
        ({"faults": "{not json"}, FaultScheduleError, "not valid JSON"),
        ({"backend": "flink"}, barriersim.ArgumentError, "backend: must be one of sim, ray"),
        ({"backend": "spark"}, barriersim.ArgumentError, "backend: must be one of sim, ray"),
        ({"workload": "cloud"}, barriersim.ArgumentError, "workload: must be one of local, spark"),
        ({"backend": "ray", "workload": "local"}, UnsupportedScenario, "Spark on Ray"),
        (
            {"backend": "ray", "overrides": {"workload.rate_per_source": 1000, "workload.source_emission": "exact"}},
            UnsupportedScenario,
            'workload.source_emission: "exact" is the simulator\'s model',
        ),
    ],
)
def test_bad_input_raises_the_clis_typed_errors(tiny, tmp_path, kwargs, error, words):
    with pytest.raises(error) as info:
        barriersim.run(tiny, out=tmp_path / "never", **kwargs)
    message = str(info.value)
    assert words in message and "\n" not in message
    if error is ScenarioError:
        assert message.startswith(str(tiny))
    assert not (tmp_path / "never").exists()


def test_a_run_refuses_a_non_empty_out_directory_unless_forced(tiny, tmp_path):
    first = barriersim.run(tiny, out=tmp_path / "run", mode="all")
    before = sorted(p.relative_to(tmp_path) for p in (tmp_path / "run").rglob("*"))
    with pytest.raises(barriersim.ArgumentError, match=r"--out: .*run is not empty"):
        barriersim.run(tiny, out=tmp_path / "run")
    assert sorted(p.relative_to(tmp_path) for p in (tmp_path / "run").rglob("*")) == before
    again = barriersim.run(tiny, out=tmp_path / "run", force=True)
    assert isinstance(again, api.RunResult) and list(again) == ["aligned"] and len(first) == 3
    assert not (tmp_path / "run" / "unaligned").exists()  # the previous run was replaced, not mixed in


def test_one_result_type_for_one_mode_and_several(tiny, tmp_path):
    one = barriersim.run(tiny, out=tmp_path / "one")
    several = barriersim.run(tiny, out=tmp_path / "several", mode=["aligned", "unaligned"])
    assert type(one) is type(several) is barriersim.RunResult
    assert isinstance(one.only, barriersim.ModeRun) and one["aligned"] is one.only
    with pytest.raises(ValueError, match="holds 2 modes"):
        _ = several.only
    assert all(isinstance(r, barriersim.ModeRun) for r in several.values())


def test_a_missing_or_broken_scenario_file_names_the_file(tmp_path):
    with pytest.raises(ScenarioError, match="no such scenario file"):
        barriersim.run(tmp_path / "absent.toml")
    broken = write(tmp_path, TINY.replace("records = 1200", "records = -5"), "broken.toml")
    with pytest.raises(ScenarioError, match=r"broken\.toml: workload\.records: must be between"):
        barriersim.run(broken)
    with pytest.raises(ScenarioError, match="must be a scenario file's path or a Scenario"):
        barriersim.run(42)


def test_the_run_directory_records_where_each_subtask_ran_and_which_channels_are_local(tmp_path):
    # 4 TaskManagers of one slot on 3 nodes; node 2 (TaskManager 2: source#2, keyed-sum#2) is lost mid-run
    path = write(
        tmp_path,
        TINY.replace("rate_per_source = 20000", "rate_per_source = 2000")
        .replace("source_parallelism = 2", "source_parallelism = 4")
        .replace("keyed_sum_parallelism = 2", "keyed_sum_parallelism = 4")
        + """
[cluster]
taskmanagers = 4
slots_per_taskmanager = 1
nodes = 3

[[faults]]
type = "kill_node"
node = 2
at_ms = 30
""",
    )
    result = barriersim.run(path, out=tmp_path / "run").only
    placement = result.summary["placement"]
    assert list(result.summary).index("placement") == list(result.summary).index("cluster") + 1
    # keyed-sum#i reads 4 channels (one local: source#i); the sink 4 (one local: keyed-sum#0)
    assert placement == {
        "taskmanagers": 4,
        "slots_per_taskmanager": 1,
        "nodes": 3,
        "input_channels": {"local": 5, "remote": 15},
        "taskmanager_nodes": [[0, 1, 2, 0], [0, 1, 0, 0]],
        "nodes_lost": [2],
    }
    rows = pd.read_parquet(tmp_path / "run" / "placement.parquet")
    assert len(rows) == 2 * 9 and set(rows["deployment"]) == {0, 1}
    moved = rows[rows["task"] == "keyed-sum#2"].set_index("deployment")
    assert moved["taskmanager"].tolist() == [2, 2] and moved["node"].tolist() == [2, 0]
    sts = result.subtasks
    sink = sts[sts["task"] == "sink#0"].iloc[0]
    assert (sink["taskmanager"], sink["local_input_channels"], sink["remote_input_channels"]) == (0, 1, 3)


def test_the_throughput_counts_what_the_sources_read_when_the_job_stops_before_its_input_ends(tiny, tmp_path):
    """Stopped with a savepoint after 100 ms (no drain), the job read part of its 12,000 records (300 ms of them at
    20,000 records/s per source): the throughput and each source's achieved rate count those records, up to its
    last one, not the whole workload (before: the 12,000 records over the run's time, and each split's 6,000 over
    its task's finish). A run that reads its input counts all of it."""
    more = {"workload.records": 12_000}
    stopped = barriersim.run(
        tiny, out=tmp_path / "stopped", overrides=more, actions=[{"type": "stop_with_savepoint", "at_ms": 100}]
    )
    throughput = stopped.only.summary["throughput"]
    read = [s["records"] for s in throughput["sources"]]
    assert all(0 < n < 6_000 for n in read), read
    seconds = stopped.only.summary["simulation"]["virtual_seconds"]
    assert throughput["records_per_second"] == pytest.approx(sum(read) / seconds, rel=1e-3)
    # paced at 20,000 records/s per source (less what its checkpoints every 10 ms hold it): the rate it read at,
    # not 6,000 records over its finish (over 50,000)
    assert all(s["reached"] and s["achieved_per_second"] <= 20_000 for s in throughput["sources"])
    full = barriersim.run(tiny, out=tmp_path / "full", overrides=more).only.summary["throughput"]
    assert [s["records"] for s in full["sources"]] == [6_000, 6_000]


def test_a_storage_fault_the_run_went_on_after_is_in_its_summary(tmp_path):
    """The simulator's summary names the storage faults the job went on after, as the Ray backend's does: here the
    found case whose late acknowledgement named a shared file the registry had released (dropped, as Flink's
    JobMaster logs it)."""
    from pathlib import Path

    case = (
        Path(__file__).resolve().parents[1]
        / "runtime"
        / "sim"
        / "cases"
        / "late-ack-of-subsumed-incremental-checkpoint.toml"
    )
    result = barriersim.run(case, out=tmp_path / "run").only
    errors = result.summary["simulation"]["storage_errors"]
    assert len(errors) == 1 and "checkpoint 5: the acknowledgement of keyed_sum#1 was dropped" in errors[0], errors
    assert json.loads((tmp_path / "run" / "summary.json").read_text())["simulation"]["storage_errors"] == errors
    plain = barriersim.run(write(tmp_path, TINY), out=tmp_path / "plain").only
    assert plain.summary["simulation"]["storage_errors"] == []


@pytest.mark.parametrize("value, refused", [("bogus", True), ("sockets", False), ("calls", False)])
def test_the_ray_links_setting_of_the_environment_is_checked_before_anything_starts(tiny, monkeypatch, value, refused):
    monkeypatch.setenv("BARRIERSIM_RAY_LINKS", value)
    if refused:
        with pytest.raises(barriersim.ArgumentError) as info:
            api.plan(tiny, backend="ray")
        assert str(info.value) == "BARRIERSIM_RAY_LINKS: must be sockets or calls, got 'bogus'"
    else:
        assert api.plan(tiny, backend="ray").backend is api.Backend.RAY
    api.plan(tiny, backend="sim")  # the simulator has no links: the setting is not its concern
