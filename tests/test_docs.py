"""Every name README.md and docs/*.md give a user exists in the code, read from the code itself:
presets from `components.config.presets.PRESETS`, config options (`section.key`) from the
dataclass tree of `components/config/tree.py`, commands, subcommands and their options from the
CLI's argparse parser (`runners.cli.app.build_parser`), make targets from the Makefile; and the
layout page (docs/layout.md) names every product module and sub-package, in the row of its
package, and nothing that is not in the tree. The other way round, what the code says about the
docs is true: every `docs/page.md`, `#anchor`, quoted heading and README heading a comment,
docstring or message cites exists, every repository path it names exists, and the header of
`components/config/tree.py` lists every section.

tests/test_readme.py checks that whole commands parse and `--set` values validate; this file
checks every name, also in prose and in inline code. The tests at the bottom feed each check a
broken text and assert it fails (mutation tests). Only argparse and the config package run here."""

from __future__ import annotations

import argparse
import dataclasses
import os
import re

import pytest

from components import config as config_lib
from components.config import presets as presets_lib
from runners.cli import app as cli
from tests.support.import_graph import LAYERS
from tests.support.doc_pages import (DOC_PAGES, FENCE, README, REPO, REPO_PATH, anchors, read,
                                     slug, target_problem)

PAGES = [README] + DOC_PAGES
LAYOUT = os.path.join(REPO, "docs", "layout.md")
MAKEFILE = os.path.join(REPO, "Makefile")
PRODUCT_FOLDERS = ("components", "pipeline", "runners", "schemas")
INLINE_CODE = re.compile(r"`([^`\n]+)`")


def code_texts(text: str) -> list[str]:
    """Each code block's lines and each inline code span: where commands and targets are shown."""
    texts = []
    for _, block in FENCE.findall(text):
        texts.extend(block.replace("\\\n", " ").splitlines())
    texts.extend(INLINE_CODE.findall(FENCE.sub("", text)))
    return texts


# ----------------------------------------------------------------------------------------------
# Presets.

PRESET_LIST = re.compile(r"a preset \(((?:`\w+`(?:, )?)+)\)")  # README: "a preset (`tiny`, ...)"
PRESET_MENTION = re.compile(r"--preset[ =]([a-z]\w*)|`([a-z]\w*)`(?: and the `\w+`)? presets?\b"
                            r"|the `\w+` and the `([a-z]\w*)` presets")


def preset_table(text: str) -> list[str]:
    """The first column of the table under the `## Presets` heading of docs/configuration.md."""
    section = re.search(r"^## Presets\n(.*?)(?=^#|\Z)", text, re.M | re.S)
    return re.findall(r"^\| `(\w+)` \|", section.group(1), re.M) if section else []


def preset_problems(text: str) -> list[str]:
    """Presets the text names (`--preset X`, "the `X` preset") that PRESETS lacks."""
    named = {name for groups in PRESET_MENTION.findall(text) for name in groups if name}
    return sorted(f"preset {name!r}: not in PRESETS" for name in named - set(presets_lib.PRESETS))


def test_readme_lists_every_preset():
    lists = PRESET_LIST.findall(read(README))
    assert len(lists) == 1, lists
    assert re.findall(r"`(\w+)`", lists[0]) == list(presets_lib.PRESETS)


def test_configuration_page_has_a_row_per_preset():
    assert preset_table(read(os.path.join(REPO, "docs", "configuration.md"))) == list(presets_lib.PRESETS)


@pytest.mark.parametrize("page", PAGES, ids=os.path.basename)
def test_named_presets_exist(page):
    assert preset_problems(read(page)) == []


# ----------------------------------------------------------------------------------------------
# Config options.


def is_section(field: dataclasses.Field) -> bool:
    """A field holding a dataclass of its own (`data`, `tune.space`), not a value."""
    factory = field.default_factory
    return isinstance(factory, type) and dataclasses.is_dataclass(factory)


