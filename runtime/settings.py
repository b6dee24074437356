"""A configuration section's settings, declared once: each field of a section's frozen dataclass carries a one-line
description and the check of the values it allows as field metadata (Flink's ``ConfigOption``: key, type,
default, description).

``setting(default, description, check)`` declares a field; ``settings_of(cls)`` lists a section's settings (name,
type, default, description, check). The checks (``Between``, ``AtLeast``, ``AboveAtMost``, ``PLAIN_NAME``) return
the problem with a value as one line, or None, and say in words what they allow. The scenario schema
(``scenarios.schema``) is generated from these declarations; the runtime itself reads only the values.
"""

from __future__ import annotations

import dataclasses
import enum
import typing
from dataclasses import dataclass
from typing import Any

_METADATA_KEY = "barriersim.setting"


class Check:
    """What a setting allows: ``problem(value)`` is what is wrong with a value (None: nothing), ``allowed`` the
    rule in words."""

    @property
    def allowed(self) -> str:
        return ""

    def problem(self, value: Any) -> str | None:
        return None


@dataclass(frozen=True)
class Between(Check):
    low: float
    high: float

    @property
    def allowed(self) -> str:
        return f"{self.low} to {self.high}"

    def problem(self, value: Any) -> str | None:
        return None if self.low <= value <= self.high else f"must be between {self.low} and {self.high}, got {value}"


@dataclass(frozen=True)
class AtLeast(Check):
    low: float

    @property
    def allowed(self) -> str:
        return f">= {self.low}"

    def problem(self, value: Any) -> str | None:
        return None if value >= self.low else f"must be >= {self.low}, got {value}"


@dataclass(frozen=True)
class AboveAtMost(Check):
    low: float
    high: float

    @property
    def allowed(self) -> str:
        return f"> {self.low} and <= {self.high}"

    def problem(self, value: Any) -> str | None:
        return (
            None
            if self.low < value <= self.high
            else f"must be greater than {self.low} and at most {self.high}, got {value}"
        )


class _PlainName(Check):
    @property
    def allowed(self) -> str:
        return "a non-empty printable name without surrounding blanks, '/' or '#'"

    def problem(self, value: Any) -> str | None:
        """A name that shows as written in one-line messages, run directories and subtask names ('name#0')."""
        if not value or not value.isprintable() or value.strip() != value or any(c in value for c in "/#"):
            return f"must be {self.allowed}, got {value!r}"
        return None


PLAIN_NAME = _PlainName()
ANY = Check()


@dataclass(frozen=True)
class Setting:
    """One setting of a section: its key, type (int, float, bool, str or an ``enum.Enum``), default, description
    and check."""

    name: str
    kind: type
    default: Any
    description: str
    check: Check

    @property
    def choices(self) -> tuple[str, ...]:
        """The values an enum setting takes, as written in a scenario file (empty for other types)."""
        if isinstance(self.kind, type) and issubclass(self.kind, enum.Enum):
            return tuple(m.value for m in self.kind)
        return ()


@dataclass(frozen=True)
class _Declared:
    description: str
    check: Check


def setting(default: Any, description: str, check: Check = ANY) -> Any:
    """A dataclass field that is a setting: its default, one-line description and check."""
    return dataclasses.field(default=default, metadata={_METADATA_KEY: _Declared(description, check)})


def settings_of(cls: type) -> tuple[Setting, ...]:
    """The settings of section class ``cls``, in field order; a field not declared with ``setting`` is none."""
    hints = typing.get_type_hints(cls)
    return tuple(
        Setting(f.name, hints[f.name], f.default, d.description, d.check)
        for f in dataclasses.fields(cls)
        if (d := f.metadata.get(_METADATA_KEY)) is not None
    )


def undeclared_fields(cls: type) -> list[str]:
    """The fields of ``cls`` that are no setting (a section class should have none)."""
    return [f.name for f in dataclasses.fields(cls) if _METADATA_KEY not in f.metadata]
