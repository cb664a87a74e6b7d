"""`--out` of `bigtrain export hf` and `bigtrain lineage graph` never overwrites what bigtrain did
not write, and export hf never writes into a home or a serving folder (issue 41: it overwrote a user's README.md / config.json, wrote 6 files
into a served version, and raised a raw FileExistsError on an existing file). Each refusal is
exit 9 (OutputError) with one line naming --out, before the source is even read, and leaves the
files as they were. Each case ran to exit 0 or a traceback on the code before."""

import os

import pytest

from components.common.errors import EXIT_OUTPUT, OutputError
from components.serving.hf.card import CARD_MARKER
from runners.cli import app as cli
from runners.cli.export import check_out_dir


def export(capsys, home, out, *extra):
    capsys.readouterr()
    code = cli.main(["export", "hf", "7", "--out", str(out), "--home", str(home), *extra])
    return code, capsys.readouterr().err


def snapshot(root):
    return {os.path.join(d, f): open(os.path.join(d, f), "rb").read()
            for d, _, files in os.walk(root) for f in files}


@pytest.fixture
def home(tmp_path):
    (tmp_path / "home" / "serving" / "gpt" / "7").mkdir(parents=True)
    (tmp_path / "home" / "serving" / "gpt" / "7" / "saved_model.pb").write_bytes(b"served")
    return tmp_path / "home"


def test_an_existing_file_is_refused_and_kept(capsys, home, tmp_path):
    (tmp_path / "model.bin").write_bytes(b"mine")
    code, err = export(capsys, home, tmp_path / "model.bin")
    assert code == EXIT_OUTPUT == 9 and "exists and is not a folder" in err
    assert (tmp_path / "model.bin").read_bytes() == b"mine" and "Traceback" not in err


def test_a_folder_of_the_users_own_files_is_refused_even_with_force(capsys, home, tmp_path):
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "README.md").write_text("my notes\n")
    (mine / "config.json").write_text("{}\n")
    before = snapshot(mine)
    for extra in ((), ("--force",)):
        code, err = export(capsys, home, mine, *extra)
        assert code == 9 and "did not write" in err
    assert snapshot(mine) == before


@pytest.mark.parametrize("inside", ["home", "serving/gpt/7", "serving/gpt/new"])
def test_a_place_inside_the_home_or_the_serving_folder_is_refused(capsys, home, inside):
    before = snapshot(home)
    code, err = export(capsys, home, home / inside)
    assert code == 9 and "inside" in err and snapshot(home) == before
    assert not (home / "serving" / "gpt" / "new").exists()


def test_a_serving_folder_outside_the_home_is_protected_too(capsys, home, tmp_path):
    serving = tmp_path / "elsewhere"
    code, err = export(capsys, home, serving / "gpt" / "3",
                       "--set", f"orchestrator.serving_dir={serving}")
    assert code == 9 and str(serving) in err


def test_an_earlier_export_is_replaced_with_force_only(tmp_path):
    ours = tmp_path / "hf"
    ours.mkdir()
    (ours / "README.md").write_text(f"# m\n\nA `LlamaForCausalLM` {CARD_MARKER}.\n")
    (ours / "config.json").write_text("{}")
    with pytest.raises(OutputError, match="--force replaces it"):
        check_out_dir(str(ours), [], force=False)
    check_out_dir(str(ours), [], force=True)               # passes: bigtrain wrote it
    check_out_dir(str(tmp_path / "new"), [], force=False)  # a new folder passes
    (tmp_path / "empty").mkdir()
    check_out_dir(str(tmp_path / "empty"), [], force=False)
    (ours / "notes.txt").write_text("mine")
    with pytest.raises(OutputError, match=r"did not write \(notes.txt\)"):
        check_out_dir(str(ours), [], force=True)


def test_lineage_graph_out_refuses_a_file_and_existing_graph_files(capsys, tmp_path):
    """`lineage graph --out FILE` was a raw FileExistsError traceback; a folder with a user's
    graph.png had it overwritten. Both are exit 9 now, the files as they were; a new folder gets
    all four files."""
    from benchmarks.support import lineage_store
    home = tmp_path / "home"
    lineage_store.build(str(home))
    (tmp_path / "file").write_bytes(b"mine")
    (tmp_path / "figs").mkdir()
    (tmp_path / "figs" / "graph.png").write_bytes(b"my picture")
    for out, message in ((tmp_path / "file", "exists and is not a folder"),
                         (tmp_path / "figs", "already holds graph.png")):
        capsys.readouterr()
        code = cli.main(["lineage", "graph", "run-a", "--out", str(out), "--home", str(home)])
        err = capsys.readouterr().err
        assert code == 9 and message in err and "Traceback" not in err
    assert (tmp_path / "file").read_bytes() == b"mine"
    assert os.listdir(tmp_path / "figs") == ["graph.png"]
    assert (tmp_path / "figs" / "graph.png").read_bytes() == b"my picture"
    assert cli.main(["lineage", "graph", "run-a", "--out", str(tmp_path / "new"), "--home",
                     str(home)]) == 0
    assert sorted(os.listdir(tmp_path / "new")) == ["graph.dot", "graph.mmd", "graph.png", "graph.svg"]


@pytest.mark.parametrize("argv", [["config"], ["lineage", "runs"]])
def test_output_to_a_closed_pipe_is_exit_141_without_a_traceback(tmp_path, argv):
    """`bigtrain config | head` was a BrokenPipeError traceback. The pipe's read end is closed
    before the process starts, so its first write fails every time (no race)."""
    import subprocess
    import sys
    from benchmarks.support import lineage_store
    lineage_store.build(str(tmp_path / "home"))
    read, write = os.pipe()
    os.close(read)
    bigtrain = os.path.join(os.path.dirname(sys.executable), "bigtrain")
    proc = subprocess.run([bigtrain, *argv, "--home", str(tmp_path / "home")], stdout=write,
                          stderr=subprocess.PIPE, timeout=600)
    os.close(write)
    assert proc.returncode == 141, proc.stderr[-2000:]
    assert b"Traceback" not in proc.stderr and b"BrokenPipe" not in proc.stderr


def test_a_missing_source_path_is_named_as_a_path_not_a_run(capsys, home, tmp_path):
    capsys.readouterr()
    code = cli.main(["export", "hf", str(tmp_path / "no" / "such"), "--out", str(tmp_path / "o"),
                     "--home", str(home)])
    err = capsys.readouterr().err
    assert code == 1 and f"{tmp_path / 'no' / 'such'} does not exist" in err and "run" not in \
        err.split("does not exist")[0]
