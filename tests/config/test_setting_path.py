"""`bigtrain run --set train.learning_rate=X` to the optimizer, as a table the code keeps true
(issue 60, item 2: the setting reaches the optimizer in at most 6 product files; docs/layout.md
"Follow one setting").

HOPS lists the path's functions in order: (file, function, opens, the names it hands on to).
With `ast` each hop's function exists in its file and names each of its next hops (a call, or a
reference where a framework makes the call: argparse's `func=cmd_run`, the Trainer node's executor
class and its `run_fn` path), every hop but the first is named by an earlier one, and a hop takes
the Config back only from hops (`config = f(...)`, `return f(config)`: a function of a new file
that rewrites or re-encodes it on the way must become a row, and be classified). A file
*opens* the setting when one of its path functions reads or transforms the `train` section or the
value (parses, types, encodes, decodes, uses it); the others *forward* the whole args, Config or
payload unopened: a forwarding hop never touches an attribute `train` or `learning_rate`, nor the
key "train" or "learning_rate" (checked in its body, nested functions included). The opening
files are at most MAX_OPENING. SIDE_READERS read the setting and hand nothing on: listed and
checked to be reached from the path, not counted. BRANCHES are the hops a non-default setting
adds (each checked the same way; each branch alone stays within MAX_OPENING)."""

from __future__ import annotations

import ast
import functools
import pathlib
from typing import NamedTuple

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
MAX_OPENING = 6
SETTING = ("train", "learning_rate")   # what a forwarding hop may not touch


class Hop(NamedTuple):
    file: str
    function: str          # "name" or "Class.name"
    opens: bool
    next: tuple[str, ...] = ()
    why: str = ""


CLI, OPTIONS, RUN = "runners/cli/app.py", "runners/cli/options.py", "runners/local/run.py"
LOADING, STAGES = "components/config/loading.py", "components/config/stages.py"
PIPELINE, RUN_FN = "pipeline/pipeline.py", "components/training/run_fn.py"
LOOP, OPTIMIZER = "components/training/loop.py", "components/training/optimizer.py"
HELDOUT, METADATA = "components/config/heldout.py", "runners/local/metadata.py"
EVAL_HOMES = "runners/local/eval_homes.py"

