"""Every MLMD property name has one owner per artifact type: the module of the stage that writes
it (a TensorFlow-free module, so the lineage readers may import it). Writers and readers use the
owner's constants and functions, so a misspelt name is an AttributeError at import instead of a
figure that silently reads as absent.

Scans the product packages with `ast` for string literals in the places a property name goes:
- written or read through MLMD's API: the name argument of `set_*_custom_property`,
  `get_*_custom_property`, `set_figure` and `custom_properties[...]`: outside its owner, any
  literal there is reported (an owner's name or not);
- read from a properties dict: `x.get("name")`, `x["name"]`, `"name" in x`, and the names listed
  in a tuple, list or set (the tables readers iterate over): a literal that is an owner's property name is reported outside its
  owner (import the constant), and one within two edits of an owner's name (but no owner's name
  itself) is reported as a misspelt property name.
A word that is a property name but also another dictionary's key in a module is listed in
OTHER_KEYS with what it means there, so each exception says why it is not a property."""

from __future__ import annotations

import ast
import importlib
import pathlib
import re

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
PRODUCT = ("components", "pipeline", "runners")

# artifact (or context) type -> its owner module; each owner has PROPERTIES (the fixed names) and
# may have PATTERNS (regular expressions of the families its functions build)
OWNERS = {
    "Examples": "components/text_example_gen/properties.py",
    "Tokenizer": "components/tokenizer/properties.py",
    "Schema": "components/validation/properties.py",
    "Model": "components/model/properties.py",
    "ModelEvaluation": "components/evaluation/properties.py",
    "ModelBlessing": "components/serving/blessing.py",
    "PushedModel": "components/push/properties.py",
    "TunerResults, HyperParameters": "components/tuner/properties.py",
    "run context, executions": "pipeline/lineage/record.py",
}
# modules that spell the names an owner lists for it (the owner imports theirs)
CO_OWNERS = {
    "components/evaluation/documents.py": "components/evaluation/properties.py",
    "components/evaluation/held_out_sets.py": "components/evaluation/properties.py",
    "components/evaluation/tasks.py": "components/evaluation/properties.py",
}
# the modules that read MLMD properties from a properties dict (store.properties and the like):
# their lookups are checked; everywhere else only MLMD's API is (the same words are the keys of
# metrics dicts, Hugging Face configs and JSON records there)
READERS = (
    "pipeline/lineage/queries.py", "pipeline/lineage/report.py", "pipeline/lineage/content.py",
    "pipeline/lineage/card_facts.py", "pipeline/lineage/standing.py", "pipeline/lineage/explore.py",
    "pipeline/lineage/store.py", "pipeline/lineage/web/app.py", "components/serving/hf/card.py",
    "components/serving/data_facts.py",
    "components/push/executor.py", "components/tuner/summary.py",
)
# (module, word): what the word means in that module where it is not an MLMD property
_SOURCE_RECORD = "a key of a source's record in the Examples' `sources` JSON, not a property"
OTHER_KEYS: dict[tuple[str, str], str] = {
    **{("components/serving/data_facts.py", word): _SOURCE_RECORD
       for word in ("input", "format", "document", "tokens", "documents")},
    **{("components/serving/hf/card.py", word): "a train.* setting's name in the model's config"
       for word in ("steps", "init_from")},
    ("components/tuner/summary.py", "steps"): "a column of the trials table: a trial record's key",
}

SETTERS = re.compile(r"^(set|get)_(string|int|float|bool|proto|json_value)?_?custom_property$")
LOOKUPS = ("get", "pop", "setdefault")
# In a reader, a properties dict is a call of `properties(...)`, a variable of one of these names,
# or one of them subscripted by an artifact type (`o["Model"]`): the readers' convention, so that
# their own records and figures dicts, keyed by the same words, are not taken for one.
PROPERTY_DICTS = {"props", "p", "o", "e", "m", "t", "outputs", "examples", "evaluation", "model",
                  "blessing", "pushed", "push", "results", "run_props", "exec_props", "summary",
                  "training"}


