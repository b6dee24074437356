"""The "before" side of a before/after benchmark: barriersim as it was at an earlier commit, run in the same benchmark
run as the current code. See docs/benchmarks.md, "The before side: an earlier commit".
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
BEFORE_COLUMNAR = "975032a102c0a31508fcd6eed67051c21c53429e"  # the data path of record tuples, one at a time
_TOP_LEVEL = ("runtime", "actors", "scenarios")
_exported: dict[str, Path] = {}


class BaselineUnavailable(RuntimeError):
    """The earlier revision cannot be exported (no git, or not a clone holding that commit)."""


def export(rev: str = BEFORE_COLUMNAR) -> Path:
    """A directory importable as that revision's ``barriersim`` (made once per process)."""
    if rev in _exported:
        return _exported[rev]
    root = Path(tempfile.mkdtemp(prefix="barriersim-baseline-"))
    src = root / "src"
    src.mkdir()
    try:
        archive = subprocess.run(["git", "-C", str(REPO), "archive", rev], check=True, capture_output=True).stdout
        subprocess.run(["tar", "-x", "-C", str(src)], input=archive, check=True, capture_output=True)
    except (OSError, subprocess.CalledProcessError) as err:
        detail = err.stderr.decode(errors="replace").strip() if isinstance(err, subprocess.CalledProcessError) else err
        raise BaselineUnavailable(f"cannot export revision {rev}: {detail}") from None
    tree = root / "tree"
    tree.mkdir()
    (src / "barriersim").rename(tree / "barriersim")
    for top in _TOP_LEVEL:
        (src / top).rename(tree / "barriersim" / top)
    (src / "benchmarks").rename(tree / "benchmarks")
    _exported[rev] = tree
    return tree


def run_json(tree: Path, script: Path, args: list[str], timeout: float = 3600) -> dict:
    """Run ``script`` (a path) with ``tree``'s barriersim first on the path; the JSON object it printed last."""
    env = dict(os.environ, PYTHONPATH=str(tree))
    done = subprocess.run(
        [sys.executable, str(script.resolve()), *args],
        env=env,
        cwd=str(tree),
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    if done.returncode != 0:
        raise RuntimeError(f"{script.name} {' '.join(args)} on the baseline failed:\n{done.stderr[-2000:]}")
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    if not lines:
        raise RuntimeError(f"{script.name} on the baseline printed no JSON:\n{done.stdout[-2000:]}")
    return json.loads(lines[-1])