HOPS = (
    Hop(CLI, "_add_run", False, ("config_options", "cmd_run"), "the run parser; func=cmd_run"),
    Hop(OPTIONS, "config_options", False, (), "--set appends the text to args.overrides"),
    Hop(CLI, "cmd_run", False, ("resolve_config", "run_command")),
    Hop(OPTIONS, "resolve_config", False, ("build_config", "merge", "with_metadata_uri"),
        "args.overrides, text unopened; the Beam options merged into runtime"),
    Hop(LOADING, "build_config", True, ("parse_override", "merge", "with_decontamination",
                                        "validate")),
    Hop(LOADING, "parse_override", True, (), "the text -> {'train': {'learning_rate': 0.002}}"),
    Hop(LOADING, "merge", True, ("_coerce",), "into the typed TrainConfig, a finite float"),
    Hop(HELDOUT, "with_decontamination", False, (), "the Config again, eval sets into data"),
    Hop(METADATA, "with_metadata_uri", False, ("merge",), "the Config again, its metadata set"),
    Hop(RUN, "run_command", False, ("_plan_places", "_locked_run")),
    Hop(RUN, "_plan_places", False, ("resolve_eval_homes",)),
    Hop(EVAL_HOMES, "resolve_eval_homes", False, ("merge",), "the Config again, home: resolved"),
    Hop(RUN, "_locked_run", False, ("_run_pipeline",)),
    Hop(RUN, "_run_pipeline", False, ("run_local",)),
    Hop(RUN, "run_local", False, ("create_pipeline",)),
    Hop(PIPELINE, "create_pipeline", False, ("training_stages",)),
    Hop(PIPELINE, "training_stages", False, ("trainer_properties", "TrainerExecutor", "run_fn"),
        "the Trainer node: BigtrainTrainer's executor, run_fn by its module path"),
    Hop(RUN_FN, "trainer_properties", True, ("trainer_custom_config",),
        "reads train.train_steps / eval_batches for TFX's train_args / eval_args"),
    Hop(RUN_FN, "trainer_custom_config", False, ("custom_config",)),
    Hop(STAGES, "custom_config", False, ("handoff",),
        "the declared extras checked, not the train section"),
    Hop(STAGES, "handoff", True, ("typed_sections", "section_json"),
        "the train section -> canonical JSON, custom_config['train']: the cache key"),
    Hop(RUN_FN, "TrainerExecutor.Do", False, ("loads", "Do"),
        "the custom_config envelope decoded and encoded again, its train entry a string unopened; "
        "TFX's GenericExecutor.Do then calls run_fn"),
    Hop(RUN_FN, "run_fn", True, ("trainer_config", "train_model"), "reads train.init_from, freeze"),
    Hop(RUN_FN, "trainer_config", False, ("read_custom", "apply_hyperparameters")),
    Hop(STAGES, "read_custom", False, ("read_back",), "the keys beside the sections checked"),
    Hop(STAGES, "read_back", True, ("from_dict",), "custom_config['train'] decoded"),
    Hop(LOADING, "from_dict", True, ("merge",)),
    Hop(RUN_FN, "train_model", False, ("train", "train_on_ray", "train_coordinated")),
    Hop(LOOP, "train", True, ("build_training",)),
    Hop(LOOP, "build_training", True, ("make_optimizer",)),
    Hop(OPTIMIZER, "make_optimizer", True, ("make_schedule", "_adamw", "_sharded_optimizer")),
    Hop(OPTIMIZER, "make_schedule", True, ("WarmupStableDecay", "WarmupCosine"),
        "learning_rate is the schedule's peak"),
    Hop(OPTIMIZER, "_adamw", True, ("PreReducedAdamW",), "the optimizer, the schedule its rate"),
    Hop(OPTIMIZER, "_sharded_optimizer", True, ("ShardedAdamW",),
        "train.shard_optimizer_state: zero.py's ZeRO-1 optimizer, the schedule its rate"),
)
FILES_BEFORE = (7, 6)   # opening, forwarding on 2026-12-07 before optimizer.py (git 90a6def)
FILES_NOW = (5, 7)

# They read the setting and hand nothing on (they refuse a bad value): (file, function, and the
# file and function that calls it, a hop or another side reader).
RULES = "components/config/rules.py"
SIDE_READERS = (
    (RULES, "validate", LOADING, "build_config"),
    (RULES, "validate_positive", RULES, "validate"),
    (RULES, "validate_model_and_train", RULES, "validate"),
    ("components/config/bounds.py", "validate_optimizer", RULES, "validate"),
)

# A non-default setting's extra hops, off the path at `from_hop`; each branch alone stays within
# MAX_OPENING. tune.trials > 0: the Tuner's best value put over the setting.
BRANCHES = {
    "tune.trials>0": ("trainer_config", (
        Hop("components/config/hyperparameters.py", "apply_hyperparameters", True, ("merge",)),)),
    "runtime.cluster=ray": ("train_model", (
        Hop("components/training/ray_job.py", "train_on_ray", True, ("to_dict", "worker_loop")),
        Hop("components/training/ray_job.py", "worker_loop", True, ("from_dict", "train")))),
    "runtime.strategy=parameter_server": ("train_model", (
        Hop("components/training/parameter_server.py", "train_coordinated", True,
            ("build_training",)),)),
}
BRANCH_HOPS = tuple(hop for _, hops in BRANCHES.values() for hop in hops)
# The names that carry the setting inside a hop, and the calls whose result they may take
# besides the hops' own: dataclasses.replace copies, dict builds the custom_config envelope,
# trainer_result and read_result return a training result, not a Config.
CARRIERS = {"config", "args", "custom", "custom_config"}
# Next names that are no hop of their own: the optimizers, a schedule's classes, the helpers
# of an opening hop, the side readers' entry, TFX's executor (its Do is a hop) and json's decoder.
LEAVES = {"PreReducedAdamW", "ShardedAdamW", "WarmupStableDecay", "WarmupCosine", "_coerce",
          "typed_sections", "section_json", "to_dict", "validate", "TrainerExecutor", "loads"}
