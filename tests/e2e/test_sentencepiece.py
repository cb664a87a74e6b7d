"""One CI-sized run with data.tokenizer=sentencepiece in its own home (the session's
`sentencepiece_run`, also the DirectRunner reference of test_portable_run.py): TokenizerGen trains on the
train documents, the data stage tokenizes with it, the pushed model embeds it (generate on raw
text under the TF1 session loader), and `lineage trace` shows the Tokenizer artifact."""

import os

import numpy as np
import pytest

from runners.cli import app as cli


@pytest.mark.slow   # trains or runs a pipeline (fast tier: docs/benchmarks.md)
def test_sentencepiece_run_pushes_a_self_contained_model(sentencepiece_run, capsys):
    run = sentencepiece_run
    assert run.exit_code == 0, run.stdout[-3000:] + run.stderr[-3000:]
    states = run.states()
    assert states["TokenizerGen"] == "complete" and states["Pusher"] == "complete"
    store = run.store()
    (tokenizer,) = store.get_artifacts_by_type("Tokenizer")
    assert tokenizer.properties["vocab_size"].int_value == 400
    (examples,) = store.get_artifacts_by_type("Examples")
    assert examples.custom_properties["vocab_size"].int_value == 400
    evaluation = store.get_artifacts_by_type("ModelEvaluation")[0]
    assert 0 < evaluation.custom_properties["bits_per_byte"].double_value < 12

    (version,) = run.serving_versions()
    served = os.path.join(run.home, "serving", "gpt", str(version))
    import tensorflow_text  # noqa: F401  (TF Serving links these ops in)
    from tests.export.conftest import SessionModel
    out = SessionModel(served).run("generate", prompt=np.array([b"def main():"], object),
                                   max_new_tokens=np.array([8], np.int32))
    assert out["new_tokens"].shape == (1,) and isinstance(out["text"][0], bytes)

    capsys.readouterr()
    assert cli.main(["lineage", "trace", served, "--home", run.home]) == 0
    text = capsys.readouterr().out
    assert "Tokenizer #" in text and "kind=sentencepiece" in text and "vocab_size=400" in text
    assert text.index("Examples #") < text.index("Tokenizer #")   # upstream of the examples
