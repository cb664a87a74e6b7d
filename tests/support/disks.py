"""Small real disks for the disk-full tests: a tmpfs of a given size mounted (as root), so that
the kernel itself answers ENOSPC. Where mounting is not permitted the test skips, saying so."""

import os
import subprocess
from contextlib import contextmanager

import pytest


@contextmanager
def small_disk(path, size: str):
    """A tmpfs of `size` (mount's syntax: 96k, 7m) mounted at path; skips where it cannot be."""
    os.makedirs(path, exist_ok=True)
    if os.geteuid() != 0 or subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs",
                                            str(path)], capture_output=True).returncode:
        pytest.skip("cannot mount a small tmpfs here (needs root with mount rights)")
    try:
        yield str(path)
    finally:
        subprocess.run(["umount", "-l", str(path)], check=False)


def fill(folder) -> str:
    """Write a file into folder until its disk is full; returns its path."""
    path = os.path.join(folder, "filler")
    with open(path, "wb", buffering=0) as fh:
        try:
            while True:
                fh.write(b"\0" * 4096)
        except OSError as err:
            if err.errno != 28:   # ENOSPC: full, as asked
                raise
    return path