NOT_A_HOP = {"replace", "dict", "trainer_result", "read_result"}


@functools.lru_cache(maxsize=None)
def module_tree(file: str) -> ast.Module:
    return ast.parse((ROOT / file).read_text(encoding="utf-8"), filename=file)


def find_function(file: str, dotted: str) -> ast.FunctionDef:
    scope: list = module_tree(file).body
    *owners, name = dotted.split(".")
    for owner in owners:
        scope = next(n.body for n in scope if isinstance(n, ast.ClassDef) and n.name == owner)
    found = [n for n in scope if isinstance(n, ast.FunctionDef) and n.name == name]
    assert found, f"{file}: no function {dotted} (the hop table is out of date)"
    return found[0]


def names_in(node: ast.AST) -> set[str]:
    """Every name a body uses: names, attributes, and the last part of dotted strings."""
    names = set()
    for sub in ast.walk(node):
        if isinstance(sub, ast.Name):
            names.add(sub.id)
        elif isinstance(sub, ast.Attribute):
            names.add(sub.attr)
        elif isinstance(sub, ast.Constant) and isinstance(sub.value, str) and sub.value.isascii():
            names.add(sub.value.rsplit(".", 1)[-1])
    return names


def referenced(file: str, dotted: str) -> set[str]:
    """What a hop's function names, and what the classes of its own module that it names do
    (the Trainer node's class names its executor)."""
    names = names_in(find_function(file, dotted))
    classes = {n.name: n for n in module_tree(file).body if isinstance(n, ast.ClassDef)}
    for name in names & set(classes):
        names |= names_in(classes[name])
    return names


def touches_setting(function: ast.FunctionDef) -> list[str]:
    """Where a body touches an attribute or key named in SETTING (line: what); a call of a
    function so named (`loop.train(...)`) is not the section."""
    found, called = [], {id(n.func) for n in ast.walk(function) if isinstance(n, ast.Call)}
    for sub in ast.walk(function):
        if isinstance(sub, ast.Attribute) and sub.attr in SETTING and id(sub) not in called:
            found.append(f"{sub.lineno}: .{sub.attr}")
        elif isinstance(sub, ast.Constant) and sub.value in SETTING:
            found.append(f"{sub.lineno}: {sub.value!r}")
    return found


def callee(call: ast.Call) -> str | None:
    return getattr(call.func, "id", None) or getattr(call.func, "attr", None)


def carried_through(function: ast.FunctionDef) -> list[str]:
    """The calls a hop takes the setting's carrier back from: `config = f(...)` (a tuple target
    too), or `return f(config, ...)`. Each must be one of the hop's next hops (so a row of the
    table, classified and checked) or NOT_A_HOP: a function of a new file that re-encodes or
    rewrites the Config on the way then needs its row."""
    found = []
    for sub in ast.walk(function):
        if isinstance(sub, ast.Assign) and isinstance(sub.value, ast.Call):
            targets = [t for target in sub.targets
                       for t in (target.elts if isinstance(target, ast.Tuple) else [target])]
            if any(isinstance(t, ast.Name) and t.id in CARRIERS for t in targets):
                found.append(callee(sub.value))
        elif isinstance(sub, ast.Return) and isinstance(sub.value, ast.Call):
            arguments = sub.value.args + [k.value for k in sub.value.keywords]
            if any(isinstance(a, ast.Name) and a.id in CARRIERS for a in arguments):
                found.append(callee(sub.value))
    return [name for name in found if name]


def opening_files(hops) -> set[str]:
    return {hop.file for hop in hops if hop.opens}


def short(hop: Hop) -> str:
    return hop.function.rsplit(".", 1)[-1]


