"""The option tables in docs/ against the programs' `--help`, both ways: every option a
table names exists, and every option `--help` lists has its row. So the tables cannot drift
from the binaries (cachelab-proxy, cachelab-load) or the `cachelab` commands."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from cachelab.errors import UserError
from cachelab.hosts.binaries import find_binary

DOCS = Path(__file__).resolve().parents[2] / "docs"
#: An option as written: `-s`, `--server`, `-4`; not `-1)` or a range like `2-5`.
OPTION = re.compile(r"(?<![\w-])(--?[A-Za-z0-9][\w-]*)")
#: Options every program has, whose rows the tables may leave out.
HELP = {"--help", "--version"}


def _without_help(options: list[str]) -> set[str]:
    """A row or help line's options, or none if it is the help or version line."""
    return set() if HELP & set(options) else set(options)


def table_options(page: str, heading: str) -> set[str]:
    """The options named in the first column of the first table under `heading`."""
    text = (DOCS / page).read_text()
    section = text.split(f"\n{heading}\n", 1)
    assert len(section) == 2, f"docs/{page} has no heading {heading!r}"
    rows = []
    for line in section[1].splitlines():
        if line.startswith("|"):
            rows.append(line)
        elif rows:
            break
    assert len(rows) > 2, f"docs/{page}, {heading}: no table"
    found: set[str] = set()
    for row in rows[2:]:
        first = re.split(r"(?<!\\)\|", row)[1]
        code = " ".join(re.findall(r"`([^`]*)`", first))
        found |= _without_help(_options_in_code(code))
    return found


def _options_in_code(code: str) -> list[str]:
    # `--requests=N|allkeys`: what follows `=` is the value, not an option.
    return [o for part in code.split() for o in OPTION.findall(part.split("=")[0])]


def clap_options(binary: str) -> set[str]:
    """Options (and their aliases) that a clap binary's `--help` lists."""
    out = subprocess.run([str(_binary(binary)), "--help"], capture_output=True, text=True,
                         check=True).stdout
    found: set[str] = set()
    for line in out.splitlines():
        # Options start at most 6 columns in; their descriptions are indented further.
        if m := re.match(r"^ {2,6}(-.*)$", line):
            names = re.match(r"^((?:-\w, )?--?[\w-]+)", m.group(1))
            if names:
                found |= _without_help(OPTION.findall(names.group(1)))
        elif m := re.search(r"\[alias(?:es)?: ([^\]]*)\]", line):
            found |= set(OPTION.findall(m.group(1)))
    return found


def click_options(*command: str) -> set[str]:
    """Options that `cachelab COMMAND --help` lists."""
    out = subprocess.run([sys.executable, "-m", "cachelab.cli", *command, "--help"],
                         capture_output=True, text=True, check=True).stdout
    options = out.split("\nOptions:\n", 1)[1]
    found: set[str] = set()
    for line in options.splitlines():
        if m := re.match(r"^  (-\S.*?)(?: {2,}|$)", line):
            names = re.sub(r" [A-Z][\w.,]*|\s\[.*", "", m.group(1))
            found |= _without_help(OPTION.findall(names))
    return found


def _binary(name: str) -> Path:
    try:
        return find_binary(name)
    except UserError as exc:
        pytest.fail(str(exc))


def same(documented: set[str], listed: set[str], where: str) -> None:
    assert documented, f"{where}: the table names no option"
    assert not documented - listed, f"{where} names options --help does not list: " \
                                     f"{sorted(documented - listed)}"
    assert not listed - documented, f"--help lists options {where} leaves out: " \
                                    f"{sorted(listed - documented)}"


def test_the_proxy_table_is_its_help():
    same(table_options("proxy.md", "## Options"), clap_options("cachelab-proxy"),
         "docs/proxy.md")


def test_the_load_generator_table_is_its_help():
    same(table_options("load-generator.md",
                       "## Options, and their memtier_benchmark equivalents"),
         clap_options("cachelab-load"), "docs/load-generator.md")


COMMANDS = [("run",), ("report",), ("export",), ("compare",), ("capacity",),
            ("factorial",), ("model", "mm1"), ("model", "mmm"), ("model", "mva"),
            ("capture",)]


@pytest.mark.parametrize("command", COMMANDS, ids=" ".join)
def test_each_command_table_is_its_help(command):
    heading = f"## `cachelab {' '.join(command)}`"
    same(table_options("commands.md", heading), click_options(*command),
         f"docs/commands.md, {heading}")


def test_every_command_has_its_table():
    out = subprocess.run([sys.executable, "-m", "cachelab.cli", "--help"],
                         capture_output=True, text=True, check=True).stdout
    listed = set(re.findall(r"^  (\w+) ", out.split("\nCommands:\n", 1)[1], re.M))
    documented = {c[0] for c in COMMANDS} | {"proxy"}  # proxy: cachelab-proxy's options
    assert listed == documented
