import os
import subprocess
import sys

import pytest
import yaml

from components import config as config_lib
from components.common import errors
from runners.cli import app as cli, plumbing as cli_plumbing


def test_help_lists_every_subcommand_with_one_line(capsys):
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["--help"])
    assert exit_info.value.code == 0
    out = capsys.readouterr().out
    parser = cli.build_parser()
    action = parser._subparsers._group_actions[0]
    commands = action.choices
    assert set(commands) == {"run", "generate", "lineage", "ui", "compile", "config", "plumbing",
                             "export"}
    helps = {a.dest: a.help for a in action._choices_actions}
    for name in commands:
        assert helps[name] and "\n" not in helps[name], name  # one line each
        assert any(line.split()[:1] == [name] for line in out.splitlines()), name
        with pytest.raises(SystemExit) as sub_exit:
            cli.main([name, "--help"])
        assert sub_exit.value.code == 0
        assert f"usage: bigtrain {name}" in capsys.readouterr().out


def test_config_command_prints_resolved_yaml(capsys, tmp_path):
    assert cli.main(["config", "--set", "train.train_steps=120", "--home", str(tmp_path),
                     "--beam-arg=--direct_num_workers=2"]) == 0
    printed = yaml.safe_load(capsys.readouterr().out)
    assert printed["train"]["train_steps"] == 120
    assert printed["paths"]["home"] == str(tmp_path)
    assert printed["runtime"]["beam_args"][-1] == "--direct_num_workers=2"


def test_config_error_exits_2_naming_the_key(capsys):
    assert cli.main(["config", "--set", "model.n_heads=3"]) == errors.EXIT_CONFIG
    assert "model.n_heads" in capsys.readouterr().err


def test_console_script_is_installed():
    script = os.path.join(os.path.dirname(sys.executable), "bigtrain")
    out = subprocess.run([script, "--help"], capture_output=True, text=True, check=True).stdout
    assert "usage: bigtrain" in out


@pytest.mark.parametrize("question", ["runs", "trace", "diff", "graph", "why"])
def test_every_lineage_question_has_help(question, capsys):
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["lineage", question, "--help"])
    assert exit_info.value.code == 0
    out = capsys.readouterr().out
    assert f"usage: bigtrain lineage {question}" in out and "--json" in out


def test_lineage_without_a_store_is_a_clear_error(tmp_path, capsys):
    assert cli.main(["lineage", "runs", "--home", str(tmp_path)]) == errors.EXIT_STORE
    assert "no metadata database at" in capsys.readouterr().err


# -- the global options and the plumbing group ------------------------------------------------

def test_version_prints_the_installed_package_version(capsys):
    """Against the package metadata pip recorded (an independent source of the version)."""
    from importlib import metadata
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["--version"])
    assert exit_info.value.code == 0
    assert capsys.readouterr().out.strip() == f"bigtrain {metadata.version('bigtrain')}"


@pytest.mark.parametrize("argv", [["-v", "config"], ["config", "-v"], ["--verbose", "config"],
                                  ["config", "--verbose"]])
def test_verbose_before_or_after_the_subcommand(argv):
    assert cli.build_parser().parse_args(argv).verbose is True


def test_verbose_before_the_subcommand_is_not_reset_by_it():
    """A subcommand's copy of a global option must not overwrite the value given before it."""
    args = cli.build_parser().parse_args(["-v", "--home", "h", "lineage", "runs"])
    assert args.verbose is True and args.home == "h"
    assert cli.build_parser().parse_args(["lineage", "runs"]).verbose is False


def test_verbose_shows_the_traceback_of_an_error(capsys, tmp_path):
    missing = str(tmp_path / "nope.yaml")
    assert cli.main(["config", "--config", missing]) == errors.EXIT_CONFIG
    assert "Traceback" not in capsys.readouterr().err
    assert cli.main(["-v", "config", "--config", missing]) == errors.EXIT_CONFIG
    assert "Traceback" in capsys.readouterr().err