def option_paths(cls=config_lib.Config, prefix: str = "") -> set[str]:
    """Every dotted path of the config tree, sections and sub-sections included."""
    paths = set()
    for field in dataclasses.fields(cls):
        path = prefix + field.name
        paths.add(path)
        if is_section(field):
            paths |= option_paths(field.default_factory, path + ".")
    return paths


def sections() -> list[str]:
    return [f.name for f in dataclasses.fields(config_lib.Config) if is_section(f)]


FILE_SUFFIX = re.compile(r"\.(py|md|sqlite|tflite|yaml|json|pbtxt|txt|html|safetensors|gguf)$")
MISTYPED_EXAMPLE = re.compile(r"unknown config key '[^']*'")  # an error message showing a typo


def option_problems(text: str) -> list[str]:
    """`section.key[.key]` names in the text that are not in the config tree. Not options:
    file names (`push.py`), method calls (`model.quantize(...)`), dotted module paths."""
    name = re.compile(r"(?<![\w./<>-])((?:%s)(?:\.[a-z_][a-z0-9_]*)+)(?![\w(])" % "|".join(sections()))
    known = option_paths()
    named = {m for m in name.findall(MISTYPED_EXAMPLE.sub("", text)) if not FILE_SUFFIX.search(m)}
    return sorted(f"{m}: no such config option" for m in named - known)


@pytest.mark.parametrize("page", PAGES, ids=os.path.basename)
def test_named_options_exist(page):
    assert option_problems(read(page)) == []


def header_sections(doc: str) -> list[str]:
    """The sections components/config/tree.py's docstring lists: "a frozen `Config` (data, ...)"."""
    found = re.search(r"frozen `Config` \(([^)]*)\)", " ".join(doc.split()))
    return found.group(1).split(", ") if found else []


def test_tree_header_names_every_section():
    from components.config import tree
    assert header_sections(tree.__doc__) == sections()


def test_configuration_page_has_a_row_per_section():
    rows = re.findall(r"^\| `(\w+)` \|", read(os.path.join(REPO, "docs", "configuration.md")), re.M)
    assert set(sections()) <= set(rows), sorted(set(sections()) - set(rows))


# ----------------------------------------------------------------------------------------------
# Commands, subcommands and their options.

# A command is `bigtrain ...` at the start of a shell segment, after any VAR=value assignments
# (`airflow dags trigger bigtrain` names a DAG, not the program).
COMMAND = re.compile(r"^\s*(?:\$ )?(?:[A-Za-z_]\w*=\S*\s+)*(?:\.venv/bin/)?bigtrain (.*)")
SEGMENT_SEPARATOR = re.compile(r" (?:\||\|\||&&|#|>|2>) |;")


def subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:  # argparse keeps subcommands only here
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def positionals(parser: argparse.ArgumentParser) -> list[argparse.Action]:
    """The parser's positional slots in order: a subcommand, `compile`'s target, a PROMPT."""
    return [action for action in parser._actions if not action.option_strings]


def option_takes_value(parser: argparse.ArgumentParser, option: str) -> bool | None:
    """None: the parser has no such option."""
    action = parser._option_string_actions.get(option)
    return None if action is None else action.nargs != 0


NAMES = re.compile(r"[a-z][a-z0-9-]*(?:\\?\|[a-z][a-z0-9-]*)*")  # run, kubeflow|airflow


