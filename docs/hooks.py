"""MkDocs hook: the site's generated pages, made at build time and never written into docs/.

``reference/scenario.md`` comes from the scenario schema and ``reference/cli.md`` from the command line's argparse
parser, each through one function below (``scenario_reference`` and ``cli_reference``); the hook adds their pages to
the site's files before the navigation is built (``on_files``). Every page's GitHub-style lists are adapted to
Python-Markdown on the way (``on_page_markdown``).
"""

from __future__ import annotations

import argparse
import io
import os
import re
import tokenize
from pathlib import Path

from mkdocs.structure.files import File

GENERATED_NOTE = "<!-- generated at build time by docs/hooks.py from {source}; edit the source, not this page -->\n\n"


# -- the scenario reference ------------------------------------------------------------------------------------


def scenario_reference() -> str:
    """The scenario reference page (Markdown). The ONE place the schema is rendered: when the schema renders
    itself (``reference_markdown()``), that renderer is used, else the fallback below reads ``SCHEMA``."""
    from barriersim.scenarios import schema

    renderer = getattr(schema, "reference_markdown", None)
    body = renderer() if renderer is not None else _schema_markdown(schema)
    return GENERATED_NOTE.format(source="scenarios/schema.py") + body


def _describe_check(check) -> str:
    """The allowed values of a ``Field``'s check, read from the check helper that made it (its closure)."""
    helper = check.__qualname__.split(".<locals>")[0]
    cells = dict(zip(check.__code__.co_freevars, (c.cell_contents for c in check.__closure__ or ())))
    if helper == "_between" and {"low", "high"} <= cells.keys():
        return f"{_value(cells['low'])} to {_value(cells['high'])}"
    if helper == "_at_least" and "low" in cells:
        return f"≥ {_value(cells['low'])}"
    if helper == "_one_of" and "choices" in cells:
        return ", ".join(f"`{c}`" for c in cells["choices"])
    if helper == "_plain_name":
        return "a name without `/`, `#` or surrounding blanks"
    if check.__name__ == "<lambda>" and not cells and check.__code__.co_consts == (None,):
        return "any"
    return "see the schema"


def _escape(text: str) -> str:
    """Text for a Markdown table cell: no column breaks, no HTML tags (``<scenario>`` stays as written)."""
    return text.replace("|", "\\|").replace("<", "&lt;").replace(">", "&gt;")


def _value(v) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int) and abs(v) >= 10_000:
        return f"{v:,}"
    if isinstance(v, float) and v.is_integer() and abs(v) >= 10_000:
        return f"{v:,.0f}"
    return f"\"{v}\"" if isinstance(v, str) else str(v)


def _schema_comments(path: Path) -> dict[tuple[str, str], str]:
    """The comments of scenarios/schema.py: for each ``(section, key)`` (section ``""`` for a section's own
    comment) the ``#`` comments just above it and on its line."""
    comments: dict[tuple[str, str], str] = {}
    pending: list[str] = []
    section = ""
    depth = 0
    table = ""
    tokens = list(tokenize.generate_tokens(io.StringIO(path.read_text()).readline))
    for i, tok in enumerate(tokens):
        if tok.type == tokenize.NAME and tok.string in ("SCHEMA", "VERTEX_FIELDS", "EDGE_FIELDS") and depth == 0:
            table = tok.string
        elif tok.type == tokenize.OP and tok.string in "{[(":
            depth += 1
        elif tok.type == tokenize.OP and tok.string in "}])":
            depth -= 1
        elif tok.type == tokenize.COMMENT:
            text = tok.string.lstrip("#").strip()
            if i and tokens[i - 1].type not in (tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT):
                line_key = next((t.string.strip("\"'") for t in reversed(tokens[:i])
                                 if t.type == tokenize.STRING and t.start[0] == tok.start[0]), None)
                if line_key is not None:  # a comment after a key on its line
                    key = (section, line_key) if depth >= 2 or table != "SCHEMA" else ("", line_key)
                    comments[key] = (comments.get(key, "") + " " + text).strip()
                continue
            pending.append(text)
        elif tok.type == tokenize.STRING and tokens[i + 1].string == ":" and table:
            name = tok.string.strip("\"'")
            if table == "SCHEMA" and depth == 1:
                section = name
                key = ("", name)
            else:
                key = (section if table == "SCHEMA" else table, name)
            if pending:
                comments[key] = " ".join(pending)
            pending = []
    return comments


