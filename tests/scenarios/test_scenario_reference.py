"""The scenario schema is the runtime's section classes: every field of each is a key with a description, the
schema's defaults are the classes' defaults, a scenario's sections are the very objects a job runs with, and the
generated reference lists every key."""

from __future__ import annotations

import dataclasses

import pytest

from barriersim.runtime.job.config import JobConfig
from barriersim.runtime.settings import settings_of, undeclared_fields
from barriersim.scenarios.loader import ScenarioError, apply_settings, load_scenario, parse_scenario
from barriersim.scenarios.schema import EDGE_FIELDS, SCHEMA, SECTIONS, VERTEX_FIELDS, reference_markdown
from barriersim.scenarios.simulation_inputs import job_config
from tests.scenarios.test_library import SCENARIOS

TABLES = {**SCHEMA, "job.vertex": VERTEX_FIELDS, "job.edge": EDGE_FIELDS}


@pytest.mark.parametrize("table", TABLES)
def test_every_key_has_a_one_line_description(table):
    for key, field in TABLES[table].items():
        assert field.description.strip() and "\n" not in field.description, f"{table}.{key}"


@pytest.mark.parametrize("name", SECTIONS)
def test_each_section_is_its_runtime_class_field_by_field(name):
    cls = SECTIONS[name].cls
    assert undeclared_fields(cls) == []  # no field of the class the file cannot set
    assert list(SCHEMA[name]) == [f.name for f in dataclasses.fields(cls)]
    defaults = {key: field.default for key, field in SCHEMA[name].items()}
    assert SECTIONS[name].plain(cls()) == defaults  # the file's defaults are the class's
    assert SECTIONS[name].build(defaults) == cls()
    for setting in settings_of(cls):  # and each default passes its own check
        assert SCHEMA[name][setting.name].problem(SECTIONS[name].fields[setting.name].plain(setting.default)) is None


@pytest.mark.parametrize("name", SECTIONS)
def test_a_scenarios_sections_are_the_objects_its_job_runs_with(name):
    scenario = parse_scenario({"scenario": {"name": "s"}})
    assert getattr(job_config(scenario), name) is getattr(scenario, name)
    assert type(getattr(scenario, name)) is SECTIONS[name].cls
    assert {f.name for f in dataclasses.fields(JobConfig)} >= {name}


def test_an_enum_setting_is_read_from_its_name_and_written_back_as_it():
    scenario = load_scenario(SCENARIOS / "quickstart.toml")
    changed = apply_settings(
        scenario,
        {
            "checkpointing.recovery_claim_mode": "claim",
            "workload.source_emission": "exact",
            "state.backend": "incremental",
        },
        "test",
    )
    assert changed.checkpointing.recovery_claim_mode.value == "claim"
    assert changed.workload.source_emission.value == "exact" and changed.state.backend.value == "incremental"
    assert SECTIONS["checkpointing"].plain(changed.checkpointing)["recovery_claim_mode"] == "claim"


def test_the_reference_lists_every_table_and_key_with_its_type_default_and_values():
    text = reference_markdown()
    for table, fields in TABLES.items():
        title = f"## `[[{table}]]`" if table.startswith("job.") else f"## `[{table}]`"
        assert title in text
        for key, field in fields.items():
            row = next(
                line
                for line in text.splitlines()
                if line.startswith(f"| `{key}` |") and field.description.replace("|", "\\|").replace("``", "`") in line
            )
            assert {int: "integer", float: "number", str: "string", bool: "boolean"}[field.kind] in row
    assert '| `mode` | string | `"aligned"` | `aligned`, `unaligned`, `aligned-with-timeout`, `at-least-once` |' in text
    assert "| `interval_ms` | integer | `1000` | >= 10 |" in text
    assert "| `name` | string | required |" in text


def test_the_rules_across_a_sections_keys_hold_for_settings_from_outside_the_file_too():
    unpaced = parse_scenario({"scenario": {"name": "s"}, "workload": {"rate_per_source": 0}})
    with pytest.raises(ScenarioError) as info:
        apply_settings(unpaced, {"workload.source_emission": "exact"}, "overrides")
    assert str(info.value).startswith(
        '<scenario>: workload.source_emission: "exact" paces records by workload.rate_per_source, which is 0'
    ) and "(with overrides" in str(info.value)
