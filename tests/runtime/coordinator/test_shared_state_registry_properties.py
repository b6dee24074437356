"""The shared-state registry under any sequence of checkpoints (new uploads and placeholders for what the last
completed checkpoint uploaded), completions with subsumption, aborts, late acknowledgements, task restores and
JobManager failovers (Hypothesis, derandomized in CI; ``BARRIERSIM_PROPERTY_RANDOM=1`` hunts): with the job
claiming its recovered checkpoints, the files in ``shared/`` are exactly those the retained checkpoints refer to
(none missing, none left over); without claiming, the only ones left over were created before a failover."""

from __future__ import annotations

import os

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from barriersim.runtime.coordinator.shared_state_registry import RecoveryClaimMode, SharedStateRegistry
from barriersim.runtime.state.snapshot import (
    HandleAndLocalPath,
    IncrementalKeyedStateHandle,
    KeyGroupRange,
    OperatorState,
    OperatorSubtaskState,
    PlaceholderStateHandle,
    SharedStateHandle,
)

RANDOM = os.environ.get("BARRIERSIM_PROPERTY_RANDOM") == "1"
EXAMPLES = int(os.environ.get("BARRIERSIM_PROPERTY_EXAMPLES", "300" if RANDOM else "60"))


def handle(key: str) -> SharedStateHandle:
    return SharedStateHandle(key, 1, 0, 100, b"x")


class RegistryMachine(RuleBasedStateMachine):
    @initialize(max_retained=st.integers(1, 3), claim=st.booleans())
    def start(self, max_retained, claim):
        self.max_retained = max_retained
        self.claim = RecoveryClaimMode.CLAIM if claim else RecoveryClaimMode.NO_CLAIM
        self.registry = SharedStateRegistry()
        self.next_id = 1
        self.uploads = 0
        self.retained: list[tuple[int, frozenset[str]]] = []  # (checkpoint id, keys it refers to), oldest first
        self.files: set[str] = set()  # the shared/ directory
        self.backend_base: frozenset[str] = frozenset()  # what the backend's last completed checkpoint uploaded
        self.unclaimed: set[str] = set()  # files of checkpoints recovered without claiming them
        self.late: list[tuple[int, list]] = []  # acknowledgements of aborted checkpoints, not yet delivered

    def _release(self, lowest: int) -> None:
        for discarded in self.registry.unregister_unused_state(lowest):
            assert discarded.key in self.files or discarded.key not in self._ever_written(), discarded
            self.files.discard(discarded.key)

    def _ever_written(self) -> set[str]:
        return self.files | self.unclaimed

    def _acknowledge(self, checkpoint_id: int, entries: list) -> frozenset[str]:
        keys = set()
        for entry in entries:
            registered, discard = self.registry.register_reference(entry, checkpoint_id)
            assert discard is None or discard.key == entry.key
            keys.add(registered.key)
        return frozenset(keys)

    @rule(new_runs=st.integers(0, 3), kept=st.integers(0, 8), outcome=st.sampled_from(["complete", "abort", "late"]))
    def a_checkpoint(self, new_runs, kept, outcome):
        checkpoint_id = self.next_id
        self.next_id += 1
        base = sorted(self.backend_base)
        reused = [PlaceholderStateHandle(k, 100) for k in base[:kept]]
        fresh = []
        for _ in range(new_runs):
            self.uploads += 1
            fresh.append(handle(f"run-{self.uploads}"))
        entries = fresh + reused
        if outcome == "late":  # aborted first, its acknowledgement arrives after
            self.late.append((checkpoint_id, entries))
            return
        keys = self._acknowledge(checkpoint_id, entries)
        if outcome == "abort":
            return  # its new uploads were never persisted; the registry drops them at the next release
        self.files |= keys  # the _metadata write puts every run not yet in shared/ there
        self.retained.append((checkpoint_id, keys))
        self.registry.checkpoint_completed(checkpoint_id)
        self.retained = self.retained[-self.max_retained :]
        self._release(self.retained[0][0])
        self.backend_base = keys

    @rule()
    def a_late_acknowledgement_arrives(self):
        if self.late:
            checkpoint_id, entries = self.late.pop(0)
            self._acknowledge(
                checkpoint_id,
                [e for e in entries if isinstance(e, SharedStateHandle) or self.registry.handle(e.key) is not None],
            )

    @rule()
    def a_task_restores_the_latest_checkpoint(self):
        self.backend_base = self.retained[-1][1] if self.retained else frozenset()
        self.late.clear()

    @rule()
    def a_jobmanager_failover(self):
        """The new JobManager's registry knows only the recovered checkpoints."""
        self.registry = SharedStateRegistry()
        for checkpoint_id, keys in self.retained:
            shared = tuple(HandleAndLocalPath(f"L0-{i:08d}.sst", handle(k)) for i, k in enumerate(sorted(keys)))
            subtask = OperatorSubtaskState(
                managed_keyed_state=(IncrementalKeyedStateHandle("b", KeyGroupRange(0, 0), checkpoint_id, shared),)
            )
            self.registry.register_all_after_restored(
                checkpoint_id, [OperatorState("op", 1, 1, {0: subtask})], self.claim
            )
            if self.claim is RecoveryClaimMode.NO_CLAIM:
                self.unclaimed |= keys
        self.late.clear()
        self.backend_base = self.retained[-1][1] if self.retained else frozenset()

    @invariant()
    def shared_holds_what_retained_checkpoints_use(self):
        if not hasattr(self, "registry"):
            return
        referenced = set().union(*(keys for _, keys in self.retained)) if self.retained else set()
        assert referenced <= self.files, f"missing shared files: {sorted(referenced - self.files)}"
        left_over = self.files - referenced
        if self.claim is RecoveryClaimMode.CLAIM:
            assert not left_over, f"shared files no retained checkpoint uses: {sorted(left_over)}"
        else:
            assert left_over <= self.unclaimed, (
                f"shared files no retained checkpoint uses: {sorted(left_over - self.unclaimed)}"
            )


RegistryMachine.TestCase.settings = settings(
    max_examples=EXAMPLES, deadline=None, derandomize=not RANDOM, database=None, stateful_step_count=30
)
TestRegistryMachine = RegistryMachine.TestCase
