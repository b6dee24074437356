"""A deque whose priority elements stay ahead of all other elements, in arrival order among themselves.

How this works: two plain deques, one for priority elements and one for the rest; ``poll`` takes from the
priority one first. ``prioritize`` moves an already queued element to the end of the priority section
(Flink converts an announced aligned barrier into a priority event this way). Iteration yields priority
elements first, as ``peek``/``poll`` would.

Mirrors Flink's ``PrioritizedDeque`` (``add(element, priority, prioritize)``, ``getNumPriorityElements``,
``getAndRemove``).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterator
from typing import Generic, TypeVar

T = TypeVar("T")


class PrioritizedDeque(Generic[T]):
    def __init__(self) -> None:
        self._priority: deque[T] = deque()
        self._normal: deque[T] = deque()
        self.priority_section = self._priority  # read-only outside: tested for emptiness without a call
        self.sections = (self._priority, self._normal)  # (read-only outside, as ``priority_section``)

    def add(self, element: T, priority: bool = False) -> None:
        (self._priority if priority else self._normal).append(element)

    def add_priority_element(self, element: T) -> None:
        self._priority.append(element)

    def poll(self) -> T | None:
        if self._priority:
            return self._priority.popleft()
        return self._normal.popleft() if self._normal else None

    def peek(self) -> T | None:
        if self._priority:
            return self._priority[0]
        if self._normal:
            return self._normal[0]
        return None

    def get_and_remove(self, predicate: Callable[[T], bool]) -> T | None:
        """Remove and return the first element (priority section included) matching ``predicate``."""
        for section in (self._priority, self._normal):
            for i, element in enumerate(section):
                if predicate(element):
                    del section[i]
                    return element
        return None

    def prioritize(self, predicate: Callable[[T], bool]) -> T | None:
        """Move the first non-priority element matching ``predicate`` to the end of the priority section."""
        for i, element in enumerate(self._normal):
            if predicate(element):
                del self._normal[i]
                self._priority.append(element)
                return element
        return None

    @property
    def num_priority_elements(self) -> int:
        return len(self._priority)

    def has_priority_element(self) -> bool:
        return bool(self._priority)

    def clear(self) -> None:
        self._priority.clear()
        self._normal.clear()

    def __len__(self) -> int:
        return len(self._priority) + len(self._normal)

    def __bool__(self) -> bool:
        return bool(self._priority) or bool(self._normal)

    def __iter__(self) -> Iterator[T]:
        yield from self._priority
        yield from self._normal

    def iter_non_priority(self) -> Iterator[T]:
        yield from self._normal

    def iter_priority(self) -> Iterator[T]:
        yield from self._priority