def _schema_markdown(schema) -> str:
    comments = _schema_comments(Path(schema.__file__))
    settable = set(schema.SETTABLE_SECTIONS)
    out = ["# Scenario files\n",
           "Every section and key a scenario file (TOML) may hold, with its type, default and allowed values, as "
           "the loader checks them (a key left out takes its default; no default: required). Keys of the sections "
           f"{', '.join(f'`[{s}]`' for s in schema.SETTABLE_SECTIONS)} can be overridden with "
           "`--set section.key=VALUE` and swept in a `[sweep]` table. The guide to scenarios, faults and actions "
           "is [Scenarios and faults](../scenarios.md).\n"]

    def table(fields: dict, scope: str) -> None:
        out.append("| key | type | default | allowed | notes |\n|---|---|---|---|---|")
        for name, f in fields.items():
            default = "required" if f.default is None else f"`{_value(f.default)}`"
            note = _escape(comments.get((scope, name), ""))
            out.append(f"| `{name}` | {f.kind.__name__} | {default} | {_describe_check(f.check)} | {note} |")
        out.append("")

    for section, fields in schema.SCHEMA.items():
        out.append(f"## `[{section}]`\n")
        if comments.get(("", section)):
            out.append(comments[("", section)] + "\n")
        if section in settable:
            out.append(f"Settable: `--set {section}.KEY=VALUE`, `[sweep]` axes `\"{section}.KEY\"`.\n")
        table(fields, section)
    out.append("## `[[job.vertex]]`\n\nA vertex of a general job graph (instead of the `[job]` shorthand).\n")
    table(schema.VERTEX_FIELDS, "VERTEX_FIELDS")
    out.append("## `[[job.edge]]`\n\nAn edge of a general job graph.\n")
    table(schema.EDGE_FIELDS, "EDGE_FIELDS")
    out.append("Faults (`[[faults]]`) and `[sweep]` are described in [Scenarios and faults](../scenarios.md), "
               "experiment actions (`[[actions]]`) and `[restore]` in [Savepoints](../savepoints.md).\n")
    return "\n".join(out)


# -- the command-line reference ----------------------------------------------------------------------------------


def cli_reference() -> str:
    """The command-line reference page (Markdown), from ``barriersim.cli``'s argparse parser."""
    from barriersim import cli

    parser = cli._parser()
    out = [GENERATED_NOTE.format(source="barriersim/cli.py"), "# Command line\n",
           f"`barriersim COMMAND ...`: {parser.description} Every command's `--help` prints the same.\n",
           "Bad input (a scenario's key, an argument, an address) gets one line and exit status 2; a violated "
           "guarantee or a failed job exit status 1; Ctrl-C 130.\n"]
    subparsers = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    helps = {a.dest: a.help for a in subparsers._choices_actions}
    for name, sub in subparsers.choices.items():
        out.append(f"## `barriersim {name}`\n")
        out.append(f"{sub.description or helps.get(name) or ''}\n")
        columns = os.environ.get("COLUMNS")
        os.environ["COLUMNS"] = "90"  # argparse wraps its usage lines to the terminal's width: the page's
        try:
            usage = sub.format_usage().removeprefix("usage: ").strip()
        finally:
            if columns is None:
                del os.environ["COLUMNS"]
            else:
                os.environ["COLUMNS"] = columns
        out.append(f"```\n{usage}\n```\n")
        rows = [a for a in sub._actions if not isinstance(a, argparse._HelpAction)]
        if rows:
            out.append("| argument | help |\n|---|---|")
            for a in rows:
                names = ", ".join(a.option_strings) or a.dest
                if a.option_strings and a.nargs != 0:
                    names += f" {a.metavar or a.dest.upper()}"
                text = a.help or ""
                if "%(" in text:
                    text = text % {"default": a.default, "prog": sub.prog}
                if a.choices:
                    text += f" (one of: {', '.join(f'`{c}`' for c in a.choices)})"
                text = _escape(text)
                out.append(f"| `{names}` | {text} |")
            out.append("")
    return "\n".join(out)


# -- the hook ----------------------------------------------------------------------------------------------------

PAGES = {
    "reference/scenario.md": scenario_reference,
    "reference/cli.md": cli_reference,
}


def github_lists(markdown: str) -> str:
    """The pages are written for GitHub's Markdown, where a list may follow a paragraph line directly and a nested
    list be indented by 2; Python-Markdown wants a blank line before a list and 4 spaces per level. This adds the
    one and doubles the other (outside fenced code)."""
    out: list[str] = []
    fenced = nested = False
    for line in markdown.split("\n"):
        if line.lstrip().startswith("```"):
            fenced = not fenced
        if not fenced:
            item = re.match(r"^(\s*)([-*]|\d+\.) ", line)
            if item and not item.group(1) and out and out[-1].strip() and not re.match(r"^(\s|[-*] |\d+\. )", out[-1]):
                out.append("")
            if item and len(item.group(1)) == 2:
                nested = True
            elif not line.startswith("  "):
                nested = False
            if nested and line.startswith("  "):
                line = "  " + line
        out.append(line)
    return "\n".join(out)


def on_page_markdown(markdown, page, config, files):
    return github_lists(markdown)


def on_files(files, config):
    for uri, render in PAGES.items():
        files.append(File.generated(config, uri, content=render()))
    return files
