"""Evaluation inputs checked before the first stage (components/corpus/eval_inputs.py, issue 57):
a typo, a truncated gzip, a line that is not JSON, a file with no document, a broken link or a
FIFO in an eval set or a decontamination entry is a ConfigError naming the setting, the set and
the file; `bigtrain run` exits 2 with that line before the lock, the store or TFX.

Catches: no check at all (the typo found by the data stage as `unexpected FileNotFoundError:
data.input ...`, or by the Evaluator after training), a gzip read only to its first document
(truncation unseen), a JSONL whose first lines are accepted without a document, the decontamination
entry a set added named instead of the set, and a check that runs after the pipeline started."""

import gzip
import json
import os

import pytest

from components.config import ConfigError, build_config
from components.corpus import contamination, eval_inputs
from runners.cli import app as cli

GOOD = b'{"id": 1, "text": "a held-out document"}\n'


def config_with(*sets, eval_files=()):
    """A tiny config whose eval.sets are (name, input[, decontaminate]) and whose
    data.decontaminate.eval_files add eval_files."""
    entries = ", ".join(f"{{name: {s[0]}, input: '{s[1]}', decontaminate: "
                        f"{str(s[2] if len(s) > 2 else True).lower()}}}" for s in sets)
    config = build_config("tiny", overrides=[f"eval.sets=[{entries}]"])
    if eval_files:
        config = build_config("tiny", overrides=[
            f"eval.sets=[{entries}]", "data.decontaminate.eval_files=["
            + ", ".join(f"'{p}'" for p in config.data.decontaminate.eval_files + eval_files) + "]"])
    return config


def write_gz(path, data: bytes) -> str:
    path.write_bytes(gzip.compress(data))
    return str(path)


def test_good_sets_and_the_shipped_default_pass(tmp_path):
    write_gz(tmp_path / "a.jsonl.gz", GOOD * 3)
    (tmp_path / "story.txt").write_text("once upon a time")
    assert eval_inputs.check_eval_inputs(build_config("tiny")) == 1     # <heldout>'s own file
    config = config_with(("jl", f"{tmp_path}/*.jsonl.gz"), eval_files=(f"{tmp_path}/story.txt",))
    assert eval_inputs.check_eval_inputs(config) == 2


def test_a_typo_in_a_decontaminating_sets_glob_names_the_set_not_data_input(tmp_path):
    config = config_with(("good", eval_inputs_default()), ("jlbad", f"{tmp_path}/nothing/*.txt"))
    with pytest.raises(ConfigError) as raised:
        eval_inputs.check_eval_inputs(config)
    message = str(raised.value)
    assert message.startswith(f"eval.sets[1] (jlbad).input '{tmp_path}/nothing/*.txt'"), message
    assert "matches no files" in message and "data.input" not in message


def eval_inputs_default() -> str:
    return build_config("tiny").eval.sets[0].input


def test_a_typo_in_a_set_kept_out_of_decontamination_is_found_too(tmp_path):
    config = config_with(("mine", f"{tmp_path}/typo*.jsonl", False))
    assert config.data.decontaminate.eval_files == ()
    with pytest.raises(ConfigError, match=r"^eval.sets\[0\] \(mine\).input .* matches no files"):
        eval_inputs.check_eval_inputs(config)


def test_a_typo_in_a_decontamination_entry_names_its_index(tmp_path):
    (tmp_path / "ok.txt").write_text("text")
    config = build_config("tiny", overrides=["eval.sets=[]", "data.decontaminate.eval_files="
                                             f"['{tmp_path}/ok.txt', '{tmp_path}/nope/*.jsonl']"])
    with pytest.raises(ConfigError, match=r"^data.decontaminate.eval_files\[1\] '.*/nope/\*.jsonl'"):
        eval_inputs.check_eval_inputs(config)


