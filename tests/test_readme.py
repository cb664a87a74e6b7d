"""What README.md and docs/ show a user must work: every `bigtrain ...` command in a README code
block parses with the CLI's own parser, every subcommand of the README's command table answers
`--help`, every `--set KEY=VALUE` shown in README.md or docs/*.md is accepted by the config
(`bigtrain config` would print it), every relative link and `docs/*.md#anchor` mention points to
an existing file and heading, and every repository path the docs name exists.

Catches: a subcommand or flag renamed or removed in runners/cli/app.py while the README still shows
it; a config key renamed in components/config/tree.py (or a value of the wrong type) still shown
in the docs; a docs page or heading renamed; a module moved while the docs keep its old path.
The tests at the bottom feed each check a broken text and assert it fails (mutation tests).

Only argparse and the config package run here: nothing is dispatched, nothing imports TF."""

from __future__ import annotations

import argparse
import os
import re
import shlex

import pytest

from components import config as config_lib
from runners.cli import app as cli
from tests.support.doc_pages import DOC_PAGES, FENCE, README, REPO, REPO_PATH, read, target_problem


PLACEHOLDER = re.compile(r"<[^<>\n]+>")  # <version>, <model id>: any value parses
PROGRAMS = ("bigtrain", ".venv/bin/bigtrain")
SHELL_SEPARATORS = {";", "&&", "||", "|", "&"}
ENV_ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")
SET = re.compile(r"--set[ =](?:'([^']*)'|\"([^\"]*)\"|([^\s`'\")]+))")
GENERIC_SET = re.compile(r"^[A-Z_]+=[A-Z_]+$")  # `--set KEY=VALUE` in a usage line
LINK = re.compile(r"\]\(([^)\s]+)\)")
DOC_MENTION = re.compile(r"(?<![\w/(])(docs/[\w-]+\.md)(#[\w-]+)?")


def shown_commands(text: str, languages: tuple[str, ...] | None = None) -> list[list[str]]:
    """The argv (program name dropped) of every bigtrain command in the text's code blocks.
    A line may hold several commands (`;`, `&&`, `&`, `|`); env assignments before the program
    are skipped; `<placeholders>` become a value; `\\` continues a line; `#` starts a comment.
    languages: only blocks fenced with one of these tags (docs keep usage lines and error
    transcripts in untagged blocks)."""
    commands = []
    for language, block in FENCE.findall(text):
        if languages is not None and language.strip() not in languages:
            continue
        for line in block.replace("\\\n", " ").splitlines():
            line = PLACEHOLDER.sub("1", line.strip())
            if line.startswith("$ "):
                line = line[2:]
            if not any(line.startswith(p) or f" {p} " in f" {line} " for p in PROGRAMS):
                continue
            lexer = shlex.shlex(line, posix=True, punctuation_chars=";&|")
            lexer.whitespace_split = True
            segment: list[str] = []
            for token in list(lexer) + [";"]:
                if token not in SHELL_SEPARATORS:
                    segment.append(token)
                    continue
                while segment and ENV_ASSIGNMENT.match(segment[0]):
                    segment = segment[1:]
                if segment and segment[0] in PROGRAMS:
                    commands.append(segment[1:])
                segment = []
    return commands


def parse_problems(commands: list[list[str]]) -> list[str]:
    """Commands the CLI's parser refuses (argparse exits 2), and README commands whose
    --set overrides together make no valid config."""
    problems = []
    for argv in commands:
        try:
            args = cli.build_parser().parse_args(argv)
        except SystemExit as exit_:
            if exit_.code not in (0, None):  # --help / --version exit 0
                problems.append(f"bigtrain {shlex.join(argv)}: the parser refuses it")
            continue
        overrides = getattr(args, "overrides", None)
        if overrides:
            try:
                config_lib.build_config(overrides=list(overrides))
            except config_lib.ConfigError as err:
                problems.append(f"bigtrain {shlex.join(argv)}: config error: {err}")
    return problems


def shown_overrides(text: str) -> list[tuple[str, list[str]]]:
    """Every `--set VALUE` in the text, with the overrides of its logical line (a command shown
    with several `--set`, `\\`-continued lines joined)."""
    found = []
    for line in text.replace("\\\n", " ").splitlines():
        values = ["".join(groups) for groups in SET.findall(line)]
        values = [value for value in values if not GENERIC_SET.match(value)]
        found.extend((value, values) for value in values)
    return found


