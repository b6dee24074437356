"""The one calibration of barriersim for the family's machine kind and Flink's Java job: each value named with the
measurement it comes from (docs/fidelity-family.md, "The calibration"; ``compare --spin-cost`` prints the spin
and sleep costs). ``converter`` reads it for every configuration alike; no configuration has a constant of its own.
"""

from __future__ import annotations

# The machine kind: two cores (`nproc` on the machine the family ran on). Every TaskManager of the MiniCluster runs
# in one JVM on it, so the subtasks of all TaskManagers share them ([cluster] cpu_cores).
CPU_CORES = 2

# The JVM's own threads (the JIT compilers, the collector, Flink's RPC, deployment and metric threads) take part of
# the cores, most as the job starts: `benchmarks.flink_family.warmup --rest-step 0` read every thread's CPU time of
# the JVM from /proc every 100 ms (2026-12-07, quiet machine; raw files in benchmarks/flink/family/warmup/, the
# `-threads` runs). In draw-04 and draw-09, whose tasks keep both cores busy, the JVM's threads held 28-35 % of the
# machine in the first second after the first checkpoint's trigger, 14-27 % in the second, 3-9 % after 20 s. As a
# share of what the JVM ran (the sampler takes 3-4 %), fitted by least squares over the windows of the four runs
# to steady + (start - steady) e^(-t / decay).
JVM_SHARE_START = 0.31
JVM_SHARE_STEADY = 0.07
JVM_SHARE_DECAY_MS = 4000.0

# Flink's own work per record at every vertex behind an exchange (deserializing, the operator's call, serializing,
# handing the record on), CPU work added to the spin: the calibration jobs' sinks (5 µs spin) are busy 11.0-13.1 µs
# per record and calibration-spin-5us's worker 13.7-13.9 µs: 8 µs above the spin. Measured again on a quiet machine
# (2026-12-07): the sinks 10-12 µs (5-7 above their spin), the workers of 5, 20 and 80 µs 12-14, 31 and 92-93 (7-13
# above): 8 stays.
RECORD_OVERHEAD_US = 8.0

# What a hot key's sleep (LockSupport.parkNanos) takes beyond its nominal time (the wake-up, and a part that grows
# with the sleep), measured with nothing beside Flink (2026-12-07; each run started at a load average under 2.5):
# calibration-sleep-200us's worker (20 µs spin, 30 % of its records sleeping 200 µs) is busy 120-131 µs per record
# and calibration-sleep-1000us's (1 ms) 375-377, against calibration-spin-20us's 31 without the sleep:
# 0.3 x (200 + 97..133) and 0.3 x (1000 + 147..153). The line through the two middles: 106 µs + 4.4 % of the sleep.
# (Measured under a load average of 5-40 the first time, the 200 µs sleep overshot by 70-97 µs.)
SLEEP_OVERSHOOT_US = 106.0
SLEEP_OVERSHOOT_FRACTION = 0.044


# The Java job's checkpoint path, from its own statistics in the quiet runs (raw/; docs/fidelity-family.md, "The
# Java job's checkpoint path and its sleeping sources"). The cost model's defaults are the facts' PyFlink job's
# (runtime/checkpoint_cost.py), whose Python operators flush at every barrier; the Java job's are shorter:
# - the trigger path: a source subtask's start delay (Flink measures it when the trigger's mail runs) is 3-4.5 ms
#   (median 3) in the five calibration jobs, whose sources sleep at most 0.43 ms between records: 3.0 ms before the
#   0.5 ms trigger RPC (the cost model's 8.5 gives barriersim's sources 8-9 ms);
# - after the barrier reached the last sink: the calibration jobs' end-to-end duration exceeds their sink's start
#   delay by 2-4 ms (median 2): the sink's synchronous and asynchronous parts, its acknowledgement and the
#   coordinator's _metadata write; 0.5 + 1.5 ms of fixed parts gives barriersim's 2-3 ms (1 + 6 gives 10-13).
TRIGGER_FIXED_MS = 3.0
TRIGGER_CONSTANT_MS = 0.0  # the Java job's trigger path is the measured one alone (the facts' constant is theirs)
SNAPSHOT_FIXED_MS = 0.5
ASYNC_FIXED_MS = 1.5


def sleep_with_overshoot_us(sleep_us: float) -> float:
    """What a hot key's nominal sleep of ``sleep_us`` costs a Flink subtask on this machine kind."""
    return sleep_us + SLEEP_OVERSHOOT_US + SLEEP_OVERSHOOT_FRACTION * sleep_us
