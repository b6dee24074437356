"""The backend and the workload generator are typed values read from their names in one place: the API and the
command line take the names (or the members), anything else is one line naming the argument and the choices."""

import pytest

from barriersim.backends import BACKENDS, WORKLOADS, Backend, WorkloadGenerator, ran_on
from barriersim.errors import ArgumentError


def test_names_and_members_parse_to_the_members():
    assert [Backend.parse(name) for name in BACKENDS] == [Backend.SIM, Backend.RAY]
    assert [WorkloadGenerator.parse(name) for name in WORKLOADS] == [WorkloadGenerator.LOCAL, WorkloadGenerator.SPARK]
    assert Backend.parse(Backend.RAY) is Backend.RAY and str(Backend.RAY) == "ray"


@pytest.mark.parametrize(
    "parse, where, text, message",
    [
        (Backend.parse, None, "spark", "backend: must be one of sim, ray, got 'spark'"),
        (WorkloadGenerator.parse, None, "ray", "workload: must be one of local, spark, got 'ray'"),
        (Backend.parse, "--backend", None, "--backend: must be one of sim, ray, got None"),
    ],
)
def test_an_unknown_name_is_one_line_naming_the_argument_and_the_choices(parse, where, text, message):
    with pytest.raises(ArgumentError) as info:
        parse(text) if where is None else parse(text, where)
    assert str(info.value) == message


def test_the_ray_backend_generates_its_workload_in_spark_and_the_simulator_locally():
    assert Backend.RAY.default_workload is WorkloadGenerator.SPARK
    assert Backend.SIM.default_workload is WorkloadGenerator.LOCAL


def test_a_summary_says_which_backend_ran_it():
    assert ran_on({"backend": "sim"}) is Backend.SIM and ran_on({"backend": "ray"}) is Backend.RAY
    assert ran_on({}) is None and ran_on({"backend": "flink"}) is None