def command_problems(words: list[str]) -> list[str]:
    """Walk `bigtrain WORDS` down the parser: a word in a slot with choices (a subcommand,
    `compile`'s target; `a|b` names several) must be one of them, each option must belong to the
    parser it follows. A placeholder (COMMAND, <id>, [config options]) in a subcommand's slot ends
    the walk."""
    parser, path, problems = cli.build_parser(), "bigtrain", []
    slots, words = positionals(parser), iter(words)
    for word in words:
        word = word.strip("[]").rstrip(":,")
        if word.startswith("-"):
            option = word.split("=", 1)[0]
            takes_value = option_takes_value(parser, option)
            if takes_value is None:
                problems.append(f"{path} {option}: no such option")
            elif takes_value and "=" not in word:
                next(words, None)
            continue
        slot = slots.pop(0) if slots else None
        if slot is None or not slot.choices or not NAMES.fullmatch(word):
            if isinstance(slot, argparse._SubParsersAction):
                break  # a placeholder where a subcommand goes
            continue  # a positional value (PROMPT, FILE) or placeholder
        names = word.replace("\\|", "|").split("|")
        problems.extend(f"{path} {name}: no such command" for name in names if name not in slot.choices)
        if isinstance(slot, argparse._SubParsersAction):
            if names[0] not in slot.choices:
                break
            parser, path = slot.choices[names[0]], f"{path} {names[0]}"
            slots = positionals(parser)
    return problems


def shown_command_words(text: str) -> list[list[str]]:
    """The words after `bigtrain` of every command in the text's code (blocks and inline)."""
    found = []
    for code in code_texts(text):
        for segment in SEGMENT_SEPARATOR.split(code + " "):
            match = COMMAND.match(segment)
            if match:
                found.append(match.group(1).split())
    return found


@pytest.mark.parametrize("page", PAGES, ids=os.path.basename)
def test_named_commands_exist(page):
    shown = shown_command_words(read(page))
    assert [problem for words in shown for problem in command_problems(words)] == []


def shown_subcommand_pairs(shown: list[list[str]]) -> set[tuple[str, str]]:
    """(command, subcommand) of each shown command (`lineage runs|trace` gives two)."""
    return {(words[0], name) for words in shown if len(words) > 1 and NAMES.fullmatch(words[1])
            for name in words[1].replace("\\|", "|").split("|")}


def parser_subcommand_pairs() -> set[tuple[str, str]]:
    return {(name, child) for name, parser in subcommands(cli.build_parser()).items()
            for child in subcommands(parser)}


def test_commands_are_found():
    """Every command and subcommand is shown in use somewhere in the README or docs/."""
    shown = shown_command_words("\n".join(read(page) for page in PAGES))
    assert len(shown) >= 60, len(shown)
    assert {words[0] for words in shown if words} >= set(subcommands(cli.build_parser()))
    assert ("lineage", "summary") in parser_subcommand_pairs()  # the walk reaches the second level
    assert parser_subcommand_pairs() - shown_subcommand_pairs(shown) == set()


# ----------------------------------------------------------------------------------------------
# Make targets.

MAKE = re.compile(r"(?:^|(?<=[\s;(]))make((?: +[A-Z_]+=(?:\"[^\"]*\"|'[^']*'|\S*))*) +([a-z][\w-]*)")


def make_targets() -> set[str]:
    return set(re.findall(r"^([a-z][\w-]*):(?!=)", read(MAKEFILE), re.M))


def make_problems(text: str) -> list[str]:
    named = {match.group(2) for code in code_texts(text) for match in MAKE.finditer(code)}
    return sorted(f"make {name}: no such target" for name in named - make_targets())


@pytest.mark.parametrize("page", PAGES, ids=os.path.basename)
def test_named_make_targets_exist(page):
    assert make_problems(read(page)) == []


def test_ci_runs_the_first_command_on_a_valid_budget():
    """.ci/run runs the suite and `make run` (the README's first command); its --set budget is a
    valid config that keeps the default input."""
    script = read(os.path.join(REPO, ".ci", "run"))
    assert re.search(r"^\s*make test\b", script, re.M) and re.search(r"^  \$NICE make run ARGS=", script, re.M)
    budget = re.findall(r"--set (\S+?)\"?$|--set (\S+?)[ \"]", script, re.M)
    overrides = ["".join(groups) for groups in budget]
    assert len(overrides) >= 3, overrides
    config = config_lib.build_config(overrides=overrides)
    assert config.data.input == config_lib.DataConfig().input == "<stdlib>/**/*.py"
    assert config.train.train_steps < config_lib.TrainConfig().train_steps


