"""One real pipeline run per session (LocalDagRunner, DirectRunner, MLMD sqlite in a temporary
home), shared by every assertion in this package."""

import os
from dataclasses import dataclass

import pytest

from pipeline import cli


@dataclass
class PipelineRun:
    home: str
    exit_code: int
    stdout: str
    stderr: str

    @property
    def metadata_path(self) -> str:
        return os.path.join(self.home, "metadata.sqlite")

    def store(self):
        from pipeline.report import open_store
        return open_store(self.metadata_path)


def run_cli(capsys, home, *extra) -> PipelineRun:
    capsys.readouterr()
    code = cli.main(["run", "--home", home, *extra])
    captured = capsys.readouterr()
    return PipelineRun(home, code, captured.out, captured.err)


@pytest.fixture(scope="session")
def session_capsys(request):
    """capsys is function-scoped; session fixtures capture through the capture manager."""
    capman = request.config.pluginmanager.getplugin("capturemanager")

    class _Capture:
        def readouterr(self):
            out, err = capman.read_global_capture()
            return type("C", (), {"out": out, "err": err})()
    return _Capture()


@pytest.fixture(scope="session")
def data_run(tmp_path_factory, corpus, session_capsys):
    root, quarantined = corpus
    home = str(tmp_path_factory.mktemp("home"))
    run = run_cli(session_capsys, home, "--set", f"data.input={root}",
                  "--set", "data.eval_fraction=0.3", "--set", "data.seq_len=64",
                  "--set", "train.train_steps=120", "--set", "train.warmup_steps=10",
                  "--set", "train.checkpoint_every=50", "--set", "train.log_every=40")
    run.quarantined = quarantined
    run.corpus = root
    return run
