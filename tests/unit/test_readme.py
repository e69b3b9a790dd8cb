"""The README and the docs document what the code accepts: the README opens with the two commands,
the configuration reference is the parser's own table, and the command line page lists every
subcommand and flag."""

from __future__ import annotations

import re
from pathlib import Path

from use.cli import build_parser
from use.optimize.config import CONFIG_KEYS_MARKDOWN

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text()
CONFIGURATION = (ROOT / "docs" / "configuration.md").read_text()
CLI_PAGE = (ROOT / "docs" / "cli.md").read_text()


def test_readme_opens_with_the_two_commands() -> None:
    block = README.split("```")[1]
    assert "make run" in block and "make test" in block


def test_configuration_table_matches_the_parser() -> None:
    assert CONFIG_KEYS_MARKDOWN.strip() in CONFIGURATION, "docs/configuration.md: run `python docs/generate.py`"


def test_every_cli_subcommand_is_documented() -> None:
    parser = build_parser()
    subcommands = next(a for a in parser._actions if a.dest == "command").choices
    for name in subcommands:
        assert f"use {name}" in CLI_PAGE, f"docs/cli.md does not document use {name}"


def test_the_command_line_synopsis_lists_every_flag_of_each_subcommand() -> None:
    """The synopsis is where a reader looks up a subcommand's flags: each one is on its own lines
    (so every flag is documented; the prose around the synopsis says what it does)."""
    block = CLI_PAGE.split("## Synopsis\n```\n", 1)[1].split("```", 1)[0]
    synopsis: dict[str, str] = {}
    name = ""
    for line in block.splitlines():
        if line.startswith("use "):
            name = line.split()[1]
        synopsis[name] = synopsis.get(name, "") + " " + line  # indented lines continue the previous
    parser = build_parser()
    subcommands = next(a for a in parser._actions if a.dest == "command").choices
    for name, sub in subcommands.items():
        for action in sub._actions:
            for flag in action.option_strings:
                if flag.startswith("--") and flag != "--help":
                    listed = re.search(rf"(?<![\w-]){re.escape(flag)}(?![\w-])", synopsis.get(name, ""))
                    assert listed, f"use {name} {flag} is missing from the synopsis of docs/cli.md"


def test_the_readme_stays_a_short_introduction() -> None:
    """The README is what a newcomer reads first; the reference lives in docs/."""
    assert len(README.splitlines()) <= 200, "README.md: move the detail into the page of docs/ that covers it"
