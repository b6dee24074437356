"""The command line's progress: every phase of a command named as it starts, with a live bar on a terminal.

How this works: ``StageProgress`` is a ``(stage, fraction)`` callback, the one the backends, the report and the
sweep report their phases to. A new stage prints its name (a line that stays, so the output tells what was done)
and gets a live rich bar with its own elapsed time (a spinner while its fraction is unknown); the bar disappears
when the command ends. Printed to a pipe or a file there is no live bar, only the lines.
"""

from __future__ import annotations

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    SpinnerColumn,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
)


class StageProgress:
    def __init__(self, console: Console, prefix: str = ""):
        self.console = console
        self.prefix = prefix
        self._bar = Progress(
            SpinnerColumn(),
            TextColumn("{task.description}"),
            BarColumn(),
            TimeElapsedColumn(),
            console=console,
            transient=True,
        )
        self._stage: str | None = None
        self._task: TaskID | None = None

        self._live = console.is_terminal

    def __enter__(self) -> StageProgress:
        if self._live:
            self._bar.start()
        return self

    def __exit__(self, *exc) -> None:
        if self._live:
            self._bar.stop()

    def __call__(self, stage: str, fraction: float | None = None) -> None:
        if stage != self._stage:
            old, self._task, self._stage = self._task, None, stage
            if old is not None and old in self._bar.task_ids:
                self._bar.remove_task(old)
            self.console.print(f"{self.prefix}{stage}", markup=False, highlight=False)
            self._task = self._bar.add_task(stage, total=None)
        if fraction is not None and self._task is not None:
            self._bar.update(self._task, total=1.0, completed=fraction)


class CountedProgress:
    """A ``(stage, done, total)`` callback, the sweep's and the campaign's: each stage's name printed as it starts
    (a line that stays), above one live bar of the work done (on a terminal; on a pipe, only the lines)."""

    def __init__(self, console: Console, first: str):
        self._bar = Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            console=console,
            transient=True,
            disable=not console.is_terminal,
        )
        self._task = self._bar.add_task(first, total=None)
        self._shown: set[str] = set()

    def __enter__(self) -> CountedProgress:
        self._bar.start()
        return self

    def __exit__(self, *exc) -> None:
        self._bar.stop()

    def __call__(self, stage: str, done: int, total: int) -> None:
        if stage not in self._shown:
            self._shown.add(stage)
            self._bar.console.print(stage, markup=False, highlight=False)
        self._bar.update(self._task, description=stage, completed=done, total=total)
