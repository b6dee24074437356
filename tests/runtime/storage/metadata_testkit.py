"""Builders of random checkpoint state for the storage tests: a seeded ``random.Random`` version (Flink's
``CheckpointTestUtils``) and Hypothesis strategies for arbitrary ``CheckpointMetadata``."""

from __future__ import annotations

import random

from hypothesis import strategies as st

from barriersim.runtime.events import Buffer, InputChannelInfo, ResultSubpartitionInfo
from barriersim.runtime.state.snapshot import (
    CheckpointMetadata,
    InputChannelStateHandle,
    KeyGroupRange,
    KeyGroupsStateHandle,
    MasterState,
    OperatorState,
    OperatorStateDistributionMode,
    OperatorStateHandle,
    OperatorSubtaskState,
    ResultSubpartitionStateHandle,
)


def _bytes(rnd: random.Random, max_len: int = 24) -> bytes:
    return bytes(rnd.randrange(256) for _ in range(rnd.randrange(max_len + 1)))


def random_master_states(rnd: random.Random, n: int) -> tuple[MasterState, ...]:
    """Flink's ``CheckpointTestUtils.createRandomMasterStates``."""
    return tuple(
        MasterState(f"master-{rnd.randrange(1 << 30)}", rnd.randrange(1 << 31), _bytes(rnd, 64)) for _ in range(n)
    )


def random_buffers(rnd: random.Random, n: int) -> tuple[Buffer, ...]:
    return tuple(
        Buffer(tuple(rnd.randrange(-1000, 1000) for _ in range(rnd.randrange(4))), rnd.randrange(1, 32768), seq)
        for seq in range(n)
    )


def random_subtask_state(rnd: random.Random, subtask_index: int, max_parallelism: int) -> OperatorSubtaskState:
    start = rnd.randrange(max_parallelism)
    end = rnd.randrange(start, max_parallelism)
    return OperatorSubtaskState(
        managed_operator_state=(
            OperatorStateHandle(
                {f"list-{j}": tuple(_bytes(rnd) for _ in range(rnd.randrange(4))) for j in range(rnd.randrange(3))},
                {"union": OperatorStateDistributionMode.UNION} if rnd.random() < 0.3 else {},
            ),
        )
        if rnd.random() < 0.8
        else (),
        managed_keyed_state=(
            KeyGroupsStateHandle(
                KeyGroupRange(start, end), {kg: _bytes(rnd) for kg in range(start, end + 1) if rnd.random() < 0.5}
            ),
        )
        if rnd.random() < 0.8
        else (),
        input_channel_state=tuple(
            InputChannelStateHandle(subtask_index, InputChannelInfo(0, c), random_buffers(rnd, rnd.randrange(3)))
            for c in range(rnd.randrange(3))
        ),
        result_subpartition_state=tuple(
            ResultSubpartitionStateHandle(
                subtask_index, ResultSubpartitionInfo(0, c), random_buffers(rnd, rnd.randrange(3))
            )
            for c in range(rnd.randrange(3))
        ),
    )


def random_operator_states(
    rnd: random.Random, num_all_running: int, num_partly_finished: int, num_fully_finished: int, num_subtasks: int
) -> tuple[OperatorState, ...]:
    """Flink's ``CheckpointTestUtils.createOperatorStates``: all-running operators with state in every
    subtask, partly finished ones with state in some subtasks, fully finished ones without state."""
    states = []
    for i in range(num_all_running + num_partly_finished + num_fully_finished):
        max_p = 128
        op_id = f"op-{i}-{rnd.randrange(1 << 30):x}"
        if i >= num_all_running + num_partly_finished:
            states.append(OperatorState(op_id, num_subtasks, max_p, {}, None, fully_finished=True))
            continue
        partly = i >= num_all_running
        subtasks = {
            s: random_subtask_state(rnd, s, max_p) for s in range(num_subtasks) if not partly or rnd.random() < 0.5
        }
        coordinator = _bytes(rnd) if rnd.random() < 0.3 else None
        states.append(OperatorState(op_id, num_subtasks, max_p, subtasks, coordinator))
    return tuple(states)


# -- Hypothesis strategies ------------------------------------------------------------------------

_small_bytes = st.binary(max_size=16)
_records = st.lists(
    st.one_of(
        st.integers(-(2**63), 2**63 - 1), st.text(max_size=8), st.tuples(st.text(max_size=4), st.integers(-5, 5))
    ),
    max_size=3,
).map(tuple)
_buffers = st.lists(st.builds(Buffer, _records, st.integers(0, 32768), st.integers(0, 2**31)), max_size=2).map(tuple)


@st.composite
def subtask_states(draw, max_parallelism: int = 128):
    ranges = draw(st.lists(st.tuples(st.integers(0, max_parallelism - 1), st.integers(0, 8)), max_size=1))
    keyed = []
    for start, width in ranges:
        end = min(start + width, max_parallelism - 1)
        groups = draw(st.dictionaries(st.integers(start, end), _small_bytes, max_size=3))
        keyed.append(KeyGroupsStateHandle(KeyGroupRange(start, end), groups))
    operator = draw(
        st.lists(
            st.builds(
                OperatorStateHandle,
                st.dictionaries(st.text(max_size=5), st.lists(_small_bytes, max_size=3).map(tuple), max_size=2),
                st.dictionaries(st.text(max_size=5), st.sampled_from(list(OperatorStateDistributionMode)), max_size=1),
            ),
            max_size=2,
        )
    )
    subtask = draw(st.integers(0, 7))
    inputs = draw(
        st.lists(
            st.builds(
                InputChannelStateHandle,
                st.just(subtask),
                st.builds(InputChannelInfo, st.integers(0, 3), st.integers(0, 7)),
                _buffers,
            ),
            max_size=2,
        )
    )
    outputs = draw(
        st.lists(
            st.builds(
                ResultSubpartitionStateHandle,
                st.just(subtask),
                st.builds(ResultSubpartitionInfo, st.integers(0, 3), st.integers(0, 7)),
                _buffers,
            ),
            max_size=2,
        )
    )
    return OperatorSubtaskState(tuple(operator), tuple(keyed), tuple(inputs), tuple(outputs))


@st.composite
def checkpoint_metadata(draw):
    operators = []
    for i in range(draw(st.integers(0, 2))):
        parallelism = draw(st.integers(1, 3))
        subtasks = draw(st.dictionaries(st.integers(0, parallelism - 1), subtask_states(), max_size=parallelism))
        operators.append(
            OperatorState(
                f"op-{i}-" + draw(st.text(max_size=4)),
                parallelism,
                draw(st.sampled_from([128, 256, 32768])),
                subtasks,
                draw(st.one_of(st.none(), _small_bytes)),
                draw(st.booleans()),
            )
        )
    masters = draw(
        st.lists(st.builds(MasterState, st.text(max_size=6), st.integers(0, 2**31), _small_bytes), max_size=2)
    )
    return CheckpointMetadata(draw(st.integers(0, 2**63 - 1)), tuple(operators), tuple(masters))