def _module(path: str) -> str:
    return path[:-3].replace("/", ".")


def owned_names() -> tuple[dict[str, str], list[tuple[re.Pattern, str]]]:
    """{name: owner} of every fixed name, and (pattern, owner) of every family."""
    names, patterns = {}, []
    for owner in OWNERS.values():
        module = importlib.import_module(_module(owner))
        names.update({name: owner for name in module.PROPERTIES})
        patterns += [(re.compile(p), owner) for p in getattr(module, "PATTERNS", ())]
    return names, patterns


def _text(node) -> str | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        return "".join(v.value if isinstance(v, ast.Constant) else "{}" for v in node.values)
    return None


def _call_name(node: ast.Call) -> str:
    function = node.func
    return function.attr if isinstance(function, ast.Attribute) else getattr(function, "id", "")


def _property_dict(node) -> bool:
    """Whether a reader's expression is a properties dict (PROPERTY_DICTS)."""
    if isinstance(node, ast.Name):
        return node.id in PROPERTY_DICTS
    if isinstance(node, ast.Call):
        return _call_name(node) == "properties"
    if isinstance(node, ast.Subscript):
        return _property_dict(node.value)
    if isinstance(node, ast.Call) or isinstance(node, ast.Attribute):
        return False
    return False


def name_nodes(tree: ast.AST) -> tuple[list, list]:
    """(api, lookups): the literal nodes naming a property through MLMD's API, and those looked
    up in a properties dict or listed in a tuple, list or set."""
    api, lookups = [], []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            name = _call_name(node)
            if SETTERS.match(name) and node.args:
                api.append(node.args[0])
            elif name == "set_figure" and len(node.args) > 1:
                api.append(node.args[1])
            elif name in LOOKUPS and isinstance(node.func, ast.Attribute) and node.args \
                    and _property_dict(node.func.value):
                lookups.append(node.args[0])
        elif isinstance(node, ast.Subscript):
            value = node.value
            if isinstance(value, ast.Attribute) and value.attr == "custom_properties":
                api.append(node.slice)
            elif _property_dict(value):
                lookups.append(node.slice)
        elif isinstance(node, ast.Compare) and len(node.ops) == 1 \
                and isinstance(node.ops[0], (ast.In, ast.NotIn)) and _property_dict(node.comparators[0]):
            lookups.append(node.left)
        elif isinstance(node, (ast.Tuple, ast.List, ast.Set)):
            lookups += node.elts     # a table of names (a reader iterates over it to look them up)
    return ([n for n in api if _text(n) is not None],
            [n for n in lookups if isinstance(n, ast.Constant) and isinstance(n.value, str)])


def name_sites(tree: ast.AST) -> tuple[list, list]:
    """(api, lookups) as (line, text)."""
    return tuple([(n.lineno, _text(n)) for n in nodes] for nodes in name_nodes(tree))


def _near(word: str, other: str) -> bool:
    """Within two edits (insert, delete, substitute, swap of neighbours) of each other."""
    if abs(len(word) - len(other)) > 2:
        return False
    previous = list(range(len(other) + 1))
    before = None
    for i, a in enumerate(word, 1):
        current = [i]
        for j, b in enumerate(other, 1):
            cost = min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (a != b))
            if before is not None and i > 1 and j > 1 and a == other[j - 2] and word[i - 2] == b:
                cost = min(cost, before[j - 2] + 1)
            current.append(cost)
        before, previous = previous, current
    return previous[-1] <= 2