def override_problems(overrides: list[tuple[str, list[str]]]) -> list[str]:
    """Overrides `bigtrain config --set VALUE` refuses: alone over tiny, and (for one that a
    cross-field rule ties to another, e.g. train.freeze needs train.init_from) also together
    with the overrides shown beside it."""
    problems = []
    for value, beside in overrides:
        try:
            config_lib.build_config(overrides=[value])
        except config_lib.ConfigError as err:
            try:
                config_lib.build_config(overrides=beside)
            except config_lib.ConfigError:
                problems.append(f"--set {value}: {err}")
    return problems


def link_problems(text: str, base_dir: str, here: str) -> list[str]:
    """Relative links ([..](path#anchor)) and bare `docs/page.md#anchor` mentions."""
    problems = []
    for target in LINK.findall(text):
        if re.match(r"^[a-z]+:", target):  # http:, https:, mailto:
            continue
        problem = target_problem(base_dir, target if not target.startswith("#") else here + target)
        if problem:
            problems.append(problem)
    for path, anchor in DOC_MENTION.findall(text):
        problem = target_problem(REPO, path + anchor)
        if problem:
            problems.append(problem)
    return problems


def path_problems(text: str) -> list[str]:
    """Repository paths named in the text (components/..., runners/..., tests/...) that do not
    exist: a module that moved while the docs kept its old place."""
    return sorted({f"{path}: no such path" for path in REPO_PATH.findall(text)
                   if not os.path.exists(os.path.join(REPO, path.rstrip(".")))})


def table_commands(text: str) -> list[list[str]]:
    """Leading words of each `bigtrain ...` cell of the README's command table, e.g.
    `bigtrain lineage runs|trace|...` -> ["lineage"]."""
    commands = []
    for cell in re.findall(r"^\| `bigtrain ([^`]*)`", text, re.M):
        words = []
        for word in cell.split():
            if not re.fullmatch(r"[a-z][a-z0-9-]*", word):
                break
            words.append(word)
        commands.append(words)
    return commands


def parser_subcommands(parser: argparse.ArgumentParser | None = None) -> set[str]:
    parser = parser or cli.build_parser()
    for action in parser._actions:  # argparse keeps subcommands only here
        if isinstance(action, argparse._SubParsersAction):
            return set(action.choices)
    return set()


def parser_nested_subcommands() -> dict[str, set[str]]:
    """command -> its own subcommands, for each command that has any (`lineage`, `export`)."""
    parser = cli.build_parser()
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            nested = {name: parser_subcommands(child) for name, child in action.choices.items()}
            return {name: children for name, children in nested.items() if children}
    return {}


ALTERNATIVES = re.compile(r"[a-z][a-z0-9-]*(?:\\\|[a-z][a-z0-9-]*)*")  # runs\|trace\|diff


def table_nested_subcommands(text: str) -> dict[str, set[str]]:
    """command -> the subcommands its README table cells name after it (`lineage runs\|trace`)."""
    listed: dict[str, set[str]] = {}
    for cell in re.findall(r"^\| `bigtrain ([^`]*)`", text, re.M):
        words = cell.split()
        if len(words) > 1 and ALTERNATIVES.fullmatch(words[1]):
            listed.setdefault(words[0], set()).update(words[1].split("\\|"))
    return listed


# ----------------------------------------------------------------------------------------------
# The real README and docs.


# The pages with a size bound (issue 60: docs describe today), and where what no longer fits goes.
HISTORY = "a dated file benchmarks/results/<date>-<topic>.md, linked from where it was"
PAGE_BOUNDS = {"README.md": (150, "a docs/*.md page (the README is one screen)"),
               "docs/benchmarks.md": (400, HISTORY), "docs/operations.md": (500, HISTORY)}


def size_problems(bounds: dict = PAGE_BOUNDS, repo: str = REPO) -> list[str]:
    """Each page longer than its bound, with its size and where its history or detail goes."""
    problems = []
    for page, (bound, goes_to) in bounds.items():
        lines = len(read(os.path.join(repo, page)).splitlines())
        if lines > bound:
            problems.append(f"{page}: {lines} lines, over its bound of {bound}: move history or "
                            f"long detail to {goes_to}")
    return problems


def test_pages_fit_their_bounds():
    assert size_problems() == []


