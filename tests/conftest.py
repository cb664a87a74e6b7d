"""Shared fixtures. TensorFlow + TFX cost ~30 s to import per process: pipeline runs are session
fixtures shared by many assertions, and everything that runs one is marked `slow`."""

import os
import shutil
import sysconfig

import pytest

STDLIB = sysconfig.get_paths()["stdlib"]
CPU_REPLICAS = 2
# Logical CPU devices: mirrored tests take the first CPU_REPLICAS; pipeline tests use up to 4.
LOGICAL_CPUS = 4


def pytest_configure(config):
    """Split the CPU into 4 logical devices before TensorFlow initializes, so MirroredStrategy
    tests (and pipeline runs in this process) train with 2 real replicas (runtime.cpu_replicas
    takes the first 2) and pipeline-stage tests have up to 4 stage devices."""
    from components.training.strategy import ensure_cpu_replicas
    assert ensure_cpu_replicas(LOGICAL_CPUS) == LOGICAL_CPUS


_EXIT_STATUS = [0]


def pytest_sessionfinish(session, exitstatus):
    _EXIT_STATUS[0] = int(exitstatus)


@pytest.hookimpl(trylast=True)
def pytest_unconfigure(config):
    """A session that touched s3:// exits without C++ static destructors (tensorflow-io's S3
    client aborts with status 134 otherwise: components/common/fs.py exit_process)."""
    from components.common import fs
    fs.exit_process(_EXIT_STATUS[0])


def make_corpus(root: str) -> dict[str, int]:
    """A small real-text corpus (two stdlib packages) plus one file of every quarantine kind.

    Returns {relative path: expected quarantine reason}."""
    for package in ("json", "email"):
        shutil.copytree(os.path.join(STDLIB, package), os.path.join(root, package),
                        ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    with open(os.path.join(root, "empty.txt"), "wb"):
        pass
    with open(os.path.join(root, "image.bin"), "wb") as fh:
        fh.write(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR")
    with open(os.path.join(root, "latin1.txt"), "wb") as fh:
        fh.write("caf\u00e9 cr\u00e8me\n".encode("latin-1"))
    os.symlink(os.path.join(root, "does-not-exist"), os.path.join(root, "dangling.txt"))
    quarantined = {"image.bin": "binary", "latin1.txt": "not_utf8", "dangling.txt": "unreadable"}
    for dirpath, _, names in os.walk(root):
        for name in names:
            path = os.path.join(dirpath, name)
            if os.path.isfile(path) and os.path.getsize(path) == 0:
                quarantined[os.path.relpath(path, root)] = "empty"
    return quarantined


@pytest.fixture(scope="session")
def corpus(tmp_path_factory):
    root = str(tmp_path_factory.mktemp("corpus"))
    expected = make_corpus(root)
    return root, expected
