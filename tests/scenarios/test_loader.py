"""The scenario loader: every malformed file gets one ScenarioError naming the file and the key."""

import subprocess
import sys
from pathlib import Path

import pytest

from barriersim.runtime.checkpointing_mode import CheckpointingMode
from barriersim.scenarios.loader import ScenarioError, load_scenario

QUICKSTART = Path(__file__).parents[2] / "scenarios" / "quickstart.toml"


def write(tmp_path, text):
    p = tmp_path / "s.toml"
    p.write_text(text)
    return p


def test_quickstart_loads_with_its_values():
    s = load_scenario(QUICKSTART)
    assert s.name == "quickstart"
    assert (s.job.source_parallelism, s.job.keyed_sum_parallelism, s.job.sink_parallelism) == (2, 2, 1)
    assert s.checkpointing.mode is CheckpointingMode.ALIGNED
    assert s.workload.records >= 10_000


@pytest.mark.parametrize(
    "text, key, problem",
    [
        ('[scenario]\nname="x"\n[workload]\nrecordz=5\n', "workload.recordz", "unknown key"),
        ('[scenario]\nname="x"\n[extra]\na=1\n', "extra", "unknown section"),
        ('[scenario]\nname="x"\n[workload]\nrecords="many"\n', "workload.records", "must be an integer"),
        ('[scenario]\nname="x"\n[workload]\nrecords=true\n', "workload.records", "must be an integer"),
        ('[scenario]\nname="x"\n[workload]\nrecords=0\n', "workload.records", "must be between 1 and 100000000, got 0"),
        ('[scenario]\nname="x"\n[job]\nsource_parallelism=0\n', "job.source_parallelism", "must be between"),
        ('[scenario]\nname="x"\n[checkpointing]\nmode="sometimes"\n', "checkpointing.mode", "must be one of"),
        ('[scenario]\nname="x"\n[workload]\nzipf_exponent=-1\n', "workload.zipf_exponent", "must be between"),
        ("[workload]\nrecords=5\n", "scenario.name", "is required"),
        ('workload=3\n[scenario]\nname="x"\n', "workload", "must be a table"),
        ('[scenario]\nname="x"\n[storage]\nasync_fixed_ms=-2\n', "storage.async_fixed_ms", "must be between"),
        ('[scenario]\nname="x"\n[storage]\nupload_mib_per_s=0\n', "storage.upload_mib_per_s", "must be between"),
        ('[scenario]\nname="x"\n[storage]\nlatency=1\n', "storage.latency", "unknown key"),
        ('[scenario]\nname="x"\n[restart]\nstrategy="forever"\n', "restart.strategy", "must be one of"),
        ('[scenario]\nname="x"\n[workload]\nsource_emission="smooth"\n', "workload.source_emission", "must be one of"),
        (
            '[scenario]\nname="x"\n[workload]\nsource_emission="exact"\n',
            "workload.source_emission",
            "paces records by workload.rate_per_source, which is 0",
        ),
        (
            '[scenario]\nname="x"\n[restart]\nbackoff_multiplier=1\n',
            "restart.backoff_multiplier",
            "must be greater than 1",
        ),
        (
            '[scenario]\nname="x"\n[restart]\nstrategy="exponential-delay"\ninitial_backoff_ms=5000\nmax_backoff_ms=2000\n',
            "restart",
            "initial_backoff_ms cannot be higher than max_backoff_ms",
        ),
    ],
)
def test_malformed_scenarios_name_file_and_key(tmp_path, text, key, problem):
    p = write(tmp_path, text)
    with pytest.raises(ScenarioError) as info:
        load_scenario(p)
    message = str(info.value)
    assert message.startswith(f"{p}: {key}: ")
    assert problem in message
    assert "\n" not in message


def test_missing_file_and_invalid_toml(tmp_path):
    with pytest.raises(ScenarioError, match="no such scenario file"):
        load_scenario(tmp_path / "nope.toml")
    with pytest.raises(ScenarioError, match="not valid TOML"):
        load_scenario(write(tmp_path, "[scenario\nname="))


