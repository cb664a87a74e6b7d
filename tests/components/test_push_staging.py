"""Push staging and claims (components/push/staging.py) and the one liveness probe they share with
the home lock (components/common/process.py): a dead pusher's claim is taken over and its staging
folder removed; a live pusher's are left alone. The reference for "dead" is a child process this
test started and reaped."""

import json
import os
import subprocess
import sys
import time

from components.common.process import process_alive, this_process
from components.push import staging


def _dead_pid() -> int:
    child = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                           capture_output=True, text=True, check=True)
    return int(child.stdout)


def test_process_alive_tells_this_process_a_dead_one_and_another_host_apart():
    me = this_process()
    assert process_alive(me) is True
    assert process_alive({"pid": _dead_pid(), "host": me["host"]}) is False
    assert process_alive({"pid": os.getpid(), "host": "another-host.invalid"}) is None
    assert process_alive({"host": me["host"]}) is True     # no pid: not known to be dead


def test_a_dead_pushers_claim_is_taken_over_a_live_ones_is_not(tmp_path):
    host = this_process()["host"]
    live = tmp_path / "live.json"
    live.write_text(json.dumps({"pid": os.getpid(), "host": host, "claimed_at": time.time()}))
    assert not staging.claim(str(live), {"model_digest": "a"})
    dead = tmp_path / "dead.json"
    dead.write_text(json.dumps({"pid": _dead_pid(), "host": host, "claimed_at": time.time()}))
    assert staging.claim(str(dead), {"model_digest": "b"})
    assert json.loads(dead.read_text())["model_digest"] == "b"
    old = tmp_path / "old.json"                             # alive, but older than the limit
    old.write_text(json.dumps({"pid": os.getpid(), "host": host,
                               "claimed_at": time.time() - staging.CLAIM_STALE_S - 1}))
    assert staging.claim(str(old), {"model_digest": "c"})


def test_only_dead_pushers_staging_folders_are_removed(tmp_path):
    base = tmp_path / "serving" / "gpt"
    (base / "5").mkdir(parents=True)
    dead = staging.staging_dir(str(base), 6).rsplit("-", 1)[0] + f"-{_dead_pid()}"
    live = staging.staging_dir(str(base), 7)                # this process's own name
    os.makedirs(dead)
    os.makedirs(live)
    removed = staging.remove_dead_staging(str(tmp_path / "serving"))
    assert removed == [dead]
    assert sorted(os.listdir(base)) == sorted(["5", os.path.basename(live)])
