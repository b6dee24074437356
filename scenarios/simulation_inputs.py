"""From a scenario to what a job run needs: the job's settings and the workload splits per source.

How this works: ``job_config`` hands the (effective) scenario's job graph and section objects to
``runtime.job.config.JobConfig`` as they are (the same for the simulator and the Ray backend);
``workload_splits`` draws every source vertex's workload locally with the same per-record draws Spark uses
(``scenarios.workload.draw_columns``): source vertex ``k`` gets seed ``seed + k`` and record ids offset by
``k * 10**9`` so records of different sources never share an id.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from barriersim.runtime.job.config import JobConfig
from barriersim.scenarios.loader import Scenario
from barriersim.scenarios.workload import SOURCE_ID_STRIDE, local_splits

if TYPE_CHECKING:
    from barriersim.runtime.record_batch import RecordBatch


def job_config(scenario: Scenario) -> JobConfig:
    """The job's settings from the (effective) scenario: its graph, sections, faults, actions and restore."""
    return JobConfig(
        graph=scenario.job.graph,
        checkpointing=scenario.checkpointing,
        network=scenario.network,
        workload=scenario.workload,
        cluster=scenario.cluster,
        storage=scenario.storage,
        state=scenario.state,
        restart=scenario.restart,
        faults=scenario.faults,
        actions=scenario.actions,
        restore=scenario.restore,
    )


def workload_splits(scenario: Scenario) -> dict[str, list[RecordBatch]]:
    """Every source vertex's splits, drawn locally from the scenario's workload and seed."""
    w, seed = scenario.workload, scenario.seed
    out = {}
    for k, source in enumerate(scenario.job.graph.sources):
        out[source.name] = local_splits(
            w.records,
            w.keys,
            w.zipf_exponent,
            w.max_value,
            source.parallelism,
            seed + k,
            w.rate_per_source,
            record_id_offset=k * SOURCE_ID_STRIDE,
            hot_key_share=w.hot_key_share,
            key_growth=w.key_growth,
        )
    return out