@pytest.mark.parametrize("position", ["before", "after"])
def test_home_is_one_option_before_or_after_the_subcommand(position, tmp_path, capsys):
    home = ["--home", str(tmp_path)]
    argv = home + ["config"] if position == "before" else ["config"] + home
    assert cli.main(argv) == 0
    assert yaml.safe_load(capsys.readouterr().out)["paths"]["home"] == str(tmp_path)


def test_home_has_one_help_text_everywhere(capsys):
    for argv in (["--help"], ["run", "--help"], ["generate", "--help"], ["lineage", "runs", "--help"],
                 ["plumbing", "train-worker", "--help"]):
        with pytest.raises(SystemExit):
            cli.main(argv)
        out = " ".join(capsys.readouterr().out.split())
        assert "--home DIR directory holding all run state" in out, argv


def test_train_worker_is_under_plumbing_only(capsys):
    args = cli.build_parser().parse_args(["plumbing", "train-worker", "--examples", "e", "--out", "o",
                                          "--set", "train.train_steps=3"])
    assert args.func is cli_plumbing.cmd_plumbing_train_worker and args.overrides == ["train.train_steps=3"]
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["train-worker", "--examples", "e", "--out", "o"])
    assert exit_info.value.code == 2 and "invalid choice: 'train-worker'" in capsys.readouterr().err


# -- the metadata store: one choice for every command -----------------------------------------

def _metadata(capsys, *argv):
    assert cli.main(["config", *argv]) == 0
    return yaml.safe_load(capsys.readouterr().out)["metadata"]


def test_metadata_default_is_the_config_section(capsys, monkeypatch, tmp_path):
    monkeypatch.delenv("BIGTRAIN_METADATA", raising=False)
    m = _metadata(capsys, "--set", "metadata.backend=mysql", "--set", "metadata.mysql_port=3307")
    assert (m["backend"], m["mysql_port"], m["sqlite_path"]) == ("mysql", 3307, "")


def test_metadata_uri_sqlite(capsys, monkeypatch, tmp_path):
    monkeypatch.delenv("BIGTRAIN_METADATA", raising=False)
    m = _metadata(capsys, "--metadata", str(tmp_path / "m.sqlite"))
    assert (m["backend"], m["sqlite_path"]) == ("sqlite", str(tmp_path / "m.sqlite"))
    monkeypatch.chdir(tmp_path)
    m = _metadata(capsys, "--metadata", "sqlite:rel/m.sqlite")
    assert m["sqlite_path"] == str(tmp_path / "rel" / "m.sqlite")


def test_metadata_uri_mysql_over_the_config_section(capsys, monkeypatch):
    monkeypatch.delenv("BIGTRAIN_METADATA", raising=False)
    m = _metadata(capsys, "--set", "metadata.mysql_host=elsewhere",
                  "--metadata", "mysql://ml@db.example:33306/lineage")
    assert {k: m[k] for k in ("backend", "mysql_host", "mysql_port", "mysql_user", "mysql_database")} \
        == {"backend": "mysql", "mysql_host": "db.example", "mysql_port": 33306, "mysql_user": "ml",
            "mysql_database": "lineage"}
    m = _metadata(capsys, "--metadata", "mysql://db.example")  # user, port, database defaulted
    assert (m["mysql_user"], m["mysql_port"], m["mysql_database"]) == ("root", 3306, "metadb")


def test_metadata_from_the_environment_and_the_flag_wins(capsys, monkeypatch, tmp_path):
    monkeypatch.setenv("BIGTRAIN_METADATA", "mysql://ml@db.example/lineage")
    assert _metadata(capsys)["mysql_host"] == "db.example"
    m = _metadata(capsys, "--metadata", str(tmp_path / "m.sqlite"))
    assert m["backend"] == "sqlite"


@pytest.mark.parametrize("uri, words", [("mysql://ml:secret@db/x", "BIGTRAIN_METADATA_PASSWORD"),
                                        ("postgres://db/x", "expected a sqlite file path"),
                                        ("mysql://db:port/x", "port is not a number")])
def test_bad_metadata_uri_is_a_config_error(uri, words, capsys, monkeypatch):
    monkeypatch.delenv("BIGTRAIN_METADATA", raising=False)
    assert cli.main(["config", "--metadata", uri]) == errors.EXIT_CONFIG
    err = capsys.readouterr().err
    assert words in err and "secret" not in err


