"""Receiver-side buffers and credits of credit-based flow control: a remote channel's exclusive buffers, the gate's
floating buffers, and the credit announced to the sender.

Mirrors Flink's ``BufferManager`` (with ``AvailableBufferQueue``), the gate's ``LocalBufferPool`` for floating
buffers and ``BufferListener``. See docs/data-plane.md, "Receiver-side buffers and credit".
"""

from __future__ import annotations

import enum
from collections import deque

DEFAULT_EXCLUSIVE_BUFFERS_PER_CHANNEL = 2
DEFAULT_FLOATING_BUFFERS_PER_GATE = 8


class CreditViolationError(Exception):
    """A data buffer arrived on a channel that had no available buffer (no credit)."""


class BufferOrigin(enum.Enum):
    EXCLUSIVE = "EXCLUSIVE"
    FLOATING = "FLOATING"


class FloatingBufferPool:
    """The gate's pool of floating buffers (Flink's ``LocalBufferPool`` with ``BufferListener``s)."""

    def __init__(self, size: int = DEFAULT_FLOATING_BUFFERS_PER_GATE) -> None:
        if size < 0:
            raise ValueError(f"floating pool size must be >= 0, got {size}")
        self.size = size
        self._available = size
        self._listeners: deque[BufferManager] = deque()

    @property
    def num_available(self) -> int:
        return self._available

    def request_buffer(self) -> bool:
        if self._available > 0:
            self._available -= 1
            return True
        return False

    def add_buffer_listener(self, listener: BufferManager) -> None:
        if listener not in self._listeners:
            self._listeners.append(listener)

    def remove_buffer_listener(self, listener: BufferManager) -> None:
        if listener in self._listeners:
            self._listeners.remove(listener)

    def recycle(self) -> None:
        """A floating buffer comes back: offer it to waiting channels in order, else keep it."""
        while self._listeners:
            listener = self._listeners.popleft()
            if listener.notify_buffer_available():
                return
        self._available += 1
        if self._available > self.size:
            raise AssertionError(f"floating pool over-recycled: {self._available} > {self.size}")


class BufferManager:
    """Buffers and credit of one remote input channel."""

    def __init__(self, pool: FloatingBufferPool, exclusive: int = DEFAULT_EXCLUSIVE_BUFFERS_PER_CHANNEL) -> None:
        if exclusive < 0:
            raise ValueError(f"exclusive buffers must be >= 0, got {exclusive}")
        self._pool = pool
        self.initial_credit = exclusive
        self._available_exclusive = exclusive
        self._available_floating = 0
        self._in_use_floating = 0
        self._num_required = exclusive
        self._waiting_for_floating = False
        self.blocked = False
        self.unannounced_credit = 0
        self.announced_credit_total = 0
        self.received_buffers_total = 0

    # -- views ---------------------------------------------------------------------------------------

    @property
    def num_available_buffers(self) -> int:
        return self._available_exclusive + self._available_floating

    @property
    def num_floating_held(self) -> int:
        return self._available_floating + self._in_use_floating

    @property
    def sender_credit(self) -> int:
        """Credit the sender holds now: announced minus data buffers received (never negative)."""
        return self.announced_credit_total - self.received_buffers_total

    @property
    def is_waiting_for_floating_buffers(self) -> bool:
        return self._waiting_for_floating

    # -- receiving -----------------------------------------------------------------------------------

    def take_buffer(self) -> BufferOrigin:
        """A data buffer arrived: occupy one available buffer."""
        if (
            self.announced_credit_total <= self.received_buffers_total  # ``sender_credit``, inline
            or self._available_exclusive + self._available_floating <= 0  # ``num_available_buffers``
        ):
            raise CreditViolationError(
                f"data buffer received without credit (available={self.num_available_buffers}, "
                f"sender credit={self.sender_credit})"
            )
        self.received_buffers_total += 1
        if self._available_floating > 0:
            self._available_floating -= 1
            self._in_use_floating += 1
            return BufferOrigin.FLOATING
        self._available_exclusive -= 1
        return BufferOrigin.EXCLUSIVE

    @property
    def sender_backlog(self) -> int:
        """The sender's last announced backlog (Flink's ``getNumberOfRequiredBuffers() - initialCredit``)."""
        return max(0, self._num_required - self.initial_credit)

    def on_sender_backlog(self, backlog: int) -> None:
        """Flink's ``onSenderBacklog``: want ``backlog + initial_credit`` available buffers."""
        self._num_required = backlog + self.initial_credit
        if not self.blocked:
            self._try_request_buffers()

    def _try_request_buffers(self) -> None:
        while (
            self._available_exclusive + self._available_floating < self._num_required and not self._waiting_for_floating
        ):
            if self._pool.request_buffer():
                self._available_floating += 1
                self.unannounced_credit += 1
            else:
                self._pool.add_buffer_listener(self)
                self._waiting_for_floating = True

    def notify_buffer_available(self) -> bool:
        """The pool offers a floating buffer; True if taken (Flink's ``BufferListener``)."""
        if self.blocked or self.num_available_buffers >= self._num_required:
            self._waiting_for_floating = False
            return False
        self._available_floating += 1
        self.unannounced_credit += 1
        if self.num_available_buffers >= self._num_required:
            self._waiting_for_floating = False
        else:
            self._pool.add_buffer_listener(self)
        return True

    # -- consuming -----------------------------------------------------------------------------------

    def recycle(self, origin: BufferOrigin) -> None:
        """The task consumed a buffer that held data of this channel."""
        if origin is BufferOrigin.FLOATING:
            self._in_use_floating -= 1
            self._pool.recycle()
            return
        self._available_exclusive += 1
        if self.num_available_buffers > self._num_required and self._available_floating > 0:
            # the channel holds more than it needs: give a floating buffer back instead of new credit
            self._available_floating -= 1
            self._pool.recycle()
        else:
            self.unannounced_credit += 1

    def set_blocked(self, blocked: bool) -> None:
        self.blocked = blocked
        if not blocked:
            self._try_request_buffers()
        else:
            self._pool.remove_buffer_listener(self)
            self._waiting_for_floating = False

    def take_unannounced_credit(self) -> int:
        credit, self.unannounced_credit = self.unannounced_credit, 0
        self.announced_credit_total += credit
        return credit

    def release(self) -> None:
        """The channel finished: floating buffers it holds go back to the pool."""
        self._pool.remove_buffer_listener(self)
        self._waiting_for_floating = False
        while self._available_floating > 0:
            self._available_floating -= 1
            self._pool.recycle()
        self._num_required = 0
