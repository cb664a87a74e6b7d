"""What a newcomer reads first: the run report's data counters fold the zeros into one line and
keep every non-zero one (-v lists all), the data stage's console line is one short line, and a
share mixture's sources table shows the share asked for beside the realized one.

Mutations these catch: the report listing every counter again (the old ~30 lines, 24 of them 0),
a non-zero counter folded away, -v not reaching the report, the console line replaced by the
~2,000-character JSON of every counter (the old log line), the quarantined figure counting exact
duplicates (which the manifest does not list), the asked share missing from the table."""

import json
import logging

from tfx.types import standard_artifacts

from components import config as config_lib
from components.text_example_gen import component, transforms
from pipeline.lineage.report import DATA_COUNTERS, RunReport, StageReport, format_report
from pipeline.lineage.report_data import sources_section

COUNTERS = dict(dict.fromkeys(transforms.COUNTER_NAMES, 0), files_seen=12, files_read=11,
                files_skipped_unreadable=1, documents_packed=3456, bytes_read=90_000,
                bytes_packed=80_000, bytes_duplicate=10_000, documents_skipped_duplicate=40,
                documents_skipped_empty=12, sequences_train=7_500, sequences_eval=390,
                tokens_real=70_000, tokens_padding=500)


def report(counters: dict, **extra) -> RunReport:
    examples = dict(counters, id=1, uri="/ex", input="/in", files_listed=12,
                    real_token_fraction=0.99, **extra)
    return RunReport("r", [StageReport("TextExampleGen", "complete", 1.0, 1,
                                       outputs={"Examples": examples})])


def data_lines(text: str) -> list[str]:
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("data: "))
    return [line for line in lines[start + 1:] if line.startswith("  ") and
            not line.startswith("  quarantine manifest")][:len(DATA_COUNTERS) + 1]


def test_the_report_folds_zero_counters_and_keeps_every_non_zero_one():
    lines = data_lines(format_report(report(COUNTERS)))
    named = [line.split()[0] for line in lines]
    non_zero = [n for n in DATA_COUNTERS if n == "real_token_fraction"
                or n == "files_listed" or COUNTERS.get(n)]
    assert named[:-1] == non_zero
    zeros = sum(1 for n in DATA_COUNTERS if n in COUNTERS and COUNTERS[n] == 0)
    assert zeros > 10 and lines[-1] == (
        f"  all other counters 0 ({zeros}; `bigtrain run -v` or counters.json lists every one)")
    assert not any(line.split()[-1] == "0" for line in lines[:-1])


def test_the_verbose_report_lists_every_counter():
    lines = data_lines(format_report(report(COUNTERS), all_counters=True))
    named = [line.split()[0] for line in lines]
    assert named[:len(DATA_COUNTERS)] == list(DATA_COUNTERS)
    assert "all other counters 0" not in "\n".join(lines)


def test_the_console_line_is_short_and_names_the_top_skip_reasons():
    line = component.console_line(dict(COUNTERS, documents_skipped_near_duplicate=3,
                                       documents_sampled_out=2), 12)
    assert line == ("data: 12 files, 3,456 documents, 7,890 sequences, 16 quarantined; "
                    "skipped: duplicate 40, empty 12, near_duplicate 3, +2 more")
    assert component.console_line(dict.fromkeys(transforms.COUNTER_NAMES, 0), 0) == (
        "data: 0 files, 0 documents, 0 sequences, 0 quarantined")


def test_the_data_stage_logs_one_short_line_and_the_counters_elsewhere(tmp_path, caplog):
    examples = standard_artifacts.Examples()
    examples.uri = str(tmp_path)
    source = {"name": "default", "input": "/in", "root": "/in", "format": "text",
              "document": "file"}
    found = dict(files_listed=12, fingerprint="f" * 64, manifest="m", listing="l",
                 sources=[source], tokenizer_dir=None, loaded=None, cleaning={})
    with caplog.at_level(logging.INFO):
        component.record_outputs(examples, config_lib.DataConfig(), dict(COUNTERS), found)
    ours = [r.getMessage() for r in caplog.records if r.name.startswith("bigtrain")]
    assert ours == [component.console_line(COUNTERS, 12)] and len(ours[0]) < 120
    (full,) = [r.getMessage() for r in caplog.records if "TextExampleGen counters" in r.getMessage()]
    assert not caplog.records[-1].name.startswith("bigtrain")   # the log file and -v only
    assert json.loads(full.split(": ", 1)[1])["documents_skipped_duplicate"] == 40


def test_a_share_mixture_shows_the_share_asked_for():
    row = lambda name, asked, share: {
        "name": name, "weight": 1.0, "share_asked": asked, "epochs": 0.5, "share": share,
        **{m: {"train": 1, "eval": 0} for m in ("documents", "bytes", "tokens")}}
    lines = sources_section({"sources": json.dumps([row("web", 0.7, 0.6962),
                                                    row("code", 0.3, 0.3038)])})
    assert lines[1].split()[:4] == ["source", "asked", "epochs", "share"]
    assert [line.split()[:4] for line in lines[2:]] == [["web", "70.0%", "0.500", "69.6%"],
                                                         ["code", "30.0%", "0.500", "30.4%"]]
    weights = sources_section({"sources": json.dumps([dict(row("a", None, 1.0), weight=2.5)])})
    assert weights[1].split()[1] == "weight" and weights[2].split()[1] == "2.5"


def test_run_prints_every_counter_with_verbose(monkeypatch, capsys):
    """`bigtrain run -v` (RunPlan.verbose, and the up-to-date path's verbose) reaches the report."""
    from pipeline.lineage import report as report_lib
    from runners.local import run as local
    monkeypatch.setattr(report_lib, "run_report", lambda store, run_id, **kw: report(COUNTERS))
    local._print_report(None, "r")
    assert "all other counters 0" in capsys.readouterr().out
    local._print_report(None, "r", all_counters=True)
    out = capsys.readouterr().out
    assert "all other counters 0" not in out and "  documents_skipped_binary " in out
    assert local.RunPlan("r", "d", "l", "f", {}, ()).verbose is False