def test_mysql_password_only_from_the_environment(monkeypatch):
    from runners.local import metadata
    monkeypatch.delenv("BIGTRAIN_METADATA", raising=False)
    config = cli.resolve_config(cli.build_parser().parse_args(
        ["config", "--metadata", "mysql://ml@db.example:33306/lineage"]))
    monkeypatch.setenv("BIGTRAIN_METADATA_PASSWORD", "s3cret")
    connection = metadata.connection(config, read_only=False)
    assert (connection.mysql.host, connection.mysql.port, connection.mysql.user,
            connection.mysql.database, connection.mysql.password) == (
        "db.example", 33306, "ml", "lineage", "s3cret")
    monkeypatch.delenv("BIGTRAIN_METADATA_PASSWORD")
    with pytest.raises(config_lib.ConfigError, match="environment variable BIGTRAIN_METADATA_PASSWORD"):
        metadata.connection(config, read_only=False)


def test_lineage_without_the_password_names_the_variable(capsys, monkeypatch):
    monkeypatch.delenv("BIGTRAIN_METADATA_PASSWORD", raising=False)
    assert cli.main(["lineage", "runs", "--metadata", "mysql://ml@127.0.0.1:1/x"]) == errors.EXIT_CONFIG
    assert "BIGTRAIN_METADATA_PASSWORD" in capsys.readouterr().err