def test_readme_commands_parse():
    commands = shown_commands(read(README))
    assert len(commands) >= 10, commands  # the extraction found the README's commands
    assert parse_problems(commands) == []


@pytest.mark.parametrize("page", DOC_PAGES, ids=os.path.basename)
def test_docs_bash_commands_parse(page):
    assert parse_problems(shown_commands(read(page), languages=("bash",))) == []


@pytest.mark.parametrize("words", table_commands(read(README)), ids=" ".join)
def test_table_subcommand_help(words, capsys):
    with pytest.raises(SystemExit) as exit_:
        cli.main(words + ["--help"])
    assert exit_.value.code == 0
    assert "usage:" in capsys.readouterr().out


def test_table_lists_every_subcommand():
    listed = {words[0] for words in table_commands(read(README)) if words}
    assert listed == parser_subcommands()


def test_table_lists_every_nested_subcommand():
    """The table is the README's list of commands: `lineage` and `plumbing` list each of theirs."""
    nested = parser_nested_subcommands()
    assert {"lineage", "export", "plumbing"} <= set(nested), nested  # the walk found them
    listed = table_nested_subcommands(read(README))
    assert {name: listed.get(name, set()) for name in nested} == nested


def test_every_shown_override_is_accepted():
    overrides = shown_overrides("\n".join(read(p) for p in [README] + DOC_PAGES))
    assert len(overrides) >= 20, overrides
    assert override_problems(overrides) == []


@pytest.mark.parametrize("page", [README] + DOC_PAGES, ids=os.path.basename)
def test_links_and_paths_resolve(page):
    text = read(page)
    assert link_problems(text, os.path.dirname(page), os.path.basename(page)) == []
    assert path_problems(text) == []


# ----------------------------------------------------------------------------------------------
# Mutation tests: each check fails on a broken text.

BROKEN = """
```bash
bigtrain run --set train.nope=1
FOO=1 .venv/bin/bigtrain runn --home h; echo $?
bigtrain lineage runs --no-such-flag
bigtrain config --set train.train_steps=many
```
See [data](docs/nope.md), [data](docs/data.md#no-such-heading), docs/benchmarks.md#nowhere and
`components/text_example_gen/readers.py`.
"""


def test_mutations_fail():
    commands = shown_commands(BROKEN)
    assert commands == [["run", "--set", "train.nope=1"], ["runn", "--home", "h"],
                        ["lineage", "runs", "--no-such-flag"],
                        ["config", "--set", "train.train_steps=many"]]
    problems = parse_problems(commands)
    assert [p.split(":")[0] for p in problems] == [
        "bigtrain run --set train.nope=1", "bigtrain runn --home h",
        "bigtrain lineage runs --no-such-flag", "bigtrain config --set train.train_steps=many"]
    assert len(override_problems(shown_overrides(BROKEN))) == 2
    assert len(link_problems(BROKEN, REPO, "README.md")) == 3
    assert path_problems(BROKEN) == ["components/text_example_gen/readers.py: no such path",
                                     "docs/nope.md: no such path"]
    assert table_commands("| `bigtrain nope X` | x |\n") == [["nope"]]
    old_rows = ("| `bigtrain lineage runs\\|trace\\|diff\\|graph\\|why` | x |\n"
                "| `bigtrain plumbing train-worker` | x |\n| `bigtrain export hf SOURCE` | x |\n")
    assert table_nested_subcommands(old_rows) == {
        "lineage": {"runs", "trace", "diff", "graph", "why"}, "plumbing": {"train-worker"},
        "export": {"hf"}}
    assert table_nested_subcommands(old_rows) != parser_nested_subcommands()
    with pytest.raises(SystemExit) as exit_:
        cli.main(["nope", "--help"])
    assert exit_.value.code != 0


def test_size_mutation_fails(tmp_path):
    """A page one line over its bound fails naming the page, its size and where history goes."""
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "benchmarks.md").write_text("line\n" * 401)
    (tmp_path / "docs" / "operations.md").write_text("line\n" * 500)
    assert size_problems({page: PAGE_BOUNDS[page] for page in ("docs/benchmarks.md",
                                                               "docs/operations.md")},
                         str(tmp_path)) == [
        "docs/benchmarks.md: 401 lines, over its bound of 400: move history or long detail to a "
        "dated file benchmarks/results/<date>-<topic>.md, linked from where it was"]
