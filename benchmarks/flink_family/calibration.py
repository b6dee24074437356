"""The one calibration of barriersim for the family's machine kind and Flink's Java job: each value named with the
measurement it comes from (docs/fidelity-family.md, "The calibration"; ``compare --spin-cost`` prints the spin
and sleep costs). ``converter`` reads it for every configuration alike; no configuration has a constant of its own.
"""

from __future__ import annotations

# The machine kind: two cores (`nproc` on the machine the family ran on). Every TaskManager of the MiniCluster runs
# in one JVM on it, so the subtasks of all TaskManagers share them ([cluster] cpu_cores).
CPU_CORES = 2

# Flink's own work per record at every vertex behind an exchange (deserializing, the operator's call, serializing,
# handing the record on), CPU work added to the spin: the calibration jobs' sinks (5 µs spin) are busy 11.0-13.1 µs
# per record and calibration-spin-5us's worker 13.7-13.9 µs: 8 µs above the spin.
RECORD_OVERHEAD_US = 8.0

# What a hot key's sleep (LockSupport.parkNanos) takes beyond its nominal time (the timer slack and the wake-up):
# calibration-sleep-200us's worker (20 µs spin, 30 % of its records sleeping 200 µs) is busy 118.7-123.1 µs per
# record, calibration-spin-20us's 33.8-38.4 without the sleep: 0.3 x (200 + 70..97) µs; the middle, 80 µs.
SLEEP_OVERSHOOT_US = 80.0
