"""General job graphs, network, faults and sweeps in scenario files; random malformed files (Hypothesis)."""

import copy
import re
import tomllib
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from barriersim.runtime.faults.fault_schedule import CrashTask, ProtocolPoint
from barriersim.runtime.jobgraph import OperatorKind, Partitioner
from barriersim.scenarios.documents import dumps
from barriersim.scenarios.loader import ScenarioError, expand_sweep, load_scenario, parse_scenario

GRAPH_DOC = {
    "scenario": {"name": "two-input", "seed": 3},
    "workload": {"records": 1000},
    "network": {"latency_us_mean": 100.0, "buffer_size": 32768},
    "checkpointing": {"mode": "aligned-with-timeout", "interval_ms": 100, "aligned_checkpoint_timeout_ms": 500},
    "job": {
        "vertex": [
            {"name": "left", "operator": "source", "parallelism": 2},
            {"name": "right", "operator": "source", "parallelism": 1},
            {"name": "join", "operator": "join", "parallelism": 2, "hot_key": 0, "hot_key_extra_us": 50.0},
            {"name": "sink", "operator": "two_phase_commit_sink", "parallelism": 1},
        ],
        "edge": [
            {"from": "left", "to": "join", "partitioner": "hash", "input": 0},
            {"from": "right", "to": "join", "partitioner": "hash", "input": 1},
            {"from": "join", "to": "sink", "partitioner": "rebalance"},
        ],
    },
    "faults": [{"type": "crash_task", "task": "join#1", "point": "mid_alignment", "checkpoint_id": 2}],
    "sweep": {"workload.zipf_exponent": [0.0, 1.5], "network.latency_us_mean": [50, 500]},
}


def test_a_general_two_input_job_with_faults_and_a_sweep(tmp_path):
    p = tmp_path / "g.toml"
    p.write_text(dumps(GRAPH_DOC))
    s = load_scenario(p)
    g = s.job.graph
    assert not s.job.is_quickstart_shape
    assert [v.operator for v in g.vertices] == [
        OperatorKind.SOURCE,
        OperatorKind.SOURCE,
        OperatorKind.JOIN,
        OperatorKind.TWO_PHASE_COMMIT_SINK,
    ]
    assert g.vertex("join").params["hot_key_extra_us"] == 50.0 and g.gates_of("join")[1].source == "right"
    assert s.faults.faults == (CrashTask("join#1", point=ProtocolPoint.MID_ALIGNMENT, checkpoint_id=2),)
    assert s.network.buffer_size == 32 * 1024 and s.network.exclusive_buffers_per_channel == 2
    assert s.network.floating_buffers_per_gate == 8
    runs = expand_sweep(s)
    assert len(runs) == 4
    assert {(r.workload.zipf_exponent, r.network.latency_us_mean) for _, r in runs} == {
        (0.0, 50),
        (0.0, 500),
        (1.5, 50),
        (1.5, 500),
    }


def test_the_quickstart_shorthand_expands_into_its_graph():
    s = parse_scenario({"scenario": {"name": "q"}, "job": {"source_parallelism": 3}})
    assert s.job.is_quickstart_shape
    assert [e.partitioner for e in s.job.graph.edges] == [Partitioner.HASH, Partitioner.REBALANCE]
    assert s.job.graph.vertex("source").parallelism == 3


def mutated(path, value):
    doc = copy.deepcopy(GRAPH_DOC)
    target = doc
    for part in path[:-1]:
        target = target[part]
    if value is DELETE:
        del target[path[-1]]
    else:
        target[path[-1]] = value
    return doc


DELETE = object()

