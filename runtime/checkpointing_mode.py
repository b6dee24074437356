"""The checkpointing mode of a job: one typed value, its derived settings, and the one rule on combinations.

Mirrors the checks of Flink's ``CheckpointConfig`` / ``StreamingJobGraphGenerator``. See
docs/jobs-and-operators.md, "Checkpointing modes".
"""

from __future__ import annotations

import enum


class CheckpointingModeError(ValueError):
    """A text that names no checkpointing mode; ``str()`` names where it came from and the choices."""


class CheckpointingMode(enum.Enum):
    ALIGNED = "aligned"
    UNALIGNED = "unaligned"
    ALIGNED_WITH_TIMEOUT = "aligned-with-timeout"  # Flink's "alternating" barrier handler
    AT_LEAST_ONCE = "at-least-once"

    @classmethod
    def parse(cls, text: object, where: str = "mode") -> CheckpointingMode:
        """The mode ``text`` names (a mode value passes through); ``CheckpointingModeError`` naming ``where``."""
        if isinstance(text, cls):
            return text
        try:
            return cls(text)
        except ValueError:
            raise CheckpointingModeError(f"{where}: must be one of {', '.join(ALL_MODES)}, got {text!r}") from None

    @property
    def exactly_once(self) -> bool:
        return self is not CheckpointingMode.AT_LEAST_ONCE

    @property
    def unaligned_enabled(self) -> bool:
        """Flink's ``execution.checkpointing.unaligned.enabled`` for this mode."""
        return self in (CheckpointingMode.UNALIGNED, CheckpointingMode.ALIGNED_WITH_TIMEOUT)

    @property
    def uses_alignment_timeout(self) -> bool:
        """Checkpoints start aligned and switch to unaligned after the aligned-checkpoint timeout."""
        return self is CheckpointingMode.ALIGNED_WITH_TIMEOUT

    @property
    def max_concurrent_allowed(self) -> int | None:
        """The most concurrent checkpoints the mode allows (None: no limit of its own)."""
        return 1 if self.unaligned_enabled else None

    def alignment_timeout_ms(self, configured_ms: int) -> int:
        """The alignment timeout in effect: the configured one in aligned-with-timeout mode, else 0 (none)."""
        return configured_ms if self.uses_alignment_timeout else 0

    def __str__(self) -> str:
        return self.value


ALL_MODES: tuple[str, ...] = tuple(m.value for m in CheckpointingMode)
SIDE_BY_SIDE_MODES: tuple[CheckpointingMode, ...] = (
    CheckpointingMode.ALIGNED,
    CheckpointingMode.UNALIGNED,
    CheckpointingMode.AT_LEAST_ONCE,
)


def checkpointing_problem(
    mode: CheckpointingMode, max_concurrent: int, aligned_checkpoint_timeout_ms: int
) -> tuple[str, str] | None:
    """``(key, problem)`` if the mode cannot run with these settings, else None. Keys are the scenario file's
    (``checkpointing.max_concurrent``, ``checkpointing.aligned_checkpoint_timeout_ms``)."""
    allowed = mode.max_concurrent_allowed
    if allowed is not None and max_concurrent > allowed:
        return (
            "checkpointing.max_concurrent",
            f"{mode.value} mode allows at most {allowed} concurrent checkpoint (as in Flink), got {max_concurrent}",
        )
    if mode.uses_alignment_timeout and aligned_checkpoint_timeout_ms <= 0:
        return (
            "checkpointing.aligned_checkpoint_timeout_ms",
            f"must be > 0 in {mode.value} mode, got {aligned_checkpoint_timeout_ms}",
        )
    if not mode.uses_alignment_timeout and aligned_checkpoint_timeout_ms > 0:
        return (
            "checkpointing.aligned_checkpoint_timeout_ms",
            f'applies only to mode "{CheckpointingMode.ALIGNED_WITH_TIMEOUT.value}" (mode is {mode.value})',
        )
    return None
