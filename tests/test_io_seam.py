"""The I/O seam (components/storage/fs.py, Beam's FileSystems): no product module under
components/ or pipeline/ reads, writes, lists, renames or deletes with `open`, `os`, `shutil` or
`glob` directly, except the modules allow-listed below, each with its reason. An ast scan: 0.1 s.

Catches: a new `open(os.path.join(artifact.uri, ...))` (writes a local `s3:` folder, or fails,
when the artifact is in a bucket), a `shutil.copytree` of an artifact, a `glob` of shards.
Pure string functions (os.path.join/basename/dirname/relpath/splitext) are fine on URIs.
"""

import ast
import os

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PACKAGES = ("components", "pipeline")
FILE_CALLS = {"open"}
OS_CALLS = {"makedirs", "mkdir", "listdir", "walk", "remove", "unlink", "rename", "replace",
            "stat", "scandir", "rmdir", "fstat"}
OS_PATH_CALLS = {"exists", "isdir", "isfile", "getsize", "getmtime", "abspath", "realpath",
                 "normpath", "islink", "lexists"}
MODULES = {"shutil", "glob"}

ALLOWED = {
    # The seam itself: local paths take the standard library, remote ones tf.io.gfile / boto3.
    "components/storage/fs.py": "the seam",
    # Local-only corpus handling: FIFOs, sockets and devices are detected with os.stat before any
    # open (opening a FIFO blocks); remote input takes the FileSystems branch in these modules.
    "components/storage/listing.py": "local branch of the listing (remote: FileSystems.match)",
    "components/corpus/readers.py": "local branch of open_regular (remote: FileSystems.open)",
    # Resources shipped inside the package (schemas/*.pbtxt next to the code), never remote.
    "components/validation/schema.py": "reads the curated schema shipped in the package",
    # Host facts, not files: os.cpu_count / os.sysconf / shutil.which.
    "components/training/memory.py": "shutil.which('nvidia-smi'), os.sysconf: host facts",
    # The package's own source files (the code digest of a stage), never remote.
    "components/storage/digest.py": "hashes the package's own source files",
    # The user's --config file and the resolved config.yaml in the local run folder.
    "components/config/loading.py": "reads --config files; writes <home>/runs/<id>/config.yaml",
    # The trackers' default places under the local home, made absolute (os.path.abspath only).
    "components/config/tracking.py": "abspath of <home>/mlflow.db and <home>/wandb (local home)",
    # The MLMD sqlite file (MLMD itself needs a local path) and its integrity checks.
    "pipeline/lineage/connection.py": "the local metadata.sqlite file (MLMD opens it by path)",
    "pipeline/lineage/store.py": "os.path.exists/abspath of a target typed on the command line",
    "pipeline/lineage/openlineage_events.py": "os.path.abspath of a local artifact URI (a dataset's "
                                              "name by the OpenLineage naming spec; no I/O)",
    # `bigtrain ui` serves files only from inside the store's local home (its path-traversal
    # guard resolves symlinks with os.path.realpath); artifacts on object stores are not served.
    "pipeline/lineage/web/app.py": "run logs inside the local home, realpath-checked",
    "pipeline/lineage/web/curves.py": "TensorBoard events inside the local home (app.py checks)",
    "pipeline/pipeline.py": "os.path.abspath of a local --init_from (URIs are kept as given)",
}


def violations(path: str) -> list[str]:
    tree = ast.parse(open(path, encoding="utf-8").read(), path)
    found = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
            found += [f"{path}:{node.lineno}: import {n}" for n in names if n in MODULES]
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        if isinstance(func, ast.Name) and func.id in FILE_CALLS:
            found.append(f"{path}:{node.lineno}: open()")
        elif isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name):
            if func.value.id == "os" and func.attr in OS_CALLS:
                found.append(f"{path}:{node.lineno}: os.{func.attr}()")
        elif (isinstance(func, ast.Attribute) and isinstance(func.value, ast.Attribute)
              and isinstance(func.value.value, ast.Name) and func.value.value.id == "os"
              and func.value.attr == "path" and func.attr in OS_PATH_CALLS):
            found.append(f"{path}:{node.lineno}: os.path.{func.attr}()")
    return found


def product_modules():
    for package in PACKAGES:
        for d, _, names in os.walk(os.path.join(ROOT, package)):
            for n in names:
                if n.endswith(".py"):
                    yield os.path.relpath(os.path.join(d, n), ROOT)


def test_no_product_module_bypasses_the_io_seam():
    found = [v for m in product_modules() if m not in ALLOWED
             for v in violations(os.path.join(ROOT, m))]
    assert not found, "use components/storage/fs.py (or Beam's FileSystems):\n" + "\n".join(found)


def test_every_allow_list_entry_is_a_module_that_needs_it():
    stale = [m for m in ALLOWED if not os.path.exists(os.path.join(ROOT, m))
             or not violations(os.path.join(ROOT, m))]
    assert not stale, f"allow-list entries that no longer need it: {stale}"


def test_the_scan_sees_a_bypass(tmp_path):
    probe = tmp_path / "probe.py"
    probe.write_text("import os\nos.makedirs(uri)\nopen(os.path.join(uri, 'x'))\nos.path.isdir(uri)\n")
    assert len(violations(str(probe))) == 3