def test_lineage_reads_the_sqlite_file_named_by_metadata(tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("BIGTRAIN_METADATA", raising=False)
    missing = tmp_path / "other.sqlite"
    assert cli.main(["lineage", "runs", "--home", str(tmp_path / "no-home"),
                     "--metadata", str(missing)]) == errors.EXIT_STORE
    assert f"no metadata database at {missing}" in capsys.readouterr().err


# -- which errors are one line ----------------------------------------------------------------

def _exit_code_of_documented_example(words: str) -> int:
    """The code of the docs/operations.md exit-code table row whose examples quote `words`."""
    path = os.path.join(os.path.dirname(__file__), "..", "..", "docs", "operations.md")
    with open(path, encoding="utf-8") as fh:
        rows = [line.split("|") for line in fh if line.startswith("| ") and words in line]
    assert len(rows) == 1, f"one exit-code row quotes {words!r}: {rows}"
    return int(rows[0][1])


def test_a_bug_inside_a_command_keeps_its_traceback(capsys, monkeypatch):
    """A KeyError from inside a command is a bug, not a lookup the user got wrong: its traceback
    (without -v), then one line naming it and the -v hint, exit 1. Catches `except LookupError`
    turning every KeyError/IndexError into a bare one-line message."""
    def broken_command(args):
        return {}["no-such-key"]
    monkeypatch.setattr(cli, "cmd_config", broken_command)
    assert cli.main(["config"]) == errors.EXIT_FAILED
    err = capsys.readouterr().err
    assert "Traceback (most recent call last)" in err and "broken_command" in err
    assert err.rstrip().splitlines()[-1].startswith("bigtrain: unexpected KeyError: 'no-such-key'")
    assert "-v adds" in err


def test_an_unknown_run_stays_one_line_with_its_documented_code(capsys, tmp_path, monkeypatch):
    """The lineage store's named lookup error (NotFoundError): one line, no traceback, and the exit
    code docs/operations.md gives it; with -v the traceback too."""
    from pipeline.lineage.connection import connection_config, open_store
    monkeypatch.delenv("BIGTRAIN_METADATA", raising=False)
    open_store(connection_config(str(tmp_path / "metadata.sqlite"), read_only=False))  # empty store
    argv = ["lineage", "why", "no-such-run", "--home", str(tmp_path)]
    code = cli.main(argv)
    err = capsys.readouterr().err
    assert err == "bigtrain: run 'no-such-run' not found; see `bigtrain lineage runs`\n"
    assert code == errors.NotFoundError.exit_code == _exit_code_of_documented_example("not found")
    assert cli.main(["-v", *argv]) == code and "Traceback" in capsys.readouterr().err


# -- generate reads where runs push ------------------------------------------------------------

@pytest.fixture(scope="module")
def echo_model(tmp_path_factory):
    """copy(path): a copy of one SavedModel (exported once per module) with the `generate`
    signature's inputs and outputs: text = the prompt upper-cased (which model answered)."""
    import shutil
    exported = str(tmp_path_factory.mktemp("echo") / "model")
    _export_echo_model(exported)
    return lambda path: shutil.copytree(exported, path)


def _export_echo_model(path: str) -> None:
    import tensorflow as tf

    class Echo(tf.Module):
        @tf.function(input_signature=[tf.TensorSpec([None], tf.string),
                                      tf.TensorSpec([None], tf.int32)])
        def generate(self, prompt, max_new_tokens):
            return {"text": tf.strings.upper(prompt)}

    echo = Echo()
    tf.saved_model.save(echo, path, signatures={"generate": echo.generate})


def test_generate_reads_the_serving_dir_runs_push_to(tmp_path, capsys, monkeypatch, echo_model):
    """orchestrator.serving_dir set to a custom folder: generate loads the newest version there,
    the folder `bigtrain run` pushes to (LocalPaths), not <home>/serving. Catches a generate that
    restates <home>/serving."""
    from runners.local.run import LocalPaths
    monkeypatch.delenv("BIGTRAIN_METADATA", raising=False)
    home, custom = tmp_path / "home", tmp_path / "elsewhere" / "served"
    settings = ["--home", str(home), "--set", f"orchestrator.serving_dir={custom}"]
    config = cli.resolve_config(cli.build_parser().parse_args(["config", *settings]))
    assert LocalPaths.for_config(config).serving_dir == str(custom)  # where runs push
    echo_model(str(custom / "gpt" / "3"))
    echo_model(str(home / "serving" / "gpt" / "5"))  # the old guess: must not be read
    assert cli.main(["generate", "abc", "--temperature", "0", *settings]) == 0
    out, err = capsys.readouterr()
    assert out == "abcABC\n" and f"[{custom / 'gpt' / '3'}]" in err
    # Nothing pushed under the configured folder: the message names it.
    assert cli.main(["generate", "abc", "--model", "other", *settings]) == errors.EXIT_FAILED
    assert f"no pushed model under {custom / 'other'}" in capsys.readouterr().err


def test_generate_takes_a_prompt_that_is_not_utf8_and_bounds_its_numbers(tmp_path, capsys,
                                                                       echo_model):
    """An argument that is not UTF-8 (it arrives with surrogate escapes) was a UnicodeEncodeError
    traceback; --seed / --max-new-tokens beyond int32 an overflow traceback from TensorFlow. Now:
    the prompt's bytes go to the model (U+FFFD where printed), the numbers are usage errors naming
    the option."""
    import os
    home = tmp_path / "home"
    echo_model(str(home / "serving" / "gpt" / "1"))
    prompt = os.fsdecode(b"ab\xff")
    assert cli.main(["generate", prompt, "--temperature", "0", "--home", str(home)]) == 0
    assert capsys.readouterr().out == "ab\ufffdAB\ufffd\n"
    # (a negative count is the signature's own named error: tests/export/test_serving_signatures)
    for option, value in (("--seed", "100000000000000000000000000"),
                          ("--max-new-tokens", "2147483648"), ("--max-new-tokens", "1e23")):
        with pytest.raises(SystemExit) as exit_:
            cli.main(["generate", "x", option, value, "--home", str(home)])
        assert exit_.value.code == 2 and option in capsys.readouterr().err


def test_generate_on_a_truncated_pushed_version_is_a_named_error(tmp_path, capsys, echo_model):
    """A truncated saved_model.pb in the newest version was a raw protobuf traceback (issue 41)."""
    home = tmp_path / "home"
    path = home / "serving" / "gpt" / "2"
    echo_model(str(path))
    data = (path / "saved_model.pb").read_bytes()
    (path / "saved_model.pb").write_bytes(data[:len(data) // 3])
    assert cli.main(["generate", "x", "--home", str(home)]) == errors.EXIT_FAILED
    err = capsys.readouterr().err
    assert f"the pushed version {path} cannot be loaded" in err and "Traceback" not in err
