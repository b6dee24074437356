"""Which old subtasks (or channels) a new subtask (or channel) takes over when a vertex is rescaled.

How this works: ``RescaleMappings`` maps each *source* index (usually a new subtask or channel) to the *target*
indexes (usually old ones) it takes in-flight data from; ``invert()`` turns the direction around (old -> new),
and ``ambiguous_targets()`` lists the targets that more than one source takes (data that the receiving side must
filter). A mapping that maps every index to itself is an identity mapping (trailing sources without targets
allowed), and all identity mappings are equal. The mappings are computed by the partitioners' subtask state
mappers (``runtime.recovery.subtask_state_mapper``) and carried in the in-flight data rescaling descriptors
(``runtime.state.inflight_data_rescaling``). Mirrors Flink's ``RescaleMappings``.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

_EMPTY: tuple[int, ...] = ()


class RescaleMappings:
    """Flink's ``RescaleMappings``: ``mappings[source]`` are the targets of ``source`` (trailing sources without
    targets are omitted); ``number_of_sources`` and ``number_of_targets`` are the sizes of both sides."""

    __slots__ = ("number_of_sources", "mappings", "number_of_targets", "_identity")

    def __init__(
        self, number_of_sources: int, mappings: Sequence[Sequence[int]], number_of_targets: int, identity: bool = False
    ) -> None:
        self.number_of_sources = number_of_sources
        self.mappings = tuple(tuple(t) for t in mappings)
        self.number_of_targets = number_of_targets
        self._identity = identity

    @staticmethod
    def identity(number_of_sources: int, number_of_targets: int) -> RescaleMappings:
        return RescaleMappings(number_of_sources, (), number_of_targets, identity=True)

    @staticmethod
    def of(mapped_targets: Iterable[Sequence[int]], number_of_targets: int) -> RescaleMappings:
        """Flink's ``RescaleMappings.of``: an identity mapping if it is one, else the mappings without trailing
        empty ones."""
        mappings = [tuple(t) for t in mapped_targets]
        if _is_identity(mappings, number_of_targets):
            return RescaleMappings.identity(len(mappings), number_of_targets)
        last = len(mappings)
        while last > 0 and not mappings[last - 1]:
            last -= 1
        return RescaleMappings(len(mappings), mappings[:last], number_of_targets)

    @property
    def is_identity(self) -> bool:
        return self._identity

    def get_mapped_indexes(self, source_index: int) -> tuple[int, ...]:
        if self._identity:
            return (source_index,) if source_index < self.number_of_targets else _EMPTY
        if source_index >= len(self.mappings):
            return _EMPTY
        return self.mappings[source_index]

    def invert(self) -> RescaleMappings:
        """The same mapping from the targets' side: target -> the sources that map to it, sorted."""
        if self._identity:
            return RescaleMappings.identity(self.number_of_targets, self.number_of_sources)
        inverted: list[list[int]] = [[] for _ in range(self.number_of_targets)]
        for source, targets in enumerate(self.mappings):
            for target in targets:
                inverted[target].append(source)
        return RescaleMappings.of((sorted(s) for s in inverted), self.number_of_sources)

    def ambiguous_targets(self) -> frozenset[int]:
        """The targets that more than one source maps to."""
        if self._identity:
            return frozenset()
        seen: set[int] = set()
        ambiguous: set[int] = set()
        for targets in self.mappings:
            for target in targets:
                (ambiguous if target in seen else seen).add(target)
        return frozenset(ambiguous)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, RescaleMappings):
            return NotImplemented
        if self._identity or other._identity:
            return self._identity and other._identity
        return self.mappings == other.mappings

    def __hash__(self) -> int:
        return hash(("identity",) if self._identity else self.mappings)

    def __repr__(self) -> str:
        if self._identity:
            return f"RescaleMappings.identity({self.number_of_sources}, {self.number_of_targets})"
        return f"RescaleMappings({[list(t) for t in self.mappings]})"


def _is_identity(mappings: list[tuple[int, ...]], number_of_targets: int) -> bool:
    if len(mappings) < number_of_targets:
        return False
    if any(mappings[source] for source in range(number_of_targets, len(mappings))):
        return False
    return all(mappings[source] == (source,) for source in range(number_of_targets))
