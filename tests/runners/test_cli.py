import os
import subprocess
import sys

import pytest
import yaml

from components.common import errors
from runners import cli


def test_help_lists_every_subcommand_with_one_line(capsys):
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["--help"])
    assert exit_info.value.code == 0
    out = capsys.readouterr().out
    parser = cli.build_parser()
    action = parser._subparsers._group_actions[0]
    commands = action.choices
    assert set(commands) >= {"run", "generate", "lineage", "compile", "train-worker", "config"}
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
