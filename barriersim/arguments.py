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


RETENTION_KEY = "checkpointing.externalized_checkpoint_retention"


def add_checkpoint_arguments(parser: argparse.ArgumentParser) -> None:
    """``--externalized-checkpoint-retention`` (the scenario key, as a ``--set`` override) and
    ``--checkpoint-files`` (the simulator keeps its checkpoints in files)."""
    parser.add_argument("--externalized-checkpoint-retention", dest="overrides", action="append",
                        metavar="RETENTION", type=lambda text: (RETENTION_KEY, text.strip()),
                        help="what a cancelled, failed or suspended job keeps of its checkpoints, as Flink's "
                             "execution.checkpointing.externalized-checkpoint-retention: NO_EXTERNALIZED_CHECKPOINTS "
                             "(Flink's default), DELETE_ON_CANCELLATION or RETAIN_ON_CANCELLATION; a finished job "
                             "keeps none (the same as --set " + RETENTION_KEY + "=...)")
    parser.add_argument("--checkpoint-files", action="store_true",
                        help="sim backend: keep the checkpoints in files under RUN_DIR/checkpoints/ as a Ray run does "
                             "(the simulation is the same)")
