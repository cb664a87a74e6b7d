"""The second Hugging Face loader `make hf-loader` installs (tests/support/hfloader.sh: PyTorch's
CPU build + transformers in build/hfloader/venv): its python, or a skip naming why it is absent
(in CI, where it must be there unless the script stated a limit, a failure instead), and one
call of tests/support/hf_loader_probe.py in it."""

from __future__ import annotations

import filecmp
import json
import os
import subprocess

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
HFLOADER_DIR = os.environ.get("BIGTRAIN_HFLOADER_DIR", os.path.join(ROOT, "build", "hfloader"))
LOCK = os.path.join(ROOT, "tests", "support", "hfloader.lock")
PROBE = os.path.join(ROOT, "tests", "support", "hf_loader_probe.py")


def hf_loader_python() -> str:
    """The venv's python, installed from the current lock; else skip (or fail in CI)."""
    venv = os.path.join(HFLOADER_DIR, "venv")
    python = os.path.join(venv, "bin", "python")
    unavailable = os.path.join(HFLOADER_DIR, "unavailable")
    if os.path.exists(unavailable):           # the script's stated reason (CI: only a stated limit)
        with open(unavailable, encoding="utf-8") as fh:
            pytest.skip("PyTorch + transformers not installed: " + fh.read().strip())
    installed = os.path.join(venv, "installed.lock")
    if os.path.exists(python) and os.path.exists(installed) and filecmp.cmp(installed, LOCK, shallow=False):
        return python
    reason = ("PyTorch + transformers not installed from tests/support/hfloader.lock (run "
              "`make hf-loader`, or `make test`)")
    if os.environ.get("CI"):
        pytest.fail(reason)
    pytest.skip(reason)


def run_probe(request: dict, out_dir: str, timeout: int = 900) -> dict:
    """Run hf_loader_probe.py in the loader's venv on `request`; its result.json (logits files
    beside it in out_dir). Offline: nothing is fetched from the Hub."""
    python = hf_loader_python()
    os.makedirs(out_dir, exist_ok=True)
    request_path = os.path.join(out_dir, "request.json")
    with open(request_path, "w", encoding="utf-8") as fh:
        json.dump(request, fh)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "TF_"))}
    env.update(HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", TOKENIZERS_PARALLELISM="false",
               HF_HOME=os.path.join(out_dir, "hf_home"))
    done = subprocess.run([python, PROBE, request_path, out_dir], env=env, capture_output=True,
                          text=True, timeout=timeout, check=False)
    if done.returncode:
        raise AssertionError(f"transformers could not load the export (exit {done.returncode}):\n"
                             f"{done.stderr[-4000:]}")
    with open(os.path.join(out_dir, "result.json"), encoding="utf-8") as fh:
        return json.load(fh)