MALFORMED = [
    # parallelism 0
    (("job", "vertex", 2, "parallelism"), 0, "job.vertex[2].parallelism", "must be between 1 and 128"),
    # wrong types
    (("job", "vertex", 2, "parallelism"), "two", "job.vertex[2].parallelism", "must be an integer"),
    (("job", "vertex", 2, "hot_key_extra_us"), "slow", "job.vertex[2].hot_key_extra_us", "must be a number"),
    (("workload", "records"), 1.5, "workload.records", "must be an integer"),
    (("checkpointing", "interval_ms"), True, "checkpointing.interval_ms", "must be an integer"),
    (("job", "vertex", 2, "operator"), "reduce", "job.vertex[2].operator", "must be one of"),
    (("job", "edge", 0, "partitioner"), "random", "job.edge[0].partitioner", "must be one of"),
    # impossible topologies: a hash partition into an operator without a key, a keyed operator without a key,
    # a two-input operator fed on one input only, an edge to nowhere, a forward edge between parallelisms
    (("job", "edge", 2, "partitioner"), "hash", "job.edge[2]", "hash partitioning needs a keyed operator"),
    (("job", "edge", 0, "partitioner"), "rebalance", "job.edge[0]", "must be fed by a hash partitioner"),
    (("job", "edge", 1, "input"), 0, "job.vertex[2]", "takes input(s) [0, 1], fed [0]"),
    (("job", "edge", 0, "to"), "nowhere", "job.edge[0]", "no vertex named 'nowhere'"),
    (("job", "edge", 2, "partitioner"), "forward", "job.edge[2]", "forward"),
    # unknown and missing keys
    (("job", "vertex", 0, "speed"), 3, "job.vertex[0].speed", "unknown key"),
    (("network", "bandwidth"), 3, "network.bandwidth", "unknown key"),
    (("job", "vertex", 0, "name"), DELETE, "job.vertex[0].name", "is required"),
    (("checkpointing", "max_concurrent"), 2, "checkpointing.max_concurrent", "at most 1 concurrent"),
    (
        ("checkpointing", "aligned_checkpoint_timeout_ms"),
        0,
        "checkpointing.aligned_checkpoint_timeout_ms",
        "must be > 0",
    ),
    (
        ("sweep", "workload.zipf"),
        [1],
        "sweep.workload.zipf",
        "unknown key 'zipf' in [workload] (did you mean workload.zipf_exponent?); its keys: records",
    ),
    (("sweep", "workload.zipf_exponent"), [1.0, "high"], "sweep.workload.zipf_exponent", "must be a number"),
    (("faults", 0, "point"), "later", None, "faults[0].point: must be one of"),
    (("network", "buffer_size"), 10, "network.buffer_size", "must be between"),
]


@pytest.mark.parametrize("path, value, key, problem", MALFORMED)
def test_each_malformed_graph_file_names_its_key(tmp_path, path, value, key, problem):
    p = tmp_path / "bad.toml"
    p.write_text(dumps(mutated(path, value)))
    with pytest.raises(ScenarioError) as info:
        load_scenario(p)
    message = str(info.value)
    assert message.startswith(f"{p}: {key}: " if key else f"{p}: ")
    assert problem in message and "\n" not in message


def _leaf_paths(doc, prefix=()):
    if isinstance(doc, dict):
        for k, v in doc.items():
            yield from _leaf_paths(v, prefix + (k,))
    elif isinstance(doc, list) and doc and isinstance(doc[0], dict):
        for i, v in enumerate(doc):
            yield from _leaf_paths(v, prefix + (i,))
    else:
        yield prefix


