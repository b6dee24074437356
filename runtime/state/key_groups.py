"""Key groups: how keyed state is partitioned so it can be redistributed when the parallelism changes, with Java's
hash codes so that assignments match Flink's.

Mirrors Flink's ``KeyGroupRangeAssignment``. See docs/state-and-rescaling.md, "Key groups".
"""

from __future__ import annotations

import struct

import numpy as np

from barriersim.runtime.state.snapshot import KeyGroupRange

_M32 = 0xFFFFFFFF
UPPER_BOUND_MAX_PARALLELISM = 1 << 15
DEFAULT_LOWER_BOUND_MAX_PARALLELISM = 1 << 7


def _to_int32(x: int) -> int:
    x &= _M32
    return x - (1 << 32) if x & 0x80000000 else x


def _rotl32(x: int, r: int) -> int:
    return ((x << r) | (x >> (32 - r))) & _M32


def java_hash_code(key: object) -> int:
    """The key's Java ``hashCode`` (int, long, String, boolean, double, TupleN), as Flink sees such keys."""
    if isinstance(key, bool):
        return 1231 if key else 1237
    if isinstance(key, int):
        if -(1 << 31) <= key < (1 << 31):
            return key
        v = key & 0xFFFFFFFFFFFFFFFF
        return _to_int32(v ^ (v >> 32))
    if isinstance(key, str):
        h = 0
        for unit in key.encode("utf-16-be").hex(" ", 2).split():
            h = (31 * h + int(unit, 16)) & _M32
        return _to_int32(h)
    if isinstance(key, float):
        # Java's Double.hashCode: doubleToLongBits (NaN canonical), then bits ^ (bits >>> 32)
        bits = 0x7FF8000000000000 if key != key else struct.unpack(">Q", struct.pack(">d", key))[0]
        return _to_int32(bits ^ (bits >> 32))
    if isinstance(key, tuple) and key:
        # Flink's TupleN.hashCode: result = f0.hashCode(); result = 31 * result + fi.hashCode() ...
        h = java_hash_code(key[0])
        for field in key[1:]:
            h = 31 * h + java_hash_code(field)
        return _to_int32(h)
    raise TypeError(f"no stable hash for a key of type {type(key).__name__}: {key!r}")


def murmur_hash(code: int) -> int:
    """Flink's ``MathUtils.murmurHash(int)``: a non-negative int."""
    code &= _M32
    code = (code * 0xCC9E2D51) & _M32
    code = _rotl32(code, 15)
    code = (code * 0x1B873593) & _M32
    code = _rotl32(code, 13)
    code = (code * 5 + 0xE6546B64) & _M32
    code ^= 4
    # bitMix (fmix32)
    code ^= code >> 16
    code = (code * 0x85EBCA6B) & _M32
    code ^= code >> 13
    code = (code * 0xC2B2AE35) & _M32
    code ^= code >> 16
    signed = _to_int32(code)
    if signed >= 0:
        return signed
    return -signed if signed != -(1 << 31) else 0


def compute_key_group_for_key_hash(key_hash: int, max_parallelism: int) -> int:
    return murmur_hash(key_hash) % max_parallelism


def assign_to_key_group(key: object, max_parallelism: int) -> int:
    return compute_key_group_for_key_hash(java_hash_code(key), max_parallelism)


def compute_key_group_range_for_operator_index(
    max_parallelism: int, parallelism: int, operator_index: int
) -> KeyGroupRange:
    _check_parallelism(max_parallelism, parallelism)
    start = (operator_index * max_parallelism + parallelism - 1) // parallelism
    end = ((operator_index + 1) * max_parallelism - 1) // parallelism
    return KeyGroupRange(start, end)


def compute_operator_index_for_key_group(max_parallelism: int, parallelism: int, key_group_id: int) -> int:
    return key_group_id * parallelism // max_parallelism


def assign_key_to_parallel_operator(key: object, max_parallelism: int, parallelism: int) -> int:
    return compute_operator_index_for_key_group(max_parallelism, parallelism, assign_to_key_group(key, max_parallelism))


def compute_default_max_parallelism(operator_parallelism: int) -> int:
    """Flink: roundUpToPowerOfTwo(p + p / 2), at least 128 and at most 32768."""
    p = operator_parallelism + operator_parallelism // 2
    rounded = 1 << max(0, (p - 1).bit_length())
    return min(max(rounded, DEFAULT_LOWER_BOUND_MAX_PARALLELISM), UPPER_BOUND_MAX_PARALLELISM)


