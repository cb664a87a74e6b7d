"""The whole e2e test of docs/operations.md "Writing a pipeline test" uses only what exists: its
imports run, the fixtures it asks for are defined, the PipelineHome and PipelineRun attributes it
reads are theirs (tests/support/pipeline_run.py), and it fits in 15 lines. Not run: it would run
the pipeline twice."""

import ast
import os

from tests.support.doc_pages import FENCE, REPO, read


EXAMPLE_LINES = 15
PYTEST_FIXTURES = {"tmp_path", "tmp_path_factory", "capsys", "capfd", "monkeypatch", "request"}


def pipeline_test_example() -> str:
    section = read(os.path.join(REPO, "docs", "operations.md"))
    section = section.split("\n## Writing a pipeline test\n", 1)[1].split("\n## ", 1)[0]
    (code,) = [body for lang, body in FENCE.findall(section) if lang.strip() == "python"]
    return code


def example_problems(code: str) -> list[str]:
    """What the example uses that does not exist (its imports, the fixtures its functions ask
    for, the attributes of a PipelineHome and a PipelineRun), and a length over EXAMPLE_LINES.
    Its imports run; nothing else does (its test would run the pipeline twice)."""
    from tests import conftest as root_conftest
    from tests.e2e import conftest as e2e_conftest
    from tests.support.pipeline_run import PipelineHome, PipelineRun
    lines = len(code.splitlines())
    problems = [f"{lines} lines (at most {EXAMPLE_LINES})"] if lines > EXAMPLE_LINES else []
    tree = ast.parse(code)
    for node in tree.body:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            try:
                exec(compile(ast.Module([node], []), "example", "exec"), {})
            except ImportError as err:
                problems.append(f"import: {err}")
    defined = {n.name for n in tree.body if isinstance(n, ast.FunctionDef)}
    known = set(dir(PipelineHome("home", None))) | set(dir(PipelineRun("home", 0, "", "")))
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef):
            problems += [f"fixture {a.arg}: not found" for a in node.args.args
                         if a.arg not in defined | PYTEST_FIXTURES
                         and not hasattr(root_conftest, a.arg) and not hasattr(e2e_conftest, a.arg)]
        elif (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
              and node.value.id in ("home", "first", "second") and node.attr not in known):
            problems.append(f"{node.value.id}.{node.attr}: no such attribute")
    return problems


def test_the_pipeline_test_example_uses_what_exists():
    assert example_problems(pipeline_test_example()) == []


def test_pipeline_test_example_mutations_fail():
    broken = pipeline_test_example().replace("artifact_counts", "artifact_count").replace(
        "session_capsys", "shared_capsys").replace("SMALL_RUN", "TINY_RUN") + "# one more\n"
    assert example_problems(broken) == [
        "16 lines (at most 15)",
        "import: cannot import name 'TINY_RUN' from 'tests.e2e.conftest' "
        f"({os.path.join(REPO, 'tests', 'e2e', 'conftest.py')})",
        "fixture shared_capsys: not found", "second.artifact_count: no such attribute"]