LEAVES = [p for p in _leaf_paths(GRAPH_DOC) if p[0] != "sweep"]
BAD_VALUES = st.one_of(
    st.just(-1),
    st.just(0),
    st.just(10**15),
    st.just("nonsense"),
    st.just(True),
    st.just(0.5),
    st.just([1, 2]),
    st.text(max_size=5),
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(leaf=st.sampled_from(LEAVES), value=BAD_VALUES, rename=st.booleans())
def test_random_malformed_files_get_one_line_errors(tmp_path, leaf, value, rename):
    doc = copy.deepcopy(GRAPH_DOC)
    target = doc
    for part in leaf[:-1]:
        target = target[part]
    if rename and isinstance(leaf[-1], str):
        target[leaf[-1] + "_x"] = target.pop(leaf[-1])  # an unknown key
    else:
        target[leaf[-1]] = value
    p = tmp_path / "random.toml"
    p.write_text(dumps(doc))
    try:
        load_scenario(p)
    except ScenarioError as err:
        message = str(err)
        assert message.startswith(f"{p}: ") and "\n" not in message
        assert re.match(rf"{re.escape(str(p))}: [\w.\[\]]+: ", message), message
    # Some mutations are still valid (e.g. seed 0): then the file simply loads.


LIBRARY = sorted((Path(__file__).parents[2] / "scenarios").glob("*.toml"))


def _library_leaves():
    out = []
    for path in LIBRARY:
        doc = tomllib.loads(path.read_text())
        out += [(path.name, leaf) for leaf in _leaf_paths(doc) if leaf[0] != "sweep"]
    return out


LIBRARY_LEAVES = _library_leaves()


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(target=st.sampled_from(LIBRARY_LEAVES), value=BAD_VALUES, how=st.sampled_from(["replace", "rename", "delete"]))
def test_random_malformations_of_the_library_files_get_one_line_errors(tmp_path, target, value, how):
    """Every library file with one key given a bad value, renamed to an unknown key or removed: it either still
    loads (e.g. an optional key removed) or fails with one line naming the file and the key."""
    name, leaf = target
    doc = tomllib.loads((LIBRARY[0].parent / name).read_text())
    node = doc
    for part in leaf[:-1]:
        node = node[part]
    if how == "rename":
        node[f"{leaf[-1]}_x"] = node.pop(leaf[-1])
    elif how == "delete":
        del node[leaf[-1]]
    else:
        node[leaf[-1]] = value
    p = tmp_path / name
    p.write_text(dumps(doc))
    try:
        load_scenario(p)
    except ScenarioError as err:
        message = str(err)
        assert "\n" not in message
        assert re.match(rf"{re.escape(str(p))}: [\w.\[\]]+: \S", message), message
        if how == "rename":  # the renamed key is unknown, or the original one is now missing: either is named
            # (a key of a mapping by vertex name, e.g. a restore's parallelism, names a vertex the job lacks)
            assert (
                f"{leaf[-1]}_x: unknown" in message
                or f"{leaf[-1]}: is required" in message
                or f"{leaf[-1]}_x: the job has no vertex '{leaf[-1]}_x'" in message
            ), message


def test_an_edge_naming_a_vertex_with_a_newline_gets_a_one_line_error(tmp_path):
    """Found by the Hypothesis malformed-file test (job.edge[1].from = "\\n"): the edge was shown with the raw
    name, so the error spanned two lines."""
    text = (Path(__file__).parents[2] / "scenarios" / "window_join.toml").read_text()
    assert 'from = "right"' in text
    path = tmp_path / "newline.toml"
    path.write_text(text.replace('from = "right"', 'from = "\\n"', 1))
    with pytest.raises(ScenarioError) as err:
        load_scenario(path)
    assert "\n" not in str(err.value) and "job.edge[" in str(err.value)


@pytest.mark.parametrize("name", ["", " left", "a\nb", "a/b", "a#1"])
def test_a_vertex_name_that_cannot_show_in_one_line_is_refused(tmp_path, name):
    text = (Path(__file__).parents[2] / "scenarios" / "window_join.toml").read_text()
    path = tmp_path / "bad-name.toml"
    path.write_text(text.replace('name = "left"', f"name = {dumps({'x': name}).split('=', 1)[1].strip()}", 1))
    with pytest.raises(ScenarioError) as err:
        load_scenario(path)
    assert "\n" not in str(err.value) and "job.vertex[0].name: must be a non-empty printable name" in str(err.value)


def test_a_vertex_record_size_sizes_the_records_it_emits_and_only_those():
    """``[[job.vertex]] record_size``: the bytes of each record that vertex emits (its output type's size), so its
    output buffers fill with more of them; records of other vertices keep ``[network] record_size``."""
    from barriersim.runtime.sim.job_simulation import JobSimulation
    from barriersim.scenarios.simulation_inputs import job_config, workload_splits

    doc = {
        "scenario": {"name": "sizes", "seed": 5},
        "workload": {"records": 600, "keys": 10, "rate_per_source": 0},
        "network": {"record_size": 100, "buffer_size": 4000},
        "checkpointing": {"mode": "aligned", "interval_ms": 1000},
        "job": {
            "vertex": [
                {"name": "source", "operator": "source", "parallelism": 1},
                {"name": "sum", "operator": "keyed_sum", "parallelism": 1, "record_size": 20},
                {"name": "sink", "operator": "at_least_once_sink", "parallelism": 1},
            ],
            "edge": [
                {"from": "source", "to": "sum", "partitioner": "hash"},
                {"from": "sum", "to": "sink", "partitioner": "forward"},
            ],
        },
    }
    s = parse_scenario(doc)
    graph = s.job.graph
    assert graph.vertex("sum").params["record_size"] == 20 and "record_size" not in graph.vertex("source").params
    sim = JobSimulation(job_config(s), workload_splits(s), s.seed)
    sim.run()
    written = {f"{v}#{i}": sum(p.total_written_bytes for p in task.partitions) for (v, i), task in sim.tasks.items()}
    assert written["source#0"] == 600 * 100
    # its 600 records at 20 bytes, and the watermark its inputs' end gives it, a record-sized element
    assert written["sum#0"] == 600 * 20 + 20


@pytest.mark.parametrize("value", [-1, 1 << 21, "big"])
def test_a_vertex_record_size_out_of_range_is_named(value):
    doc = copy.deepcopy(GRAPH_DOC)
    doc["job"]["vertex"][2]["record_size"] = value
    with pytest.raises(ScenarioError, match=re.escape("job.vertex[2].record_size")):
        parse_scenario(doc)