# ----------------------------------------------------------------------------------------------
# The layout page: one row per package, every module named in its package's row.

LAYOUT_ROW = re.compile(r"^\| (\d+) \| `([\w/]+/)` \| (.*) \|$", re.M)
NAMED_PATH = re.compile(r"`([\w/]+(?:\.py|\.pbtxt|/))`")


def layout_rows(text: str) -> dict[str, tuple[int, set[str]]]:
    """package folder -> (rank, paths named in its row, each joined to the package)."""
    return {package: (int(rank), {package + name for name in NAMED_PATH.findall(holds)})
            for rank, package, holds in LAYOUT_ROW.findall(text)}


def product_paths(repo: str = REPO) -> set[str]:
    """Every product module (not __init__.py), data file of schemas/ and sub-folder, from the tree."""
    found = set()
    for top in PRODUCT_FOLDERS:
        for folder, subfolders, files in os.walk(os.path.join(repo, top)):
            subfolders[:] = sorted(d for d in subfolders if d != "__pycache__")
            relative = os.path.relpath(folder, repo).replace(os.sep, "/") + "/"
            found.add(relative)
            found.update(relative + name for name in files
                         if name.endswith((".py", ".pbtxt")) and name != "__init__.py")
    return found


def layout_problems(text: str, tree: set[str]) -> list[str]:
    rows = layout_rows(text)
    problems = [f"{path}: not in the tree" for _, named in rows.values()
                for path in sorted(named - tree)]
    for path in sorted(tree - set(rows)):
        owners = [package for package in rows if path.startswith(package)]
        if not owners:
            if path.count("/") > 1 or not path.endswith("/"):  # components/ alone holds packages
                problems.append(f"{path}: no row for its package")
            continue
        if path not in rows[max(owners, key=len)][1]:
            problems.append(f"{path}: not named in the row of {max(owners, key=len)}")
    for module, rank in LAYERS:
        package = module.replace(".", "/") + "/"
        if module != "components" and rows.get(package, (None,))[0] != rank:
            problems.append(f"{package}: rank {rank} in tests/test_layers.py, "
                            f"{rows.get(package, ('no row',))[0]} on the page")
    return problems


def test_layout_page_names_every_module():
    assert layout_problems(read(LAYOUT), product_paths()) == []


# ----------------------------------------------------------------------------------------------
# Mutation tests: each check fails on a broken text or tree.

BROKEN = """
A config is a preset (`tiny`, `small`), e.g. `bigtrain config --preset huge`, or the `mini` preset.
Set `train.train_stepz` or `tune.space.widths`; not options: `push.py`, `model.quantize("int8")`,
`unknown config key 'train.warmup_stesp'`, `components.push.push_model`.

```bash
bigtrain lineage runs --json; bigtrain lineage treace latest
bigtrain --home h run --until TextExampleGen --forse
make run ARGS="--set x=1" && make tests
```
`bigtrain compile kubeflow|airflaw --out FILE`, `bigtrain run --version`, `make objectstore-start`.
"""


def test_mutations_fail():
    assert re.findall(r"`(\w+)`", PRESET_LIST.findall(BROKEN)[0]) != list(presets_lib.PRESETS)
    assert preset_problems(BROKEN) == ["preset 'huge': not in PRESETS", "preset 'mini': not in PRESETS"]
    assert preset_table("## Presets\n\n| `tiny` | x |\n") != list(presets_lib.PRESETS)
    assert option_problems(BROKEN) == ["train.train_stepz: no such config option",
                                       "tune.space.widths: no such config option"]
    assert [p for words in shown_command_words(BROKEN) for p in command_problems(words)] == [
        "bigtrain lineage treace: no such command", "bigtrain run --forse: no such option",
        "bigtrain compile airflaw: no such command", "bigtrain run --version: no such option"]
    assert make_problems(BROKEN) == ["make objectstore-start: no such target",
                                     "make tests: no such target"]


