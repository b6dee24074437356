"""Lists of tables tagged by their ``type`` (a scenario's ``[[faults]]`` and ``[[actions]]``), to and from plain
values and JSON.

How this works: ``decode_tagged_tables`` checks that the plain value is a list of tables, that each names a known
``type``, and hands each table with its class and its place (``faults[2]``) to the caller's ``build``, which checks
the table's fields (``table_fields`` gives them, refusing unknown ones); every problem is the caller's error type
with a one-line message naming the place. ``tables_from_json`` reads the JSON form (a replay command's) with the
same kind of error, ``tables_to_json`` writes it compactly and in a stable order.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Collection, Iterator, Mapping
from typing import Any


def decode_tagged_tables(
    items: Any,
    where: str,
    types: Mapping[str, type],
    kind: str,
    error: Callable[[str], Exception],
    not_a_list: str,
    build: Callable[[type, dict[str, Any], str], Any],
) -> list[Any]:
    """The values ``build(cls, table, place)`` makes of the tables of ``items``; ``kind`` names a table's type in
    messages ("fault", "action"), ``not_a_list`` is the message when ``items`` is not a list."""
    if not isinstance(items, list):
        raise error(not_a_list)
    values = []
    for i, item in enumerate(items):
        at = f"{where}[{i}]"
        if not isinstance(item, dict) or "type" not in item:
            raise error(f"{at}.type: is required (one of {', '.join(types)})")
        cls = types.get(item["type"]) if isinstance(item["type"], str) else None
        if cls is None:
            raise error(f"{at}.type: unknown {kind} {item['type']!r} (known: {', '.join(types)})")
        values.append(build(cls, item, at))
    return values


def table_fields(
    item: Mapping[str, Any], known: Collection[str], at: str, error: Callable[[str], Exception]
) -> Iterator[tuple[str, Any]]:
    """The ``(key, value)`` fields of one tagged table other than its ``type``; a key not in ``known`` is ``error``
    naming the field and the known ones."""
    for key, value in item.items():
        if key == "type":
            continue
        if key not in known:
            raise error(f"{at}.{key}: unknown field for {item['type']} (known: {', '.join(known)})")
        yield key, value


def tables_from_json(text: str, where: str, error: Callable[[str], Exception]) -> Any:
    """The plain value of JSON ``text``; invalid JSON is ``error`` naming ``where``."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise error(f"{where}: not valid JSON ({e.msg} at column {e.colno})") from None


def tables_to_json(plain: Any) -> str:
    return json.dumps(plain, separators=(",", ":"), sort_keys=True)
