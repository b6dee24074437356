"""Fault campaigns in this process (``barriersim.campaign``, ``barriersim campaign``): seed N is the same case in
any process; the rows of a campaign do not depend on how it ran; an interrupted campaign resumes where it stopped
(real files); a failing case (a planted historical bug, ``runtime.faults.mutations``) is written as a scenario file that
``barriersim replay`` runs to the same trace and the same failure; ``--shrink`` shrinks it with Hypothesis; bad
input costs one line and exit status 2."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from barriersim import campaign, cli
from barriersim.case_checks import violation
from barriersim.runtime.faults.mutations import PlantedBug, planted
from barriersim.scenarios.documents import scenario_document
from barriersim.scenarios.loader import load_scenario
from barriersim.seed_draws import draw, replay
from barriersim.strategies import SimulatedCase, simulated_cases
from tests.api.scenarios import TINY, write

ROOT = Path(__file__).parents[2]
TIMINGS = ("wall_seconds", "cpu_seconds")
# under this planted bug, seed 8 of a generated job in aligned mode loses records (its output is "violated")
BUG, LOSING_SEED = PlantedBug.SOURCE_SNAPSHOT_AFTER_BARRIER, 8


def rows(out: Path) -> list[dict]:
    table = campaign.read_rows(out).to_pylist()
    return sorted(
        ({k: v for k, v in r.items() if k not in TIMINGS} for r in table), key=lambda r: (r["seed"], r["mode"])
    )


def case_json(case) -> str:
    return json.dumps({"document": case.document, "faults": case.faults.to_plain(), "seed": case.seed}, sort_keys=True)


def test_a_seed_draws_the_same_case_in_any_process():
    strategy = simulated_cases()
    cases = {seed: draw(strategy, seed) for seed in (0, 1, 41)}
    assert len({case_json(d.value) for d in cases.values()}) == 3
    assert all(case_json(draw(strategy, seed).value) == case_json(d.value) for seed, d in cases.items())
    assert all(replay(strategy, d.choices) == d.value for d in cases.values())
    # another process, which loaded other modules (Hypothesis' constants of loaded modules play no part)
    code = (
        "import json; from barriersim.seed_draws import draw; from barriersim.strategies import simulated_cases; "
        "c = draw(simulated_cases(), 41).value; "
        "print(json.dumps({'document': c.document, 'faults': c.faults.to_plain(), 'seed': c.seed}, sort_keys=True))"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    assert out.strip() == case_json(cases[41].value)


def test_a_campaign_on_a_scenario_draws_its_faults_and_gives_the_same_rows_each_time(tmp_path):
    scenario = write(tmp_path, TINY)
    first = campaign.run_campaign(
        str(scenario), range(0, 4), out=tmp_path / "a", mode="all", parallelism=1, aggregate=False
    )
    again = campaign.run_campaign(
        str(scenario), range(0, 4), out=tmp_path / "b", mode="all", parallelism=1, aggregate=False
    )
    assert first.ran == 12 and first.count(campaign.PASSED) == 12 and not first.interrupted
    assert again.ran == first.ran and again.count(campaign.PASSED) == 12
    assert rows(tmp_path / "a") == rows(tmp_path / "b")
    written = rows(tmp_path / "a")
    assert [(r["seed"], r["mode"]) for r in written] == [
        (s, m) for s in range(4) for m in ("aligned", "at-least-once", "unaligned")
    ]
    # the scenario's job with drawn faults: its tasks, its records
    assert all(r["records"] == 1200 and r["trace_sha256"] for r in written)
    timed = campaign.read_rows(tmp_path / "a").to_pylist()  # each row's virtual, wall and CPU time
    assert all(r["virtual_ms"] > 0 and r["wall_seconds"] > 0 and r["cpu_seconds"] > 0 for r in timed)
    faults = [json.loads(r["faults"]) for r in written]
    assert any(faults) and all(
        f["task"].split("#")[0] in ("source", "keyed-sum", "sink")
        for fs in faults
        for f in fs
        if "task" in f and f["task"]
    )
    assert json.loads((tmp_path / "a" / campaign.CAMPAIGN_FILE).read_text())["settings"]["modes"] == [
        "aligned",
        "unaligned",
        "at-least-once",
    ]


def test_an_interrupted_campaign_resumes_where_it_stopped(tmp_path):
    full = campaign.run_campaign("generated", range(10, 22), out=tmp_path / "full", parallelism=1, aggregate=False)
    assert full.ran == 12

    def interrupt_after_seven(what, done, total):
        if done >= 7:
            raise KeyboardInterrupt  # Ctrl-C while the campaign runs

    stopped = campaign.run_campaign(
        "generated",
        range(10, 22),
        out=tmp_path / "out",
        parallelism=1,
        batch=1,
        aggregate=False,
        chunk_rows=3,
        progress=interrupt_after_seven,
    )
    assert stopped.interrupted and stopped.ran == 7
    assert len(rows(tmp_path / "out")) == 7  # flushed on the way out: every case done is written
    assert len(list((tmp_path / "out" / campaign.ROWS_DIR).glob("part-*.parquet"))) >= 3  # chunks of 3 at most
    resumed = campaign.run_campaign("generated", range(10, 22), out=tmp_path / "out", parallelism=1, aggregate=False)
    assert resumed.ran == 5 and not resumed.interrupted
    assert rows(tmp_path / "out") == rows(tmp_path / "full")
    # more seeds later: only the new ones run
    more = campaign.run_campaign("generated", range(10, 24), out=tmp_path / "out", parallelism=1, aggregate=False)
    assert more.ran == 2 and sorted(r["seed"] for r in rows(tmp_path / "out")) == list(range(10, 24))


def test_a_failing_case_is_written_as_a_scenario_that_replay_reproduces(tmp_path, capsys):
    out = tmp_path / "campaign"
    with planted(BUG):
        status = cli.main(
            [
                "campaign",
                "generated",
                "--seeds",
                f"{LOSING_SEED - 1}..{LOSING_SEED}",
                "--mode",
                "aligned",
                "--out",
                str(out),
                "--no-analytics",
                "--parallelism",
                "1",
            ]
        )
    printed = capsys.readouterr().out
    assert status == 1
    [row] = [r for r in rows(out) if r["seed"] == LOSING_SEED]
    assert row["status"] == "violated" and row["verdict"] == "violated" and row["lost"] > 0
    failing = out / campaign.FAILURES_DIR / f"{LOSING_SEED}-aligned" / "scenario.toml"
    assert (
        f"violated: seed {LOSING_SEED} (aligned): lost {row['lost']} records; replay: barriersim replay {failing}"
        in printed
    )
    assert json.loads((failing.parent / "failure.json").read_text())["problem"] == f"lost {row['lost']} records"
    with planted(BUG):
        assert cli.main(["replay", str(failing), "--out", str(tmp_path / "replayed")]) == 1
    replayed = json.loads((tmp_path / "replayed" / "summary.json").read_text())
    assert replayed["trace_sha256"] == row["trace_sha256"]
    assert replayed["verification"]["lost"] == row["lost"] and replayed["verification"]["verdict"] == "violated"
    # without the bug the same case keeps exactly-once
    assert cli.main(["replay", str(failing), "--out", str(tmp_path / "fixed")]) == 0


def test_shrink_gives_a_smaller_case_that_still_fails(tmp_path, capsys):
    original = draw(simulated_cases(mode="aligned"), LOSING_SEED).value
    with planted(BUG):
        status = cli.main(
            ["campaign", "generated", "--shrink", str(LOSING_SEED), "--mode", "aligned", "--out", str(tmp_path)]
        )
        line = capsys.readouterr().out.strip()
        shrunk = tmp_path / "shrunk" / f"{LOSING_SEED}-aligned" / "scenario.toml"
        assert status == 1 and line.startswith(f"seed {LOSING_SEED} (aligned): shrunk: ") and str(shrunk) in line
        small = load_scenario(shrunk)
        as_case = SimulatedCase(scenario_document(small), small.faults, small.seed)
        problem = violation(as_case, as_case.run())
        assert problem is not None and problem in line  # it still fails, as the line says
    assert small.workload.records <= original.document["workload"]["records"]
    assert len(small.job.graph.vertices) <= len(original.document["job"]["vertex"])
    assert (small.workload.records, len(small.job.graph.vertices), len(small.faults.faults)) < (
        original.document["workload"]["records"],
        len(original.document["job"]["vertex"]),
        len(original.faults.faults),
    )
    # a seed that passes has nothing to shrink
    assert (
        cli.main(["campaign", "generated", "--shrink", str(LOSING_SEED), "--mode", "aligned", "--out", str(tmp_path)])
        == 0
    )
    assert capsys.readouterr().out.strip() == f"seed {LOSING_SEED} (aligned): passes; nothing to shrink"


@pytest.mark.parametrize(
    "argv, words",
    [
        (
            ["--seeds", "9..3"],
            "argument --seeds: must be A..B (non-negative integers, A <= B, both included) or N, got '9..3'",
        ),
        ([], "--seeds: give the seeds to run (A..B), or --shrink SEED"),
        (["--seeds", "1", "--parallelism", "0"], "argument --parallelism: must be an integer >= 1, got '0'"),
    ],
)
def test_bad_arguments_cost_one_line_and_exit_2(tmp_path, capsys, argv, words):
    try:
        status = cli.main(["campaign", "generated", "--out", str(tmp_path / "out"), *argv])
    except SystemExit as exited:  # argparse's own errors
        status = exited.code
    err = capsys.readouterr().err.strip().splitlines()
    assert status == 2 and words in err[-1] and not (tmp_path / "out").exists(), err


def test_a_campaign_directory_of_other_settings_is_refused(tmp_path, capsys):
    out = tmp_path / "out"
    campaign.run_campaign("generated", range(1), out=out, parallelism=1, aggregate=False)
    assert cli.main(["campaign", "generated", "--seeds", "1..2", "--mode", "unaligned", "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert (
        err.startswith(
            f"barriersim campaign: --out: {out} holds a campaign of other settings (modes: [None] there, "
            "['unaligned'] here)"
        )
        and len(err.splitlines()) == 1
    )
    assert len(campaign.read_rows(out)) == 1  # nothing written was lost
    assert (
        cli.main(
            [
                "campaign",
                "generated",
                "--seeds",
                "1..2",
                "--mode",
                "unaligned",
                "--out",
                str(out),
                "--force",
                "--no-analytics",
                "--parallelism",
                "1",
            ]
        )
        == 0
    )
    assert [(r["seed"], r["mode"]) for r in rows(out)] == [(1, "unaligned"), (2, "unaligned")]  # replaced
    assert (
        cli.main(
            [
                "campaign",
                str(write(tmp_path, TINY + '\n[[actions]]\ntype = "cancel"\nat_ms = 50\n')),
                "--seeds",
                "1",
                "--out",
                str(tmp_path / "other"),
            ]
        )
        == 2
    )
    assert "a campaign checks jobs that run to their end" in capsys.readouterr().err
    assert pq.read_table(str(out / campaign.ROWS_DIR)).num_rows == 2
