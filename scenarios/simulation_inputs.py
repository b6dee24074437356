"""From a scenario to what a job run needs: the job's settings and the workload splits per source.

How this works: ``job_config`` maps the (effective) scenario's job graph, checkpointing, network, storage, rate and fault
sections onto ``runtime.job.config.JobConfig`` (the same for the simulator and the Ray backend);
``workload_splits`` draws every source vertex's workload locally with the same per-record draws Spark uses
(``scenarios.workload.draw_columns``): source vertex ``k`` gets seed ``seed + k`` and record ids offset by
``k * 10**9`` so records of different sources never share an id.
"""

from __future__ import annotations

from barriersim.runtime.coordinator.properties import ExternalizedCheckpointRetention
from barriersim.runtime.coordinator.shared_state_registry import RecoveryClaimMode
from barriersim.runtime.job.config import JobConfig, SourceEmission
from barriersim.runtime.network.input.buffer_debloater import BufferDebloatConfiguration
from barriersim.runtime.job.restart_strategy import RestartStrategyKind
from barriersim.runtime.task.stream_task import NetworkConfig
from barriersim.scenarios.loader import Scenario
from barriersim.scenarios.workload import SOURCE_ID_STRIDE, local_splits


def job_config(scenario: Scenario) -> JobConfig:
    """The job's settings from the (effective) scenario: its mode, checkpointing, network, rate, faults, actions
    and restore."""
    cp, net, restart = scenario.checkpointing, scenario.network, scenario.restart
    return JobConfig(
        graph=scenario.job.graph,
        mode=cp.mode,
        interval_ms=cp.interval_ms,
        timeout_ms=cp.timeout_ms,
        aligned_checkpoint_timeout_ms=cp.aligned_checkpoint_timeout_ms,
        max_concurrent=cp.max_concurrent,
        min_pause_ms=cp.min_pause_ms,
        tolerable_failures=cp.tolerable_failures,
        max_retained=cp.max_retained,
        checkpoints_after_tasks_finish=cp.checkpoints_after_tasks_finish,
        memory_threshold_bytes=cp.memory_threshold_bytes,
        externalized_checkpoint_retention=ExternalizedCheckpointRetention(cp.externalized_checkpoint_retention),
        network=NetworkConfig(
            buffer_size=net.buffer_size,
            exclusive_buffers_per_channel=net.exclusive_buffers_per_channel,
            floating_buffers_per_gate=net.floating_buffers_per_gate,
            max_buffers_per_channel=net.max_buffers_per_channel,
            record_size=net.record_size,
            buffer_debloat=BufferDebloatConfiguration(
                enabled=net.buffer_debloat, target_ms=net.buffer_debloat_target_ms,
                period_ms=net.buffer_debloat_period_ms, samples=net.buffer_debloat_samples,
                threshold_percentages=net.buffer_debloat_threshold_percentages, min_buffer_size=net.min_buffer_size),
        ),
        latency_us_mean=net.latency_us_mean,
        buffer_timeout_ms=net.buffer_timeout_ms,
        latency_us_jitter=net.latency_us_jitter,
        source_rate_per_subtask=scenario.workload.rate_per_source,
        source_min_checkpoints=scenario.workload.min_checkpoints,
        source_emission=SourceEmission(scenario.workload.source_emission),
        faults=scenario.faults,
        actions=scenario.actions,
        restore=scenario.restore,
        cluster=scenario.cluster.config(),
        cpu_cores=scenario.cluster.cpu_cores,
        storage=scenario.storage,
        state=scenario.state,
        max_restarts=restart.attempts,
        restart_delay_ms=restart.delay_ms,
        restart=restart if restart.strategy is RestartStrategyKind.EXPONENTIAL_DELAY else None,
        claim_mode=RecoveryClaimMode(cp.recovery_claim_mode),
    )


def workload_splits(scenario: Scenario) -> dict[str, list[list[tuple]]]:
    """Every source vertex's splits, drawn locally from the scenario's workload and seed."""
    w, seed = scenario.workload, scenario.seed
    out = {}
    for k, source in enumerate(scenario.job.graph.sources):
        out[source.name] = local_splits(w.records, w.keys, w.zipf_exponent, w.max_value, source.parallelism,
                                        seed + k, w.rate_per_source, record_id_offset=k * SOURCE_ID_STRIDE,
                                        hot_key_share=w.hot_key_share, key_growth=w.key_growth)
    return out
