"""Argument types the command line's subcommands share: a seed, a range of seeds, ``--set section.key=value``
overrides, the experiment actions' times, ``--parallelism vertex=n``, and the experiment action options of ``run``."""

from __future__ import annotations

import argparse
import re
import tomllib

from barriersim.scenarios.schema import SETTABLE_SECTIONS


def _non_negative_int(text: str, what: str) -> int:
    """``text`` as an integer >= 0, else an ``ArgumentTypeError`` saying it must be ``what``."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be {what}, got {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be {what}, got {text!r}")
    return value


def seed_argument(text: str) -> int:
    return _non_negative_int(text, "a non-negative integer")


def seed_range_argument(text: str) -> range:
    """``A..B`` (non-negative integers, A <= B, both included) or ``N``."""
    match = re.fullmatch(r"\s*(\d+)\s*(?:\.\.\s*(\d+)\s*)?", text)
    if not match or (match.group(2) is not None and int(match.group(2)) < int(match.group(1))):
        raise argparse.ArgumentTypeError(
            f"must be A..B (non-negative integers, A <= B, both included) or N, got {text!r}"
        )
    first = int(match.group(1))
    return range(first, int(match.group(2) or first) + 1)


def positive_argument(text: str) -> int:
    """An integer >= 1 (a count of parallel tasks)."""
    value = _non_negative_int(text, "an integer >= 1")
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be an integer >= 1, got {text!r}")
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
    parser.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="SECTION.KEY=VALUE",
        type=setting_argument,
        help=f"override one setting of the scenario's [{'], ['.join(SETTABLE_SECTIONS)}] sections (a "
        "TOML value, e.g. checkpointing.interval_ms=200); may be given several times",
    )


def ms_argument(text: str) -> int:
    """A time in ms on the run's clock: a non-negative integer."""
    return _non_negative_int(text, "a time in ms (a non-negative integer)")


def parallelism_argument(text: str) -> tuple[str, int]:
    """``vertex=n``: a vertex's new parallelism (n >= 1)."""
    vertex, sep, raw = text.partition("=")
    try:
        value = int(raw)
    except ValueError:
        value = 0
    if not sep or not vertex.strip() or value < 1:
        raise argparse.ArgumentTypeError(f"must be VERTEX=N with N >= 1, got {text!r}")
    return vertex.strip(), value


def add_action_arguments(parser: argparse.ArgumentParser) -> None:
    """``run``'s experiment actions: savepoints, a stop-with-savepoint or a cancel, and a start from a savepoint
    or retained checkpoint with new parallelisms."""
    group = parser.add_argument_group("experiment actions (they replace the scenario's [[actions]])")
    group.add_argument(
        "--savepoint-at",
        dest="savepoint_at",
        action="append",
        default=[],
        type=ms_argument,
        metavar="MS",
        help="take a savepoint (canonical format) at MS on the run's clock; may be given several times",
    )
    group.add_argument(
        "--stop-with-savepoint-at",
        dest="stop_at",
        type=ms_argument,
        metavar="MS",
        help="stop the job with a savepoint at MS (Flink's stop)",
    )
    group.add_argument(
        "--drain",
        action="store_true",
        help="with --stop-with-savepoint-at: drain (MAX_WATERMARK and the end of input before the "
        "savepoint, as flink stop --drain)",
    )
    group.add_argument("--cancel-at", dest="cancel_at", type=ms_argument, metavar="MS", help="cancel the job at MS")
    group.add_argument("--actions", help="a whole action schedule as JSON (as in a scenario's [[actions]])")
    restore = parser.add_argument_group("restore (Flink's run --fromSavepoint)")
    restore.add_argument(
        "--from",
        dest="restore_from",
        metavar="PATH",
        help="start from this savepoint or retained checkpoint (a directory, or its _metadata) of "
        "an earlier run of the same scenario",
    )
    restore.add_argument(
        "--parallelism",
        dest="parallelism",
        action="append",
        default=[],
        type=parallelism_argument,
        metavar="VERTEX=N",
        help="with --from: the restored job's parallelism of VERTEX; may be given several times",
    )


RETENTION_KEY = "checkpointing.externalized_checkpoint_retention"


def add_checkpoint_arguments(parser: argparse.ArgumentParser) -> None:
    """``--externalized-checkpoint-retention`` (the scenario key, as a ``--set`` override) and
    ``--checkpoint-files`` (the simulator keeps its checkpoints in files)."""
    parser.add_argument(
        "--externalized-checkpoint-retention",
        dest="overrides",
        action="append",
        metavar="RETENTION",
        type=lambda text: (RETENTION_KEY, text.strip()),
        help="what a cancelled, failed or suspended job keeps of its checkpoints, as Flink's "
        "execution.checkpointing.externalized-checkpoint-retention: NO_EXTERNALIZED_CHECKPOINTS "
        "(Flink's default), DELETE_ON_CANCELLATION or RETAIN_ON_CANCELLATION; a finished job "
        "keeps none (the same as --set " + RETENTION_KEY + "=...)",
    )
    parser.add_argument(
        "--checkpoint-files",
        action="store_true",
        help="sim backend: keep the checkpoints in files under RUN_DIR/checkpoints/ as a Ray run does "
        "(the simulation is the same)",
    )
