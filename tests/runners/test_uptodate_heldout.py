"""The up-to-date key holds the held-out sets' content digest (issue 57: a set file rewritten with
other text, and the next `bigtrain run` said "up to date" with the old figure): the pipeline
starts again, the reason named, even when the file keeps its size and modification time and is
kept out of decontamination (so the data input's fingerprint does not see it)."""

import os

from components import config as config_lib
from runners.local import uptodate


def test_a_rewritten_set_file_is_not_up_to_date(tmp_path):
    """Catches the key without eval_sets (changes() == [], "up to date")."""
    path = tmp_path / "set.py"
    path.write_bytes(b"x = 1\n")
    config = config_lib.build_config("tiny", overrides=[
        f"eval.sets=[{{name: mine, input: '{path}', decontaminate: false}}]"])
    before, stat = uptodate.inputs_key(config, "fingerprint"), os.stat(path)
    assert uptodate.changes(before, uptodate.inputs_key(config, "fingerprint")) == []
    path.write_bytes(b"y = 2\n")
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert uptodate.changes(before, uptodate.inputs_key(config, "fingerprint")) == [
        "eval.sets files changed (their bytes: a content digest)"]