@pytest.mark.parametrize("hop", HOPS + BRANCH_HOPS, ids=lambda hop: f"{hop.file}:{hop.function}")
def test_each_hop_names_its_next_hops_and_takes_the_config_from_hops_only(hop):
    function = find_function(hop.file, hop.function)
    missing = [name for name in hop.next if name not in referenced(hop.file, hop.function)]
    assert not missing, f"{hop.file} {hop.function} no longer names {missing}: update HOPS"
    known = set(hop.next) | NOT_A_HOP
    assert set(hop.next) <= {short(h) for h in HOPS + BRANCH_HOPS} | LEAVES, hop
    unknown = [name for name in carried_through(function) if name not in known]
    assert not unknown, (f"{hop.file} {hop.function} takes the config from {unknown}: a hop "
                         "the table lacks (add its row, opening or forwarding)")


def test_the_hops_are_one_path_from_the_cli():
    named = {name for hop in HOPS for name in hop.next}
    unreached = [hop.function for hop in HOPS[1:] if short(hop) not in named]
    assert unreached == [], f"hops no earlier hop names: {unreached}"
    callers = {(file, function) for file, function, *_ in SIDE_READERS}
    for file, function, caller_file, caller in SIDE_READERS:
        assert function in referenced(caller_file, caller), (caller, function)
        assert (caller_file, caller) in callers or any(
            (h.file, h.function) == (caller_file, caller) for h in HOPS), (file, function)
        assert touches_setting(find_function(file, function)) or any(
            c[2:] == (file, function) for c in SIDE_READERS), (file, function)


def test_forwarding_hops_never_open_the_train_section():
    opened = {f"{hop.file} {hop.function}": touches_setting(find_function(hop.file, hop.function))
              for hop in HOPS if not hop.opens}
    assert {k: v for k, v in opened.items() if v} == {}, (
        "a forwarding hop opens the train section: mark it opening (and count it) or hand the "
        "whole Config on")


def test_each_opening_file_opens_it():
    """The flag is not free: each file marked opening has a hop that touches the setting, or
    encodes, decodes or types whole sections (loading, stages)."""
    generic = {"handoff", "read_back", "from_dict", "merge", "parse_override", "to_dict"}
    for file in opening_files(HOPS + BRANCH_HOPS):
        hops = [h for h in HOPS + BRANCH_HOPS if h.file == file and h.opens]
        assert any(touches_setting(find_function(file, h.function))
                   or generic & ({h.function} | set(h.next)) for h in hops), file


def test_the_setting_is_opened_in_at_most_six_files():
    """5 files open it, 7 forward the whole Config unopened (docs/layout.md says both); each
    non-default branch adds one opening file at most."""
    opening = opening_files(HOPS)
    forwarding = {hop.file for hop in HOPS} - opening
    assert len(opening) <= MAX_OPENING, sorted(opening)
    assert (len(opening), len(forwarding)) == FILES_NOW, (sorted(opening), sorted(forwarding))
    for setting, (from_hop, hops) in BRANCHES.items():
        assert any(from_hop == short(h) for h in HOPS), setting
        assert len(opening_files(HOPS + hops)) <= MAX_OPENING, (setting, sorted(opening_files(hops)))


def _run_local(source: str) -> ast.FunctionDef:
    tree = ast.parse(source)
    return next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "run_local")


@pytest.mark.parametrize("line, check", [
    ("    config = replace(config, train=replace(config.train, learning_rate=1.0))\n",
     touches_setting),
    ("    config = roundtrip_json(config)\n", carried_through)])
def test_the_checks_see_a_forwarding_hop_that_opens_or_re_encodes(line, check):
    """The checks can fail: run_local rewriting config.train, or taking the Config back from a
    function of another file (say one that re-encodes the train section), before create_pipeline."""
    source = (ROOT / RUN).read_text(encoding="utf-8")
    assert check(_run_local(source)) == []
    mutated = source.replace("    pipeline = create_pipeline(\n", line + "    pipeline = create_pipeline(\n", 1)
    assert check(_run_local(mutated)) != []