def test_a_truncated_gzip_names_the_set_and_the_file(tmp_path):
    data = gzip.compress(GOOD * 100_000)
    bad = tmp_path / "sets" / "b.jsonl.gz"
    bad.parent.mkdir()
    bad.write_bytes(data[:len(data) // 2])        # its first MBs decompress fine
    write_gz(tmp_path / "sets" / "a.jsonl.gz", GOOD)
    with pytest.raises(ConfigError) as raised:
        eval_inputs.check_eval_inputs(config_with(("jlbad", f"{tmp_path}/sets/*.jsonl.gz")))
    assert str(raised.value).startswith(
        f"eval.sets[0] (jlbad).input '{tmp_path}/sets/*.jsonl.gz': {bad}: cannot be read "
        "(truncated gzip: "), raised.value


def test_a_truncated_gzip_past_the_bound_is_named_by_the_stage_that_reads_it(tmp_path):
    """What the data stage and the Evaluator read (contamination.eval_texts): a ValueError naming
    the file, not a bare EOFError."""
    data = gzip.compress(GOOD * 2000)
    (tmp_path / "big.jsonl.gz").write_bytes(data[:len(data) // 2])
    with pytest.raises(ValueError, match=f"^evaluation file {tmp_path}/big.jsonl.gz: cannot be "
                                         "read \\(EOFError: "):
        list(contamination.eval_texts(str(tmp_path / "big.jsonl.gz")))


def test_a_gzip_over_the_bound_is_read_to_its_first_document_only(tmp_path, monkeypatch):
    data = gzip.compress(GOOD * 100_000)      # 4 MB: its first read block lies before the cut
    (tmp_path / "big.jsonl.gz").write_bytes(data[:len(data) // 2])
    monkeypatch.setattr(eval_inputs, "GZIP_READ_WHOLE_BYTES", len(data) // 4)
    eval_inputs.check_eval_file(str(tmp_path / "big.jsonl.gz"), "eval.sets[0] (big).input")


@pytest.mark.parametrize("name, content, says", [
    ("empty.txt", b"", "holds no document (no non-blank text)"),
    ("blank.txt", b"  \n\n\t", "holds no document"),
    ("nodoc.jsonl", b'{"id": 1}\n\n{"text": "  "}\n[1, 2]\n',
     "holds no document (no non-blank text in any JSON string value)"),
    ("nodoc.jsonl.gz", gzip.compress(b'{"n": 3}\n', mtime=0), "holds no document"),
    ("broken.jsonl", b'{"text": "a"\n' + GOOD, "line 1: not JSON"),
    ("late.jsonl", b'{"n": 1}\n\n{"text": oops}\n' + GOOD, "line 3: not JSON"),
    ("notgzip.txt.gz", b"plain text, not gzip", "cannot be read (BadGzipFile: "),
])
def test_a_file_without_a_document_is_named(tmp_path, name, content, says):
    (tmp_path / name).write_bytes(content)
    where = "data.decontaminate.eval_files[0] 'x'"
    with pytest.raises(ConfigError) as raised:
        eval_inputs.check_eval_file(str(tmp_path / name), where)
    assert str(raised.value).startswith(f"{where}: {tmp_path / name}: {says}"), raised.value


def test_a_document_after_records_without_text_is_found(tmp_path):
    (tmp_path / "late.jsonl").write_bytes(b'{"n": 1}\n\n{"meta": {"tags": []}}\n'
                                          + json.dumps({"q": {"a": ["", "found"]}}).encode())
    eval_inputs.check_eval_file(str(tmp_path / "late.jsonl"), "x")


def test_a_broken_link_or_a_fifo_is_named_without_opening_it(tmp_path):
    os.symlink(tmp_path / "gone.txt", tmp_path / "link.txt")
    os.mkfifo(tmp_path / "pipe.txt")     # opening it would wait for a writer forever
    for name in ("link.txt", "pipe.txt"):
        with pytest.raises(ConfigError, match=f"{name}: not a regular file"):
            eval_inputs.check_eval_file(str(tmp_path / name), "eval.sets[0] (s).input")


def test_bigtrain_run_exits_2_naming_the_set_before_the_pipeline_starts(tmp_path, capsys,
                                                                        monkeypatch):
    import runners.local.run
    started = []
    monkeypatch.setattr(runners.local.run, "run_local", lambda *args: started.append(args))
    (tmp_path / "cfg.yaml").write_text(
        f"eval:\n  sets:\n    - {{name: jlbad, input: '{tmp_path}/nothing/*.txt'}}\n")
    home = tmp_path / "home"
    code = cli.main(["run", "--preset", "tiny", "--home", str(home), "--config",
                     str(tmp_path / "cfg.yaml")])
    err = capsys.readouterr().err
    assert code == 2 and started == []
    assert err == (f"bigtrain: config error: eval.sets[0] (jlbad).input '{tmp_path}/nothing/*.txt' "
                   f"(expanded to '{tmp_path}/nothing/*.txt') matches no files (a typo? an "
                   "evaluation set must name at least one file)\n"), err
    assert not (home / "metadata.sqlite").exists() and not (home / "runs").exists()


def test_a_truncated_gzip_on_the_object_store_is_named(monkeypatch):
    """The S3 server (`make objectstore`; skipped when absent, as other S3 tests): the same rule and
    the same check through tf.io.gfile's S3 filesystem (1.5 CPU-s alone, 2026-12-07)."""
    from components.storage import fs
    from tests.support.objectstore import use_objectstore
    prefix = use_objectstore(monkeypatch) + "/sets"
    data = gzip.compress(GOOD * 100_000)
    fs.s3_put(f"{prefix}/a.jsonl.gz", gzip.compress(GOOD))
    fs.s3_put(f"{prefix}/deeper/b.jsonl.gz", data[:len(data) // 2])
    assert eval_inputs.check_pattern(f"{prefix}/*.jsonl.gz", "eval.sets[0] (s3).input") == 1
    with pytest.raises(ConfigError) as raised:
        eval_inputs.check_pattern(f"{prefix}/**/*.jsonl.gz", "eval.sets[0] (s3).input")
    assert str(raised.value).startswith(
        f"eval.sets[0] (s3).input '{prefix}/**/*.jsonl.gz': {prefix}/deeper/b.jsonl.gz: cannot be "
        "read (truncated gzip: "), raised.value