def misspellings(source: str, module: str, names: dict, patterns: list) -> list[str]:
    """The property names `module` spells that an owner owns, and near-misses of them."""
    if module in OWNERS.values() or module in CO_OWNERS:
        return []
    api, lookups = name_sites(ast.parse(source, module))
    found = [f"{module}:{line} {text!r}: a property name spelt outside its owner (use the "
             f"owner's constant or function)" for line, text in api]

    def owner_of(text):
        return names.get(text) or next((o for p, o in patterns if p.fullmatch(text)), None)
    for line, text in lookups if module in READERS else ():
        if (module, text) in OTHER_KEYS or not re.fullmatch(r"[a-z][a-z0-9_.{}]*", text):
            continue
        owner = owner_of(text)
        if owner:
            found.append(f"{module}:{line} {text!r}: a property name spelt outside its owner "
                         f"({owner})")
        elif len(text) >= 6 and any(_near(text, n) for n in names if len(n) >= 6):
            near = sorted(n for n in names if len(n) >= 6 and _near(text, n))
            found.append(f"{module}:{line} {text!r}: no owner's property name, but close to "
                         f"{near} (misspelt?)")
    return found


def product_sources() -> dict[str, str]:
    return {str(path.relative_to(ROOT)): path.read_text(encoding="utf-8")
            for package in PRODUCT for path in sorted((ROOT / package).rglob("*.py"))}


def test_no_property_name_outside_its_owner():
    names, patterns = owned_names()
    found = [hit for module, source in product_sources().items()
             for hit in misspellings(source, module, names, patterns)]
    assert found == [], "\n".join(found)


@pytest.mark.parametrize("owner", sorted(OWNERS.values()))
def test_each_owner_declares_its_names(owner):
    """The table is true: each owner lists names, and its patterns compile."""
    module = importlib.import_module(_module(owner))
    assert module.PROPERTIES and all(isinstance(n, str) and n for n in module.PROPERTIES)
    assert all(re.compile(p) for p in getattr(module, "PATTERNS", ()))


def test_owners_import_no_tensorflow_tfx_or_beam():
    """The lineage readers import the owners: importing every one of them (in a fresh process)
    loads neither TensorFlow, nor TFX, nor Beam."""
    import subprocess
    import sys
    heavy = ("tensorflow", "tfx", "apache_beam", "keras")
    code = ("import sys\n" + "".join(f"import {_module(o)}\n" for o in OWNERS.values())
            + f"print([m for m in {heavy!r} if m in sys.modules])")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
                         check=True).stdout
    assert out.strip() == "[]"


def test_other_keys_are_still_there():
    """Each OTHER_KEYS exception names a literal its module still spells (no stale entry)."""
    sources = product_sources()
    stale = [(m, w) for m, w in OTHER_KEYS
             if not any(t == w for _, t in name_sites(ast.parse(sources[m]))[1])]
    assert stale == []


def test_the_check_catches_what_it_claims():
    """Mutations: a misspelt read (`pushed_verison`), a right name spelt by hand, and a literal
    written through MLMD's API are reported; the owner's constant, a docstring and a message
    are not."""
    names = {"pushed_version": "components/push/properties.py",
             "eval_loss": "components/model/properties.py"}
    patterns = [(re.compile(r"heldout_[a-z0-9_]+_bits_per_byte"), "components/evaluation/properties.py")]
    source = '''"""Reads pushed_version."""
from components.push import properties as pushed
def f(props, model, artifact):
    print("the pushed_version is shown")
    return (props.get("pushed_verison"), props.get(pushed.PUSHED_VERSION), model["eval_loss"],
            "heldout_code_bits_per_byte" in props, props.get("run_id"),
            artifact.set_int_custom_property("anything", 1))
'''
    found = [hit.split(" ", 1)[1] for hit in misspellings(source, READERS[0], names, patterns)]
    assert sorted(found) == sorted([
        "'anything': a property name spelt outside its owner (use the owner's constant or function)",
        "'pushed_verison': no owner's property name, but close to ['pushed_version'] (misspelt?)",
        "'eval_loss': a property name spelt outside its owner (components/model/properties.py)",
        "'heldout_code_bits_per_byte': a property name spelt outside its owner "
        "(components/evaluation/properties.py)"])
    assert misspellings(source, "components/push/properties.py", names, patterns) == []
