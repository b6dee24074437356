"""Argument types the command line's subcommands share: a seed, and ``--set section.key=value`` overrides."""

from __future__ import annotations

import argparse
import tomllib


def seed_argument(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a non-negative integer, got {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be a non-negative integer, got {text!r}")
    return value


def setting_argument(text: str) -> tuple[str, object]:
    """``section.key=value`` with the value read as TOML (a bare word is a string)."""
    key, sep, raw = text.partition("=")
    if not sep or not key.strip():
        raise argparse.ArgumentTypeError(f"must be SECTION.KEY=VALUE, got {text!r}")
    try:
        value = tomllib.loads(f"v = {raw.strip()}")["v"]
    except tomllib.TOMLDecodeError:
        value = raw.strip()
    return key.strip(), value


def add_set_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="SECTION.KEY=VALUE",
                        type=setting_argument, help="override one workload, checkpointing or network setting (a TOML "
                                                    "value, e.g. checkpointing.interval_ms=200); may be given "
                                                    "several times")
