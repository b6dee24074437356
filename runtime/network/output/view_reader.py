"""The sender's side of credit-based flow control for one subpartition: the credit its receiver announced.

How this works: the receiver announces credit (one per free buffer it holds) with ``add_credit``. The
reader hands out the subpartition's next element only when it can be sent: an event always, a data buffer
only while credit is left, and each data buffer sent takes one credit. So credit never goes negative and
no data buffer is sent without credit; a subpartition without credit keeps its data queued, which is what
makes the producer see backpressure.

Mirrors Flink's ``CreditBasedSequenceNumberingViewReader`` (``addCredit``, ``getNextBuffer``,
``isAvailable``, ``resumeConsumption``) over a ``PipelinedSubpartitionView``."""

from __future__ import annotations

from barriersim.runtime.events import Buffer
from barriersim.runtime.network.output.subpartition import BufferAndBacklog, PipelinedSubpartition


class CreditError(ValueError):
    """A credit announcement that is not a positive number of buffers."""


class CreditBasedSequenceNumberingViewReader:
    def __init__(self, subpartition: PipelinedSubpartition, initial_credit: int = 0) -> None:
        if initial_credit < 0:
            raise CreditError(f"initial credit of {subpartition.info} must not be negative, got {initial_credit}")
        self.subpartition = subpartition
        self._num_credits_available = initial_credit

    @property
    def num_credits_available(self) -> int:
        return self._num_credits_available

    def add_credit(self, credit_deltas: int) -> None:
        if credit_deltas <= 0:
            raise CreditError(f"add_credit({credit_deltas}) on {self.subpartition.info}: credit must be positive")
        self._num_credits_available += credit_deltas

    def is_available(self) -> bool:
        return self.subpartition.is_available(self._num_credits_available)

    def get_next_buffer(self) -> BufferAndBacklog | None:
        next_ = self.subpartition.poll_buffer(self._num_credits_available)
        if next_ is not None and type(next_.element) is Buffer:  # ``is_buffer`` (a ``Buffer`` is never subclassed)
            self._num_credits_available -= 1
            if self._num_credits_available < 0:  # poll_buffer never hands out data without credit
                raise AssertionError(f"{self.subpartition.info}: sent a data buffer without credit")
        return next_

    def resume_consumption(self) -> None:
        self.subpartition.resume_consumption()