def test_integers_are_accepted_where_numbers_are_expected(tmp_path):
    s = load_scenario(write(tmp_path, '[scenario]\nname="x"\n[workload]\nzipf_exponent=1\n'))
    assert s.workload.zipf_exponent == 1.0 and isinstance(s.workload.zipf_exponent, float)


@pytest.mark.parametrize(
    "args, expected",
    [
        (["run", "does-not-exist.toml"], "does-not-exist.toml: no such scenario file"),
        (["run", "{bad}"], "{bad}: workload.records: must be between 1 and 100000000, got -3"),
    ],
)
def test_cli_reports_bad_scenarios_in_one_line_with_exit_2(tmp_path, args, expected):
    bad = write(tmp_path, '[scenario]\nname="x"\n[workload]\nrecords=-3\n')
    args = [str(bad) if a == "{bad}" else a for a in args]
    expected = expected.replace("{bad}", str(bad))
    proc = subprocess.run(
        [sys.executable, "-m", "barriersim.cli", *args], capture_output=True, text=True, cwd=tmp_path, timeout=120
    )
    assert proc.returncode == 2
    assert proc.stderr.strip() == f"barriersim: {expected}"
    assert "Traceback" not in proc.stderr


def test_cli_rejects_a_negative_seed_with_exit_2(tmp_path):
    proc = subprocess.run(
        [sys.executable, "-m", "barriersim.cli", "run", str(QUICKSTART), "--seed", "-1"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 2
    assert "--seed" in proc.stderr and "Traceback" not in proc.stderr


def test_storage_costs_default_to_the_calibrated_model_and_take_the_file_s_figures(tmp_path):
    from barriersim.runtime.checkpoint_cost import CheckpointCostModel
    from barriersim.scenarios.documents import scenario_document
    from barriersim.scenarios.loader import parse_scenario

    assert load_scenario(QUICKSTART).storage == CheckpointCostModel()
    s = load_scenario(write(tmp_path, '[scenario]\nname="x"\n[storage]\nasync_fixed_ms=2\nemulate_remote_store=true\n'))
    assert s.storage.async_fixed_ms == 2.0 and s.storage.emulate_remote_store
    assert parse_scenario(scenario_document(s), s.path) == s  # written out in a run's scenario.toml, read back


def test_a_restart_section_reaches_the_job_and_round_trips(tmp_path):
    """``[restart]`` is the job's restart strategy (``JobConfig.restart``: the scenario's section object, whichever
    strategy), and the run directory's scenario document reads back the same."""
    from barriersim.runtime.job.restart_strategy import RestartStrategyKind
    from barriersim.scenarios.documents import scenario_document
    from barriersim.scenarios.loader import parse_scenario
    from barriersim.scenarios.simulation_inputs import job_config

    fixed = load_scenario(write(tmp_path, '[scenario]\nname="x"\n[restart]\nattempts=3\ndelay_ms=250\n'))
    assert job_config(fixed).restart is fixed.restart
    assert (fixed.restart.strategy, fixed.restart.attempts, fixed.restart.delay_ms) == (
        RestartStrategyKind.FIXED_DELAY,
        3,
        250,
    )
    s = load_scenario(
        write(
            tmp_path,
            '[scenario]\nname="x"\n[restart]\nstrategy="exponential-delay"\n'
            "initial_backoff_ms=200\njitter_factor=0.0\n",
        )
    )
    config = job_config(s).restart
    assert config.strategy is RestartStrategyKind.EXPONENTIAL_DELAY
    assert (config.initial_backoff_ms, config.jitter_factor, config.max_backoff_ms) == (200, 0.0, 60_000)
    assert parse_scenario(scenario_document(s), s.path) == s
    # settings from outside the file meet the same rules, one line naming the section
    from barriersim.scenarios.loader import apply_settings

    with pytest.raises(ScenarioError, match=r"restart: initial_backoff_ms cannot be higher than max_backoff_ms \(with"):
        apply_settings(s, {"restart.max_backoff_ms": 100}, "overrides")
