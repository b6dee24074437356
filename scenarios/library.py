"""The bundled scenario library: the scenario files installed with barriersim, found by name.

How this works: ``bundled()`` lists the package's ``*.toml`` files (and ``large/*.toml``) with the name and
description of their ``[scenario]`` table; ``find_bundled(name)`` gives the file a bare name means: its file name
with or without ``.toml`` (``quickstart``, ``backpressure_slow_sink``, ``large/high_rate``) or its scenario name
(``backpressure-slow-sink``). ``resolve(path)`` is the path itself when it exists, else the bundled file it names.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from importlib.resources import files
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from os import PathLike

_SUBDIRECTORIES = ("", "large")


@dataclass(frozen=True)
class BundledScenario:
    name: str  # what ``barriersim run NAME`` takes: the file's stem, under ``large/`` for a large one
    scenario_name: str  # the file's [scenario] name
    description: str
    path: Path


def _root() -> Path:
    return Path(str(files("barriersim.scenarios")))


def bundled() -> list[BundledScenario]:
    """Every bundled scenario, the small ones first, each group by name."""
    found = []
    for sub in _SUBDIRECTORIES:
        directory = _root() / sub if sub else _root()
        for path in sorted(directory.glob("*.toml")):
            try:
                table = tomllib.loads(path.read_text(encoding="utf-8")).get("scenario", {})
            except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
                table = {}
            found.append(
                BundledScenario(
                    name=f"{sub}/{path.stem}" if sub else path.stem,
                    scenario_name=str(table.get("name", path.stem)),
                    description=str(table.get("description", "")),
                    path=path,
                )
            )
    return found


def find_bundled(name: str) -> Path | None:
    """The bundled file ``name`` names, or None."""
    wanted = name[: -len(".toml")] if name.endswith(".toml") else name
    for s in bundled():
        if wanted in (s.name, s.scenario_name):
            return s.path
    return None


def is_bare_name(text: str) -> bool:
    """A name rather than a path: no directory part, except the library's own ``large/``."""
    parts = Path(text).parts
    return len(parts) == 1 or (len(parts) == 2 and parts[0] in _SUBDIRECTORIES[1:])


def resolve(path: str | PathLike[str]) -> Path:
    """``path`` when it exists (or names no bundled scenario), else the bundled file it names."""
    p = Path(path)
    if p.exists() or not is_bare_name(str(path)):
        return p
    return find_bundled(str(path)) or p
