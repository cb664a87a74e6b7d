"""`bigtrain ui --port`: 0 picks a free port, and the printed URL and the Host check use the port
it is bound to (it printed :0 and answered 421 to everything); 70000, -1 and words are usage
errors naming --port (70000 listened on 4464; -1 was an OverflowError traceback)."""

import os
import subprocess
import sys
import urllib.request

import pytest

from runners.cli import app as cli


@pytest.mark.parametrize("port", ["70000", "-1", "http"])
def test_a_port_outside_0_65535_is_a_usage_error_naming_it(ui_home, capsys, port):
    with pytest.raises(SystemExit) as exit_:
        cli.main(["ui", "--home", str(ui_home), f"--port={port}"])
    assert exit_.value.code == 2 and "--port" in capsys.readouterr().err


def test_port_0_serves_on_the_printed_port_and_answers_it(ui_home):
    bigtrain = os.path.join(os.path.dirname(sys.executable), "bigtrain")
    proc = subprocess.Popen([bigtrain, "ui", "--home", str(ui_home), "--port", "0"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = proc.stdout.readline()              # printed once the socket is bound
        assert line.startswith("bigtrain ui: http://127.0.0.1:"), (line, proc.stderr.read())
        url = line.split()[-1]
        assert not url.endswith(":0/")
        with urllib.request.urlopen(url, timeout=600) as response:   # the Host check passes
            assert response.status == 200 and "run-a" in response.read().decode()
    finally:
        proc.terminate()
        proc.wait(timeout=600)
