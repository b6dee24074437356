"""A minimal TOML writer for scenario documents (tables, arrays of tables, scalars): used to save a generated
failing case as a scenario file that `barriersim replay` runs, and by the tests that write malformed files."""

import json


def _string(text: str) -> str:
    out = []
    for ch in text:
        if ch in '"\\':
            out.append("\\" + ch)
        elif ord(ch) < 0x20 or ord(ch) == 0x7F:
            out.append(f"\\u{ord(ch):04x}")
        else:
            out.append(ch)
    return '"' + "".join(out) + '"'


def _value(v):
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return repr(v)
    if isinstance(v, str):
        return _string(v)
    if isinstance(v, list):
        return "[" + ", ".join(_value(x) for x in v) + "]"
    raise TypeError(v)


def dumps(doc: dict) -> str:
    lines = []
    scalars = {k: v for k, v in doc.items() if not isinstance(v, (dict, list)) or (isinstance(v, list) and not any(isinstance(x, dict) for x in v))}
    for k, v in scalars.items():
        lines.append(f"{json.dumps(k)} = {_value(v)}")
    for name, table in doc.items():
        if isinstance(table, dict):
            lines.append(f"[{json.dumps(name)}]")
            nested = {k: v for k, v in table.items() if isinstance(v, list) and v and all(isinstance(x, dict) for x in v)}
            for k, v in table.items():
                if k not in nested:
                    lines.append(f"{json.dumps(k)} = {_value(v)}")
            for k, items in nested.items():
                for item in items:
                    lines.append(f"[[{json.dumps(name)}.{json.dumps(k)}]]")
                    lines += [f"{json.dumps(ik)} = {_value(iv)}" for ik, iv in item.items()]
        elif isinstance(table, list) and table and all(isinstance(x, dict) for x in table):
            for item in table:
                lines.append(f"[[{json.dumps(name)}]]")
                lines += [f"{json.dumps(ik)} = {_value(iv)}" for ik, iv in item.items()]
    return "\n".join(lines) + "\n"