def _check_parallelism(max_parallelism: int, parallelism: int) -> None:
    if not 0 < parallelism <= max_parallelism <= UPPER_BOUND_MAX_PARALLELISM:
        raise ValueError(
            f"parallelism {parallelism} must be in 1..max parallelism {max_parallelism} (at most "
            f"{UPPER_BOUND_MAX_PARALLELISM})"
        )


# -- the same assignment for a whole column of integer keys (numpy) ---------------------------------------------

_INT32_MIN, _INT32_MAX = -(1 << 31), (1 << 31) - 1


def java_hash_codes(keys: np.ndarray) -> np.ndarray:
    """``java_hash_code`` of every key of an int64 array, as uint32 bit patterns: a key in the 32-bit range hashes
    to itself (Java's ``Integer.hashCode``), any other as ``Long.hashCode`` (``value ^ (value >>> 32)``)."""
    keys = np.asarray(keys, dtype=np.int64)
    bits = keys.view(np.uint64)
    long_codes = (bits ^ (bits >> np.uint64(32))).astype(np.uint32)
    small = (keys >= _INT32_MIN) & (keys <= _INT32_MAX)
    return np.where(small, keys.astype(np.uint32), long_codes)


def _rotl32_array(x: np.ndarray, r: int) -> np.ndarray:
    return (x << np.uint32(r)) | (x >> np.uint32(32 - r))


def murmur_hashes(codes: np.ndarray) -> np.ndarray:
    """``murmur_hash`` of every hash code (uint32 bit patterns), as non-negative int64."""
    code = np.asarray(codes, dtype=np.uint32)
    code = code * np.uint32(0xCC9E2D51)
    code = _rotl32_array(code, 15)
    code = code * np.uint32(0x1B873593)
    code = _rotl32_array(code, 13)
    code = code * np.uint32(5) + np.uint32(0xE6546B64)
    code ^= np.uint32(4)
    code ^= code >> np.uint32(16)
    code = code * np.uint32(0x85EBCA6B)
    code ^= code >> np.uint32(13)
    code = code * np.uint32(0xC2B2AE35)
    code ^= code >> np.uint32(16)
    signed = code.view(np.int32).astype(np.int64)
    # Flink: code >= 0 ? code : (code != Integer.MIN_VALUE ? -code : 0)
    return np.where(signed >= 0, signed, np.where(signed != _INT32_MIN, -signed, 0))


def assign_to_key_groups(keys: np.ndarray, max_parallelism: int) -> np.ndarray:
    """``assign_to_key_group`` of every integer key of an array (int64 key groups)."""
    return murmur_hashes(java_hash_codes(keys)) % max_parallelism


class KeyGroupAssigner:
    """``key -> key group`` for a ``max_parallelism``, for single keys (``assigner(key)``) and for whole int64 key
    columns (``assigner.of_keys(keys)``), memoized: key groups of the keys in ``[0, cached)`` are computed once and
    looked up after (every workload's keys are small non-negative ints), any other key is hashed."""

    _MAX_CACHED = 1 << 20

    def __init__(self, max_parallelism: int) -> None:
        self.max_parallelism = max_parallelism
        self._table = np.empty(0, dtype=np.int64)
        self._single: dict[object, int] = {}

    def __call__(self, key: object) -> int:
        group = self._single.get(key)
        if group is None:
            group = self._single[key] = assign_to_key_group(key, self.max_parallelism)
        return group

    def of_keys(self, keys: np.ndarray) -> np.ndarray:
        if not len(keys):
            return np.empty(0, dtype=np.int64)
        low, high = int(np.minimum.reduce(keys)), int(np.maximum.reduce(keys))  # (no Python wrapper)
        if low >= 0 and high < self._MAX_CACHED:
            if high >= len(self._table):
                size = min(self._MAX_CACHED, max(1024, 2 * (high + 1)))
                self._table = assign_to_key_groups(np.arange(size, dtype=np.int64), self.max_parallelism)
            groups: np.ndarray = self._table[keys]
            return groups
        return assign_to_key_groups(keys, self.max_parallelism)


def operator_indices_for_key_groups(key_groups: np.ndarray, max_parallelism: int, parallelism: int) -> np.ndarray:
    """``compute_operator_index_for_key_group`` of every key group of an array."""
    return key_groups * parallelism // max_parallelism
