"""MkDocs hook: the site's generated pages, made at build time and never written into docs/.

``reference/scenario.md`` comes from the scenario schema and ``reference/cli.md`` from the command line's argparse
parser, each through one function below (``scenario_reference`` and ``cli_reference``); the hook adds their pages to
the site's files before the navigation is built (``on_files``). Every page's GitHub-style lists are adapted to
Python-Markdown on the way (``on_page_markdown``).
"""

from __future__ import annotations

import argparse
import os
import re

from mkdocs.structure.files import File

GENERATED_NOTE = "<!-- generated at build time by docs/hooks.py from {source}; edit the source, not this page -->\n\n"


# -- the scenario reference ------------------------------------------------------------------------------------


def scenario_reference() -> str:
    """The scenario reference page (Markdown): the ONE place the schema is rendered is the schema itself
    (``scenarios.schema.reference_markdown``)."""
    from barriersim.scenarios.schema import reference_markdown

    return GENERATED_NOTE.format(source="scenarios/schema.py") + reference_markdown()


def _escape(text: str) -> str:
    """Text for a Markdown table cell: no column breaks, no HTML tags (``<scenario>`` stays as written)."""
    return text.replace("|", "\\|").replace("<", "&lt;").replace(">", "&gt;")


# -- the command-line reference ----------------------------------------------------------------------------------


def cli_reference() -> str:
    """The command-line reference page (Markdown), from ``barriersim.cli``'s argparse parser."""
    from barriersim import cli

    parser = cli._parser()
    out = [
        GENERATED_NOTE.format(source="barriersim/cli.py"),
        "# Command line\n",
        f"`barriersim COMMAND ...`: {parser.description} Every command's `--help` prints the same.\n",
        "Bad input (a scenario's key, an argument, an address) gets one line and exit status 2; a violated "
        "guarantee or a failed job exit status 1; Ctrl-C 130.\n",
    ]
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
