"""eval.sets: the default held-out set (bigtrain's own code, shipped frozen), its inputs added once
to data.decontaminate.eval_files so the data stage removes overlapping training documents, the
names checked (they become MLMD property names), and the gates per set at their boundaries.

Mutations these catch: the decontamination entry appended on every build (a resolved config
loaded again lists it twice), a set with decontaminate: false still added, a gate at >= (exactly
at the threshold fails), a regression gate read against the candidate instead of the baseline,
and a shipped file that is not the frozen one (its digest)."""

import gzip
import hashlib
import json

import pytest
import yaml

from components.storage import listing
from components.config import ConfigError, build_config, to_dict
from components.config.heldout import HeldOutSetConfig
from components.evaluation import held_out_sets

FROZEN = "<heldout>/bigtrain-code-2026-11-27.jsonl.gz"
FROZEN_DIGEST = "2f36c0061787e0bf"   # sha256 of the file as committed on 2026-11-27


def test_the_default_set_is_shipped_frozen_and_decontaminated_once(tmp_path):
    config = build_config("tiny")
    (held_out,) = config.eval.sets
    assert held_out.name == "bigtrain_code" and held_out.input == FROZEN
    assert config.data.decontaminate.eval_files == (FROZEN,)
    path = listing.expand_input(FROZEN)
    data = open(path, "rb").read()
    # Byte-identical on every install: this digest is the file committed on 2026-11-27.
    assert hashlib.sha256(data).hexdigest()[:16] == FROZEN_DIGEST
    texts = [json.loads(line)["text"] for line in gzip.decompress(data).splitlines()]
    assert len(texts) == 34 and sum(len(t.encode()) for t in texts) > 200_000
    # the resolved config, saved and loaded again, lists the set once
    saved = tmp_path / "config.yaml"
    saved.write_text(yaml.safe_dump(to_dict(config)))
    again = build_config("tiny", yaml_path=str(saved))
    assert again.data.decontaminate.eval_files == (FROZEN,)


def test_sets_can_be_dropped_or_kept_out_of_decontamination(tmp_path):
    assert build_config("tiny", overrides=["eval.sets=[]"]).data.decontaminate.eval_files == ()
    mine = str(tmp_path / "*.txt")
    config = build_config("tiny", overrides=[
        f"eval.sets=[{{name: mine, input: '{mine}', decontaminate: false}}, "
        f"{{name: theirs, input: '{mine}.gz'}}]"])
    assert config.data.decontaminate.eval_files == (f"{mine}.gz",)


@pytest.mark.parametrize("sets, message", [
    ("[{name: Bad-Name, input: x}]", r"eval.sets\[0\].name: 'Bad-Name'"),
    ("[{name: a, input: x}, {name: a, input: y}]", r"eval.sets\[1\].name: 'a' is used twice"),
    ("[{name: a}]", r"eval.sets\[0\].input: empty"),
    ("[{name: a, input: x, max_bytes: 0}]", r"eval.sets\[0\]: max_bytes must be >= 1"),
    ("[{name: a, input: x, max_bits_per_byte: -1}]", r"max_bits_per_byte >= 0")])
def test_bad_sets_are_config_errors_naming_the_entry(sets, message):
    with pytest.raises(ConfigError, match=message):
        build_config("tiny", overrides=[f"eval.sets={sets}"])


def gates(**settings):
    return build_config("tiny", overrides=[
        "eval.sets=[{name: code, input: x, " + ", ".join(f"{k}: {v}" for k, v in settings.items())
        + "}]"]).eval


def test_gates_fail_above_their_threshold_only_and_name_the_set():
    measured = {"code": {"document_bits_per_byte": 2.0}}
    assert held_out_sets.gate_failures(measured, None, gates(max_bits_per_byte=2.0)) == []
    (failure,) = held_out_sets.gate_failures(measured, None, gates(max_bits_per_byte=1.999))
    assert failure.startswith("held-out code: 2.0000 bits/byte > eval.sets max_bits_per_byte 1.9990")
    baseline = {"code": {"document_bits_per_byte": 1.9}}
    regression = gates(max_bits_per_byte_regression=0.1)
    assert held_out_sets.gate_failures(measured, baseline, regression) == []   # 2.0 = 1.9 + 0.1
    (failure,) = held_out_sets.gate_failures(measured, {"code": {"document_bits_per_byte": 1.8}},
                                             regression)
    assert "baseline 1.8000 + max_bits_per_byte_regression 0.1000" in failure
    assert held_out_sets.gate_failures(measured, None, regression) == []        # no baseline yet


def test_the_memo_key_of_the_sets_changes_when_a_set_file_changes(tmp_path):
    """The Evaluator memoizes its figures per model and eval config; a set is a glob, so the key
    also carries its files' content digest: an edited set file is measured again (the same size
    and mtime: tests/components/test_held_out_set_reading.py).
    Catches a key over the config alone (stale figures for an edited set)."""
    (tmp_path / "a.txt").write_text("one\n")
    config = build_config("tiny", overrides=[f"eval.sets=[{{name: s, input: '{tmp_path}/*.txt'}}]"]).eval
    before = held_out_sets.sets_fingerprint(config)
    assert held_out_sets.sets_fingerprint(config) == before
    (tmp_path / "a.txt").write_text("one, and more\n")
    assert held_out_sets.sets_fingerprint(config) != before
    (tmp_path / "b.txt").write_text("two\n")
    assert len({before, held_out_sets.sets_fingerprint(config)}) == 2
