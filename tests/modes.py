"""The checkpointing modes as the tests run library scenarios in them: the library's files set no alignment timeout,
so aligned-with-timeout runs them with 500 ms (Flink's measured job used 500 ms)."""

from barriersim.runtime.checkpointing_mode import ALL_MODES, CheckpointingMode
from barriersim.scenarios.loader import Scenario, apply_settings

TEST_ALIGNMENT_TIMEOUT_MS = 500


def in_test_mode(scenario: Scenario, mode: str | CheckpointingMode) -> Scenario:
    mode = CheckpointingMode.parse(mode)
    settings = {"checkpointing.mode": mode.value}
    if mode.uses_alignment_timeout and scenario.checkpointing.aligned_checkpoint_timeout_ms <= 0:
        settings["checkpointing.aligned_checkpoint_timeout_ms"] = TEST_ALIGNMENT_TIMEOUT_MS
    return apply_settings(scenario, settings, "test")


__all__ = ["ALL_MODES", "TEST_ALIGNMENT_TIMEOUT_MS", "in_test_mode"]