def test_section_and_subcommand_mutations_fail():
    old_header = ("A run is described by a frozen `Config` (data, model, train, eval, export, runtime,\n"
                  "orchestrator, paths, metadata, tune). Presets (presets.py) build one")
    assert header_sections(old_header) != sections()
    assert "push" not in header_sections(old_header)
    shown = shown_command_words("```bash\nbigtrain lineage runs|trace|diff\nbigtrain export hf x\n```")
    assert parser_subcommand_pairs() - shown_subcommand_pairs(shown) >= {
        ("lineage", "summary"), ("plumbing", "run-kfp-spec")}


def test_layout_mutations_fail():
    text, tree = read(LAYOUT), product_paths()
    renamed = text.replace("`heap.py`", "`heaps.py`")
    assert layout_problems(renamed, tree) == ["components/common/heaps.py: not in the tree",
                                              "components/common/heap.py: not named in the row of "
                                              "components/common/"]
    new_package = tree | {"components/newroom/", "components/newroom/thing.py"}
    assert layout_problems(text, new_package) == ["components/newroom/: no row for its package",
                                                  "components/newroom/thing.py: no row for its package"]
    assert layout_problems(text.replace("| 7 | `components/push/`", "| 8 | `components/push/`"), tree) \
        == ["components/push/: rank 7 in tests/test_layers.py, 8 on the page"]


# ----------------------------------------------------------------------------------------------
# What the code says about the docs: every page, heading and repository path that a comment, a
# docstring or a message of the code (product, tests, benchmarks, build files) cites exists.

CODE_FOLDERS = ("components", "pipeline", "runners", "schemas", "tests", "benchmarks")
BUILD_FILES = ("Makefile", "Dockerfile", "pyproject.toml", ".ci/run")
# The checkers themselves: their mutation inputs cite missing pages and paths on purpose.
CHECKERS = {"tests/test_readme.py", "tests/test_docs.py"}
# Mutation inputs of other checks name made-up modules (tests/test_tiers.py, the function length).
MADE_UP_PATHS = CHECKERS | {"tests/test_tiers.py", "tests/test_function_length.py"}
CONTINUATION = re.compile(r"[ \t]*\n[ \t]*(?:#+[ \t]*)?")  # a comment or docstring's next line
# docs/page.md, docs/page.md#anchor, docs/page.md, "Heading" / ("Heading") / "Heading"
DOC_CITATION = re.compile(r'(?<![\w/])(docs/[\w-]+\.md)(#[\w-]+)?(?:,? \(?"([^"]+)")?')
# (README, Heading) or (see README, Heading): a section of README.md (not a model card's README.md)
README_CITATION = re.compile(r"\bREADME(?!\.md)(?:'s)?, \"?([A-Za-z][\w ,-]*?)\"?[).;:]")
# "(README)", "see README": the one-screen README holds no details; cite a docs page's heading.
README_BARE = re.compile(r"\((?:see )?README\)|\bsee README\b(?!,)")
# Documents this repository does not have, whatever a comment calls them.
NAMED_DOCUMENT = re.compile(r"\b(?:ARCHITECTURE|CONTRIBUTING|HACKING|DESIGN|CHANGELOG|TESTING)\b"
                            r"|\b(?:developer|style|contributor)(?:'s)? guide\b|\bdesign doc\b")


def code_files(repo: str = REPO) -> list[str]:
    """Relative paths of every source file of the code folders and the build files."""
    found = [name for name in BUILD_FILES if os.path.exists(os.path.join(repo, name))]
    for top in CODE_FOLDERS:
        for folder, subfolders, files in os.walk(os.path.join(repo, top)):
            subfolders[:] = sorted(d for d in subfolders if d != "__pycache__")
            found += [os.path.relpath(os.path.join(folder, name), repo) for name in sorted(files)
                      if name.endswith((".py", ".sh", ".in"))]
    return found


