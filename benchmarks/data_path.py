"""The in-process data path, before and after the columnar data plane, measured in one run: microseconds of CPU per
record through source -> map -> keyed sum -> sink (target: at most 0.15 us per record). See docs/benchmarks.md,
"The in-process data path".

Run: ``python -m benchmarks.data_path [--records N] [--repeats N] [--baseline-rev REV]``.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import time
from pathlib import Path


def measure(records: int) -> dict:
    """Run the four-task pipeline over ``records`` records in this process; CPU and wall time per record."""
    from barriersim.runtime.checkpointing_mode import CheckpointingMode
    from barriersim.runtime.ids import ExecutionAttemptID
    from barriersim.runtime.job.wiring import Wiring
    from barriersim.runtime.jobgraph import JobEdge, JobGraph, JobVertex
    from barriersim.runtime.jobgraph import OperatorKind as K
    from barriersim.runtime.jobgraph import Partitioner as P
    from barriersim.runtime.network.input.input_channel import AddCredit
    from barriersim.runtime.operators.sinks import ExternalStore
    from barriersim.runtime.task.stream_task import StepOutcome, StreamTask
    from barriersim.scenarios.workload import local_splits

    graph = JobGraph(
        (
            JobVertex("source", K.SOURCE, 1),
            JobVertex("map", K.MAP, 1),
            JobVertex("sum", K.KEYED_SUM, 1),
            JobVertex("sink", K.TWO_PHASE_COMMIT_SINK, 1),
        ),
        (JobEdge("source", "map", P.FORWARD), JobEdge("map", "sum", P.HASH), JobEdge("sum", "sink", P.FORWARD)),
    ).validate()
    split = local_splits(records, 1000, 1.0, 100, 1, seed=1)[0]
    wiring = Wiring(graph)
    store = ExternalStore()

    class NoTimers:
        def register_timer(self, at_ms, callback):
            class Handle:
                def cancel(self):
                    pass

            return Handle()

    tasks = {}
    for vertex in graph.vertices:
        key = (vertex.name, 0)
        tasks[key] = StreamTask(
            graph,
            vertex.name,
            0,
            ExecutionAttemptID(vertex.name, 0),
            mode=CheckpointingMode.ALIGNED,
            clock=lambda: 0,
            timer_service=NoTimers(),
            rng=random.Random(1),
            split=split if vertex.operator is K.SOURCE else (),
            store=store,
            checkpoints_after_tasks_finish=False,
        )
    for task in tasks.values():
        task.restore(None)
    order = list(tasks)

    def route(key) -> None:
        task = tasks[key]
        for info, item in task.poll_sendable():
            consumer, channel = wiring.channel_of(key, info)
            tasks[consumer].on_element(channel, item.element, item.sequence_number, item.buffers_in_backlog)
        for action in task.drain_actions():
            if isinstance(action, AddCredit):
                producer, info = wiring.subpartition_of(key, action.channel_info)
                tasks[producer].on_credit(info, action.credit)

    started, cpu_started = time.perf_counter(), time.process_time()
    for key in order:
        route(key)  # initial credit
    while not all(t.finished for t in tasks.values()):
        progressed = False
        for key in order:
            task = tasks[key]
            while task.process_next().outcome is StepOutcome.PROCESSED:
                progressed = True
                route(key)
            route(key)
        if not progressed:
            for key in order:
                route(key)
    cpu = time.process_time() - cpu_started
    wall = time.perf_counter() - started
    committed = len(store.output())
    if committed != records:
        raise RuntimeError(f"the pipeline committed {committed} of {records} records")
    return {"records": records, "cpu_us_per_record": cpu / records * 1e6, "wall_us_per_record": wall / records * 1e6}


def measure_touch_every_record(records: int) -> dict:
    """The floor of any per-record Python step: one loop over the records' tuples, summing a field."""
    rows = [(i, i % 1000, i % 100, i) for i in range(records)]
    cpu_started = time.process_time()
    total = 0
    for r in rows:
        total += r[2]
    return {"cpu_us_per_record": (time.process_time() - cpu_started) / records * 1e6}


def main() -> None:
    from benchmarks.baseline_tree import BEFORE_COLUMNAR, BaselineUnavailable, export, run_json

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--baseline-rev", default=BEFORE_COLUMNAR)
    args = parser.parse_args()
    if args.records < 1 or args.repeats < 1:
        parser.error("--records and --repeats must be at least 1")
    try:
        tree = export(args.baseline_rev)
    except BaselineUnavailable as err:
        tree = None
        print(f"before: not measured ({err})")
    before, after = [], []
    for _ in range(args.repeats):
        if tree is not None:
            before.append(run_json(tree, Path(__file__), ["--measure", str(args.records)]))
        after.append(measure(args.records))
    touch = measure_touch_every_record(args.records)
    print(
        f"in-process data path source -> map -> keyed sum -> sink, {args.records:,} records, medians of "
        f"{args.repeats} alternating runs (CPU us per record; target <= 0.15):"
    )
    print(f"    baseline of this run: touching every record once in a Python loop {touch['cpu_us_per_record']:.3f} us")
    for name, runs in (("before", before), ("after", after)):
        if runs:
            cpu = statistics.median(r["cpu_us_per_record"] for r in runs)
            wall = statistics.median(r["wall_us_per_record"] for r in runs)
            kind = "records as tuples, " + args.baseline_rev[:10] if name == "before" else "record batches"
            print(f"    {name:6} ({kind}): {cpu:.3f} us CPU per record ({wall:.3f} us wall)")
    cpu_after = statistics.median(r["cpu_us_per_record"] for r in after)
    verdict = "met" if cpu_after <= 0.15 else "NOT met"
    speedup = (
        f", {statistics.median(r['cpu_us_per_record'] for r in before) / cpu_after:.1f}x faster than before"
        if before
        else ""
    )
    print(f"    target <= 0.15 us per record: {verdict}{speedup}")


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--measure":
        print(json.dumps(measure(int(sys.argv[2]))))
    else:
        main()