def heading_cited(page: str, section: str) -> bool:
    """A heading of the page starts with the cited words, whole words only ("Loss spikes" cites
    "Loss spikes: rollback"; "Recipe" does not cite "Recipes")."""
    cited = slug(section)
    return any(anchor == cited or anchor.startswith(cited + "-")
               for anchor in anchors(os.path.join(REPO, page)))


def citation_problems(text: str) -> list[str]:
    """Cited pages, anchors and headings that do not exist, and documents the repository lacks."""
    text = CONTINUATION.sub(" ", text)
    problems = []
    for page, anchor, section in DOC_CITATION.findall(text):
        problem = target_problem(REPO, page + anchor)
        if problem:
            problems.append(problem)
        elif section and not heading_cited(page, section):
            problems.append(f'{page}, "{section}": no such heading')
    for section in README_CITATION.findall(text):
        if not heading_cited("README.md", section):
            problems.append(f"README, {section}: no such heading")
    problems += [f"{cited}: cite a heading" for cited in README_BARE.findall(text)]
    problems += [f"{name}: no such document" for name in NAMED_DOCUMENT.findall(text)]
    return problems


def code_path_problems(text: str) -> list[str]:
    """Repository paths the text names that do not exist; `module.function` and a module named
    without `.py` count as the module's file."""
    def exists(path: str) -> bool:
        candidates = (path, path + ".py", path.rsplit(".", 1)[0] + ".py")
        return any(os.path.exists(os.path.join(REPO, c)) for c in candidates)
    return sorted({f"{path}: no such path" for path in REPO_PATH.findall(text)
                   if not exists(path.rstrip("."))})


def test_code_cites_existing_docs_and_paths():
    problems = {}
    for name in code_files():
        text = read(os.path.join(REPO, name))
        found = ((citation_problems(text) if name not in CHECKERS else [])
                 + (code_path_problems(text) if name not in MADE_UP_PATHS else []))
        if found:
            problems[name] = found
    assert problems == {}


def test_code_citations_are_found():
    """The extraction sees the code's citations (a regex that matched nothing would pass)."""
    texts = [CONTINUATION.sub(" ", read(os.path.join(REPO, name))) for name in code_files()
             if name not in CHECKERS]
    assert sum(len(DOC_CITATION.findall(text)) for text in texts) >= 80
    assert sum(1 for text in texts for c in DOC_CITATION.findall(text) if c[2]) >= 10


BROKEN_CODE = '''
# zlib's default 6 for somewhat larger shards (see README, data stage figures).
# and packs more bytes per token (README, Tokenizers).
# decodes it as one (a limitation of the library, see README). A space as U+2581 (README).
"""(docs/layout.md, ARCHITECTURE's rules of thumb). Reads on one screen (the developer guide).
The table (docs/benchmarks.md, "Recipe sweep") is this script's output; docs/data.md#nowhere,
docs/nope.md. A model card's README.md, config.json and (docs/training.md, "Loss
spikes") are fine; (docs/training.md, "Loss spike") is half a word."""
# Hugging Face layout out and in (components/hf); components/model/layers.attend is fine.
'''


def test_code_citation_mutations_fail():
    assert citation_problems(BROKEN_CODE) == [
        'docs/benchmarks.md, "Recipe sweep": no such heading',
        "docs/data.md#nowhere: no heading with anchor #nowhere", "docs/nope.md: no such file",
        'docs/training.md, "Loss spike": no such heading',
        "README, data stage figures: no such heading", "README, Tokenizers: no such heading",
        "see README: cite a heading", "(README): cite a heading",
        "ARCHITECTURE: no such document", "developer guide: no such document"]
    assert code_path_problems(BROKEN_CODE) == ["components/hf: no such path",
                                               "docs/nope.md: no such path"]

